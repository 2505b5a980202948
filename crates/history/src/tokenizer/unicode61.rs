//! unicode61 character classes, exactly as SQLite's: categories, case folding, diacritic
//! removal and its UTF-8 reader/writer (tables in `tables.rs`).

use super::*;

/// unicode61's category numbering (`sqlite3Fts5UnicodeCatParse`); 0 is "no data", which SQLite
/// always treats as a token character, and 30 is never returned.
pub const CATEGORY_NAMES: [(&str, u8); 29] = [
    ("Cc", 1),
    ("Cf", 2),
    ("Cn", 3),
    ("Cs", 4),
    ("Ll", 5),
    ("Lm", 6),
    ("Lo", 7),
    ("Lt", 8),
    ("Lu", 9),
    ("Mc", 10),
    ("Me", 11),
    ("Mn", 12),
    ("Nd", 13),
    ("Nl", 14),
    ("No", 15),
    ("Pc", 16),
    ("Pd", 17),
    ("Pe", 18),
    ("Pf", 19),
    ("Pi", 20),
    ("Po", 21),
    ("Ps", 22),
    ("Sc", 23),
    ("Sk", 24),
    ("Sm", 25),
    ("So", 26),
    ("Zl", 27),
    ("Zp", 28),
    ("Zs", 29),
];
pub const CATEGORY_CO: u8 = 31;
pub(crate) const CATEGORY_MASK: u8 = 0x1F;
/// BMP class byte: low five bits are the category, then these flags.
pub(crate) const CLASS_FOLDS: u8 = 0x20;
pub(crate) const CLASS_CJK: u8 = 0x40;
pub(crate) const CLASS_DIACRITIC: u8 = 0x80;

/// One byte per BMP code point, so the hot path never binary-searches for ordinary text.
pub fn bmp_classes() -> &'static [u8] {
    static CLASSES: OnceLock<Box<[u8]>> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let mut classes = vec![0u8; 0x1_0000].into_boxed_slice();
        for (i, &(start, category)) in tables::CATEGORY_RUNS.iter().enumerate() {
            let end = tables::CATEGORY_RUNS
                .get(i + 1)
                .map_or(0x11_0000, |&(next, _)| next);
            for c in start..end.min(0x1_0000) {
                classes[c as usize] = category;
            }
        }
        for &(c, _) in tables::FOLDS {
            if c < 0x1_0000 {
                classes[c as usize] |= CLASS_FOLDS;
            }
        }
        for &c in tables::DIACRITICS {
            if c < 0x1_0000 {
                classes[c as usize] |= CLASS_DIACRITIC;
            }
        }
        for (c, class) in classes.iter_mut().enumerate() {
            if is_cjk_code(c as u32) {
                *class |= CLASS_CJK;
            }
        }
        classes
    })
}

pub(crate) fn category(c: u32) -> u8 {
    if c < 0x1_0000 {
        return bmp_classes()[c as usize] & CATEGORY_MASK;
    }
    if c >= 0x11_0000 {
        return 0;
    }
    let run = tables::CATEGORY_RUNS.partition_point(|&(start, _)| start <= c);
    run.checked_sub(1)
        .and_then(|i| tables::CATEGORY_RUNS.get(i))
        .map_or(0, |&(_, category)| category)
}

pub(crate) fn is_diacritic(c: u32) -> bool {
    c < 0x1_0000 && bmp_classes()[c as usize] & CLASS_DIACRITIC != 0
}

/// Folds one code point the way unicode61 does; 0 means "drop it" (a removed diacritic).
pub fn fold(c: u32, diacritics: usize, classes: &[u8]) -> u32 {
    if c < 0x80 {
        return if (0x41..=0x5A).contains(&c) {
            c + 32
        } else {
            c
        };
    }
    if c < 0x1_0000 && classes[c as usize] & CLASS_FOLDS == 0 {
        return c;
    }
    match tables::FOLDS.binary_search_by_key(&c, |&(from, _)| from) {
        Ok(i) => tables::FOLDS[i].1[diacritics],
        Err(_) => c,
    }
}

/// unicode61's UTF-8 reader (`FTS5_READ_UTF8`), reproduced so invalid input splits identically:
/// a lead byte swallows every following continuation byte, overlong/surrogate/U+FFFE/U+FFFF
/// results become U+FFFD, and a stray continuation byte reads as its own value.
pub fn read_utf8(text: &[u8], mut i: usize) -> (u32, usize) {
    const LEAD: [u8; 64] = [
        0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,
        0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d,
        0x1e, 0x1f, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
        0x0d, 0x0e, 0x0f, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x00, 0x01, 0x02, 0x03,
        0x00, 0x01, 0x00, 0x00,
    ];
    let first = text[i];
    i += 1;
    if first < 0xC0 {
        return (u32::from(first), i);
    }
    let mut c = u32::from(LEAD[usize::from(first - 0xC0)]);
    while let Some(&b) = text.get(i) {
        if b & 0xC0 != 0x80 {
            break;
        }
        c = c.wrapping_shl(6).wrapping_add(u32::from(b & 0x3F));
        i += 1;
    }
    if c < 0x80 || (c & 0xFFFF_F800) == 0xD800 || (c & 0xFFFF_FFFE) == 0xFFFE {
        c = 0xFFFD;
    }
    (c, i)
}

/// `FTS5_WRITE_UTF8`: also encodes the out-of-range values `read_utf8` can produce.
pub fn push_utf8(out: &mut Vec<u8>, c: u32) {
    let mut bytes = [0u8; 4];
    let len = encode_utf8(c, &mut bytes);
    out.extend_from_slice(&bytes[..len]);
}

/// [`push_utf8`] into a fixed buffer; returns the length.
pub(crate) fn encode_utf8(c: u32, out: &mut [u8; 4]) -> usize {
    if c < 0x80 {
        out[0] = c as u8;
        1
    } else if c < 0x800 {
        out[0] = 0xC0 | ((c >> 6) & 0x1F) as u8;
        out[1] = 0x80 | (c & 0x3F) as u8;
        2
    } else if c < 0x1_0000 {
        out[0] = 0xE0 | ((c >> 12) & 0x0F) as u8;
        out[1] = 0x80 | ((c >> 6) & 0x3F) as u8;
        out[2] = 0x80 | (c & 0x3F) as u8;
        3
    } else {
        out[0] = 0xF0 | ((c >> 18) & 0x07) as u8;
        out[1] = 0x80 | ((c >> 12) & 0x3F) as u8;
        out[2] = 0x80 | ((c >> 6) & 0x3F) as u8;
        out[3] = 0x80 | (c & 0x3F) as u8;
        4
    }
}
