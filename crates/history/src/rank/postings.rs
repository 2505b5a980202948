//! Posting lists of a summarised segment: for one term, every document of the segment holding
//! it in a searched column, in id order, with the term's frequency there and the document's
//! length (FTS5's token count over all columns) — everything BM25 needs, in one blob.
//!
//! Encoding: varint count, then per document varint (id − previous id, starting from the
//! segment's `lo − 1`), varint frequency, varint length.

/// One document holding the term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Posting {
    pub(crate) id: i64,
    pub(crate) tf: u32,
    pub(crate) len: u32,
}

pub(crate) fn encode(lo: i64, postings: &[Posting]) -> Vec<u8> {
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
pub(crate) fn decode(lo: i64, hi: i64, mut bytes: &[u8]) -> Option<Vec<Posting>> {
    let n = usize::try_from(get_varint(&mut bytes)?).ok()?;
    if n > bytes.len() / 3 {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    let mut prev = lo - 1;
    for _ in 0..n {
        let delta = i64::try_from(get_varint(&mut bytes)?).ok()?;
        let tf = u32::try_from(get_varint(&mut bytes)?).ok()?;
        let len = u32::try_from(get_varint(&mut bytes)?).ok()?;
        let id = prev.checked_add(delta)?;
        if delta == 0 || id > hi || tf == 0 {
            return None;
        }
        out.push(Posting { id, tf, len });
        prev = id;
    }
    bytes.is_empty().then_some(out)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn get_varint(bytes: &mut &[u8]) -> Option<u64> {
    // Most values (id gaps, frequencies, short lengths) fit one byte.
    if let Some((&b, rest)) = bytes.split_first()
        && b < 0x80
    {
        *bytes = rest;
        return Some(u64::from(b));
    }
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        v |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}
