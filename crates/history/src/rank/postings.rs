//! Posting lists of a summarised segment: for one term, every document of the segment holding
//! it in a searched column, in id order, with the term's frequency there and the document's
//! length (FTS5's token count over all columns) — everything BM25 needs, in one blob.
//!
//! Encoding: varint count, then per document varint (id − previous id, starting from the
//! segment's `lo − 1`), varint frequency, varint length.

/// One document holding the term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posting {
    pub id: i64,
    pub tf: u32,
    pub len: u32,
}

pub fn encode(lo: i64, postings: &[Posting]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + postings.len() * 4);
    put_varint(&mut out, postings.len() as u64);
    let mut prev = lo - 1;
    for p in postings {
        put_varint(&mut out, (p.id - prev).unsigned_abs());
        put_varint(&mut out, u64::from(p.tf));
        put_varint(&mut out, u64::from(p.len));
        prev = p.id;
    }
    out
}

/// `None` for anything [`encode`] cannot have written for a segment starting at `lo` and
/// ending at `hi`.
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub fn decode(lo: i64, hi: i64, bytes: &[u8]) -> Option<Vec<Posting>> {
    let mut out = Vec::new();
    decode_into(lo, hi, bytes, &mut out).then_some(out)
}

/// Appends the postings of a list [`encode`] wrote for the segment `lo..=hi` to `out`; on
/// anything it cannot have written, leaves `out` as it was and returns false.
pub(crate) fn decode_into(lo: i64, hi: i64, bytes: &[u8], out: &mut Vec<Posting>) -> bool {
    let start = out.len();
    let mut r = Reader { bytes, at: 0 };
    let ok = (|| {
        let n = usize::try_from(r.varint()?).ok()?;
        if n > bytes.len() / 3 {
            return None;
        }
        out.reserve(n);
        let mut prev = lo - 1;
        for _ in 0..n {
            let delta = r.varint()?;
            let tf = u32::try_from(r.varint()?).ok()?;
            let len = u32::try_from(r.varint()?).ok()?;
            if delta == 0 || tf == 0 || delta > (hi - prev) as u64 {
                return None;
            }
            prev += delta as i64;
            out.push(Posting { id: prev, tf, len });
        }
        (r.at == bytes.len()).then_some(())
    })()
    .is_some();
    if !ok {
        out.truncate(start);
    }
    ok
}

/// A varint reader over one blob (most values — id gaps, frequencies, short lengths — are one
/// byte, which takes one comparison).
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    #[inline]
    fn varint(&mut self) -> Option<u64> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        if b < 0x80 {
            return Some(u64::from(b));
        }
        let mut v = u64::from(b & 0x7F);
        for shift in (7..64).step_by(7) {
            let b = *self.bytes.get(self.at)?;
            self.at += 1;
            v |= u64::from(b & 0x7F) << shift;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
