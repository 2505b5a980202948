//! The tokenizer proper: unicode61 tokens, CJK runs split into bigrams (plus the run-end
//! token documents get), exact byte offsets.

use super::*;

/// A bad `tokenize='cjk_unicode61 …'` argument list (FTS5 reports it as a constructor error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenizerArgError(String);

impl std::fmt::Display for TokenizerArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid {TOKENIZER_NAME} argument: {}", self.0)
    }
}

impl std::error::Error for TokenizerArgError {}

/// One configured tokenizer instance (unicode61 options).
#[derive(Debug, Clone)]
pub struct CjkTokenizer {
    pub(crate) token_categories: [bool; 32],
    /// Indexed by byte; bytes ≥ 0x80 are always false (they start a multi-byte character).
    pub(crate) ascii_token: [bool; 256],
    /// Non-ASCII code points whose token/separator status is flipped by `tokenchars` or
    /// `separators` (sorted).
    pub(crate) exceptions: Vec<u32>,
    /// Index into a fold entry: `remove_diacritics` 0, 1 or 2.
    pub(crate) diacritics: usize,
    /// Emit run-end characters (issue 5 item 3); off only to compare with the reference split.
    pub run_ends: bool,
    /// Split CJK runs into bigrams. Off, the tokenizer is SQLite's plain `unicode61` (CJK
    /// characters are ordinary letters), which the ranking statistics of the base index use.
    pub(crate) split_cjk: bool,
}

impl Default for CjkTokenizer {
    fn default() -> Self {
        let mut tokenizer = Self {
            token_categories: [false; 32],
            ascii_token: [false; 256],
            exceptions: Vec::new(),
            diacritics: 1,
            run_ends: true,
            split_cjk: true,
        };
        // The default category list is known to parse.
        let _ = tokenizer.set_categories("L* N* Co");
        tokenizer
    }
}

/// One folded CJK character (a fold is a single code point, at most four bytes) and the
/// original bytes it came from.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CjkChar {
    pub(crate) bytes: [u8; 4],
    pub(crate) len: usize,
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// `text[start..end]` is exactly `bytes` (well-formed, folds to itself, nothing dropped),
    /// so a bigram of two adjacent verbatim characters can be emitted straight from the text.
    pub(crate) verbatim: bool,
}

impl CjkChar {
    pub(crate) fn folded(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// `emit(token, start, end, colocated)`; breaking stops the tokenizer. Generic rather than
/// `dyn` so the FTS5 callback inlines into the hot loop.
pub trait Emit: FnMut(&[u8], usize, usize, bool) -> ControlFlow<()> {}

impl<F: FnMut(&[u8], usize, usize, bool) -> ControlFlow<()>> Emit for F {}

pub(crate) struct Emitter<'a, E: Emit> {
    pub(crate) emit: &'a mut E,
    pub(crate) query: bool,
    pub(crate) run_end: Option<CjkChar>,
}

impl<E: Emit> Emitter<'_, E> {
    /// `opens_run` is true for the first bigram of a CJK run.
    pub(crate) fn token(
        &mut self,
        token: &[u8],
        start: usize,
        end: usize,
        opens_run: bool,
    ) -> ControlFlow<()> {
        self.place_run_end(opens_run)?;
        (self.emit)(token, start, end, false)
    }

    pub(crate) fn place_run_end(&mut self, before_run: bool) -> ControlFlow<()> {
        if let Some(run_end) = self.run_end.take() {
            if before_run {
                (self.emit)(run_end.folded(), run_end.start, run_end.end, false)?;
            } else if !self.query {
                (self.emit)(run_end.folded(), run_end.start, run_end.end, true)?;
            }
        }
        ControlFlow::Continue(())
    }
}

impl CjkTokenizer {
    /// Parses FTS5 tokenizer arguments as unicode61 does (pairs of option and value).
    pub fn new(args: &[&str]) -> Result<Self, TokenizerArgError> {
        if !args.len().is_multiple_of(2) {
            return Err(TokenizerArgError(
                "options must come in name/value pairs".into(),
            ));
        }
        let mut tokenizer = Self::default();
        let pairs = || args.chunks_exact(2).map(|pair| (pair[0], pair[1]));
        if let Some((_, categories)) =
            pairs().rfind(|(name, _)| name.eq_ignore_ascii_case("categories"))
        {
            tokenizer.token_categories = [false; 32];
            tokenizer.set_categories(categories)?;
        }
        for (name, value) in pairs() {
            if name.eq_ignore_ascii_case("remove_diacritics") {
                tokenizer.diacritics = match value {
                    "0" => 0,
                    "1" => 1,
                    "2" => 2,
                    _ => {
                        return Err(TokenizerArgError(format!(
                            "remove_diacritics must be 0, 1 or 2, not {value:?}"
                        )));
                    }
                };
            } else if name.eq_ignore_ascii_case("tokenchars") {
                tokenizer.add_exceptions(value, true);
            } else if name.eq_ignore_ascii_case("separators") {
                tokenizer.add_exceptions(value, false);
            } else if !name.eq_ignore_ascii_case("categories") {
                return Err(TokenizerArgError(format!("unknown option {name:?}")));
            }
        }
        Ok(tokenizer)
    }

    pub(crate) fn set_categories(&mut self, list: &str) -> Result<(), TokenizerArgError> {
        for item in list.split([' ', '\t']).filter(|item| !item.is_empty()) {
            let bytes = item.as_bytes();
            let (major, minor) = (bytes[0], bytes.get(1).copied().unwrap_or(0));
            self.token_categories[0] = true;
            let mut found = false;
            for &(name, index) in &CATEGORY_NAMES {
                let name = name.as_bytes();
                if name[0] == major && (minor == b'*' || name[1] == minor) {
                    self.token_categories[usize::from(index)] = true;
                    found = true;
                }
            }
            match (major, minor) {
                (b'C', b'o' | b'*') => {
                    self.token_categories[usize::from(CATEGORY_CO)] = true;
                    found = true;
                }
                (b'L', b'C' | b'*') => {
                    self.token_categories[30] = true;
                    found = true;
                }
                _ => {}
            }
            if !found {
                return Err(TokenizerArgError(format!("unknown category {item:?}")));
            }
        }
        for c in 0..128u32 {
            self.ascii_token[c as usize] = self.token_categories[usize::from(category(c))];
        }
        self.ascii_token[0] = false;
        Ok(())
    }

    pub(crate) fn add_exceptions(&mut self, chars: &str, token: bool) {
        let bytes = chars.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let (c, next) = read_utf8(bytes, i);
            i = next;
            if c < 0x80 {
                self.ascii_token[c as usize] = token;
            } else if self.token_categories[usize::from(category(c))] != token
                && !is_diacritic(c)
                && let Err(at) = self.exceptions.binary_search(&c)
            {
                self.exceptions.insert(at, c);
            }
        }
    }

    pub fn is_token_char(&self, c: u32, classes: &[u8]) -> bool {
        let category = if c < 0x1_0000 {
            classes[c as usize] & CATEGORY_MASK
        } else {
            category(c)
        };
        self.token_categories[usize::from(category)]
            ^ (!self.exceptions.is_empty() && self.exceptions.binary_search(&c).is_ok())
    }

    /// The tokenizer proper, on raw bytes (SQLite text need not be valid UTF-8). Streams:
    /// a non-CJK segment is emitted when a CJK character or the token's end closes it, and a
    /// bigram as soon as its second character is read. Stops as soon as `emit` breaks.
    pub fn tokenize_bytes(&self, text: &[u8], reason: TokenizeReason, emit: &mut impl Emit) {
        thread_local! {
            // FTS5 tokenizes row by row; reusing the fold buffer saves an allocation per row.
            static SEGMENT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let mut run = |segment: &mut Vec<u8>| {
            let _ = self.tokenize_inner(text, reason, emit, segment);
        };
        // A re-entrant call (an emit callback tokenizing again) gets a buffer of its own.
        SEGMENT.with(|cell| match cell.try_borrow_mut() {
            Ok(mut segment) => {
                run(&mut segment);
                // One giant token (a pasted blob) must not pin its buffer for the thread's life.
                if segment.capacity() > 1 << 16 {
                    *segment = Vec::new();
                }
            }
            Err(_) => run(&mut Vec::new()),
        });
    }

    pub(crate) fn tokenize_inner(
        &self,
        text: &[u8],
        reason: TokenizeReason,
        emit: &mut impl Emit,
        segment: &mut Vec<u8>,
    ) -> ControlFlow<()> {
        let classes = bmp_classes();
        let plain = self.exceptions.is_empty();
        let ascii = &self.ascii_token;
        let mut out = Emitter {
            emit,
            query: reason.is_query(),
            run_end: None,
        };
        // `segment`: folded bytes of the open non-CJK segment; its span is `segment_span`.
        let mut i = 0;
        loop {
            // Skip separators.
            let start = loop {
                let Some(&b) = text.get(i) else {
                    return out.place_run_end(false);
                };
                if b < 0x80 {
                    if ascii[usize::from(b)] {
                        break i;
                    }
                    i += 1;
                } else {
                    let (c, next, _) = read_utf8_fast(text, i);
                    if self.is_token_char(c, classes) {
                        break i;
                    }
                    i = next;
                }
            };
            segment.clear();
            let mut segment_span: Option<(usize, usize)> = None;
            if text[start] < 0x80 {
                // Most tokens are plain ASCII words: emit them without copying when they end at
                // an ASCII separator and need no folding.
                let mut end = start;
                let mut upper = false;
                while let Some(&b) = text.get(end) {
                    if !ascii[usize::from(b)] {
                        break;
                    }
                    upper |= b.is_ascii_uppercase();
                    end += 1;
                }
                if text.get(end).is_none_or(|&b| b < 0x80) {
                    i = end;
                    if upper {
                        segment.extend(text[start..end].iter().map(u8::to_ascii_lowercase));
                        out.token(segment, start, end, false)?;
                    } else {
                        out.token(&text[start..end], start, end, false)?;
                    }
                    continue;
                }
                segment.extend(text[start..end].iter().map(u8::to_ascii_lowercase));
                segment_span = Some((start, end));
                i = end;
            }
            let mut run_len = 0usize;
            let mut previous = CjkChar::default();
            // Start of leading characters that folded to nothing, owed to the next piece.
            let mut orphan: Option<usize> = None;
            let mut emitted = false;
            let mut first = segment_span.is_none();
            while let Some(&b) = text.get(i) {
                if b < 0x80 {
                    if !ascii[usize::from(b)] {
                        break;
                    }
                    let ascii_start = i;
                    while text.get(i).is_some_and(|&b| ascii[usize::from(b)]) {
                        i += 1;
                    }
                    if run_len > 0 {
                        emitted = true;
                        self.end_run(&mut run_len, previous, &mut out)?;
                    }
                    segment.extend(text[ascii_start..i].iter().map(u8::to_ascii_lowercase));
                    let span_start = segment_span.map_or(ascii_start, |(s, _)| s);
                    segment_span = Some((orphan.take().unwrap_or(span_start), i));
                    first = false;
                    continue;
                }
                let (c, next, well_formed) = read_utf8_fast(text, i);
                let class = if c < 0x1_0000 {
                    classes[c as usize]
                } else {
                    category(c) | if is_cjk_code(c) { CLASS_CJK } else { 0 }
                };
                let token_char = if plain {
                    self.token_categories[usize::from(class & CATEGORY_MASK)]
                } else {
                    self.is_token_char(c, classes)
                };
                if !token_char && (first || class & CLASS_DIACRITIC == 0) {
                    break;
                }
                first = false;
                let folded = if class & CLASS_FOLDS == 0 && c < 0x1_0000 {
                    c
                } else {
                    fold(c, self.diacritics, classes)
                };
                if folded == 0 {
                    if run_len > 0 {
                        previous.end = next;
                        previous.verbatim = false;
                    } else if let Some((_, end)) = segment_span.as_mut() {
                        *end = next;
                    } else {
                        orphan.get_or_insert(i);
                    }
                } else if class & CLASS_CJK != 0 && self.split_cjk {
                    if let Some((from, to)) = segment_span.take() {
                        emitted = true;
                        out.token(segment, from, to, false)?;
                        segment.clear();
                    }
                    let mut current = CjkChar {
                        start: orphan.take().unwrap_or(i),
                        end: next,
                        verbatim: well_formed && folded == c,
                        ..CjkChar::default()
                    };
                    current.verbatim &= current.start == i;
                    current.len = encode_utf8(folded, &mut current.bytes);
                    if run_len > 0 {
                        emitted = true;
                        if previous.verbatim && current.verbatim && previous.end == current.start {
                            out.token(
                                &text[previous.start..current.end],
                                previous.start,
                                current.end,
                                run_len == 1,
                            )?;
                        } else {
                            let mut bigram = [0u8; 8];
                            bigram[..previous.len].copy_from_slice(previous.folded());
                            bigram[previous.len..previous.len + current.len]
                                .copy_from_slice(current.folded());
                            out.token(
                                &bigram[..previous.len + current.len],
                                previous.start,
                                current.end,
                                run_len == 1,
                            )?;
                        }
                    }
                    previous = current;
                    run_len += 1;
                } else {
                    if run_len > 0 {
                        emitted = true;
                        self.end_run(&mut run_len, previous, &mut out)?;
                    }
                    let span_start = segment_span.map_or(i, |(s, _)| s);
                    segment_span = Some((orphan.take().unwrap_or(span_start), next));
                    push_utf8(segment, folded);
                }
                i = next;
            }
            if run_len > 0 {
                emitted = true;
                self.end_run(&mut run_len, previous, &mut out)?;
            }
            if let Some((from, to)) = segment_span {
                out.token(segment, from, to, false)?;
            } else if !emitted {
                // Everything folded away; unicode61 still emits the (empty) token.
                out.token(&[], start, i, false)?;
            }
        }
    }

    /// Closes a CJK run: a lone character is emitted whole; the last character of a longer
    /// run waits in the emitter to be placed (item 3).
    pub(crate) fn end_run(
        &self,
        run_len: &mut usize,
        last: CjkChar,
        out: &mut Emitter<'_, impl Emit>,
    ) -> ControlFlow<()> {
        let len = std::mem::take(run_len);
        if len == 1 {
            out.token(last.folded(), last.start, last.end, false)?;
        } else if self.run_ends {
            out.run_end = Some(last);
        }
        ControlFlow::Continue(())
    }
}

/// [`read_utf8`] with the common well-formed three-byte case (all of the BMP CJK blocks)
/// decoded inline; the flag says the bytes were that well-formed encoding.
#[inline]
pub(crate) fn read_utf8_fast(text: &[u8], i: usize) -> (u32, usize, bool) {
    if let [b0 @ 0xE0..=0xEF, b1, b2, rest @ ..] = &text[i..]
        && b1 & 0xC0 == 0x80
        && b2 & 0xC0 == 0x80
        && rest.first().is_none_or(|b| b & 0xC0 != 0x80)
    {
        let c = (u32::from(b0 & 0x0F) << 12) | (u32::from(b1 & 0x3F) << 6) | u32::from(b2 & 0x3F);
        if c >= 0x800 && (c & 0xF800) != 0xD800 && c < 0xFFFE {
            return (c, i + 3, true);
        }
    }
    let (c, next) = read_utf8(text, i);
    (c, next, false)
}
