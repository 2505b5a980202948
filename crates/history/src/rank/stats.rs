//! Segment statistics: posting lists built from the message rows exactly as the index
//! tokenizes them (the `<table>_src` views give the same rows and column values the index
//! triggers read), written in one transaction per segment, read back per query.
//!
//! Tables (additions to schema version 1, see `store::schema::ADDITIVE_SQL`; older binaries
//! ignore them, and nothing they do can make a posting list wrong for ranking: a message's text
//! never changes, deleted messages are dropped by the filter check, an index rebuild re-indexes
//! the same text):
//! * `rank_segments(idx, lo, hi, format, tokenizer, docs)`: one row per summarised segment.
//! * `rank_postings(idx, term, lo, df, postings)`: every term of the segment's searched
//!   columns with its posting list ([`super::postings`]).

use super::postings::{self, Posting};
use super::{RankIndex, truncate};
use crate::error::Result;
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashMap;

/// Bumped when what a row means changes; rows of another format are rebuilt.
pub(crate) const FORMAT: i64 = 2;

/// One summarised segment as a query reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub lo: i64,
    pub hi: i64,
}

/// The posting lists of one segment, before they are written.
#[derive(Debug, Default)]
pub struct Built {
    pub docs: u64,
    /// Every term of the searched columns with its postings, by term.
    pub terms: Vec<(Vec<u8>, Vec<Posting>)>,
}

/// The highest id ever assigned (deleted rows included): every id up to it is final.
pub fn id_high_water(conn: &Connection) -> Result<i64> {
    Ok(conn
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'messages'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .optional()?
        .unwrap_or(0))
}

/// Tokenizes the documents of ids `lo..=hi` of `index` into posting lists.
pub fn build(conn: &Connection, index: RankIndex, lo: i64, hi: i64) -> Result<Built> {
    let cols = index.columns();
    let searched = index.searched_columns();
    let sql = format!(
        "SELECT id, {} FROM {}_src WHERE id BETWEEN ?1 AND ?2 ORDER BY id",
        cols.join(", "),
        index.table()
    );
    let mut st = conn.prepare(&sql)?;
    let mut rows = st.query(params![lo, hi])?;
    let mut ids: HashMap<Box<[u8]>, u32> = HashMap::new();
    let mut lists: Vec<Vec<Posting>> = Vec::new();
    let mut in_doc: Vec<u32> = Vec::new();
    let mut docs = 0u64;
    while let Some(row) = rows.next()? {
        docs += 1;
        let id: i64 = row.get(0)?;
        in_doc.clear();
        let mut len = 0u32;
        for c in 0..cols.len() {
            let bytes = match row.get_ref(c + 1)? {
                rusqlite::types::ValueRef::Text(b) | rusqlite::types::ValueRef::Blob(b) => b,
                _ => &[],
            };
            // FTS5 counts a column's tokens that are not colocated (and the first in any case).
            let mut size = 0u32;
            index.tokenize_document(bytes, &mut |term, colocated| {
                if !colocated || size == 0 {
                    size += 1;
                }
                if c >= searched {
                    return;
                }
                let term = truncate(term);
                let t = match ids.get(term) {
                    Some(&t) => t,
                    None => {
                        let t = lists.len() as u32;
                        ids.insert(term.into(), t);
                        lists.push(Vec::new());
                        t
                    }
                };
                let list = &mut lists[t as usize];
                match list.last_mut() {
                    Some(p) if p.id == id => p.tf += 1,
                    _ => {
                        list.push(Posting { id, tf: 1, len: 0 });
                        in_doc.push(t);
                    }
                }
            });
            len += size;
        }
        for &t in &in_doc {
            if let Some(p) = lists[t as usize].last_mut() {
                p.len = len;
            }
        }
    }
    let mut terms: Vec<(Vec<u8>, Vec<Posting>)> = ids
        .into_iter()
        .map(|(term, t)| (term.into_vec(), std::mem::take(&mut lists[t as usize])))
        .collect();
    terms.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(Built { docs, terms })
}

/// Replaces the segment's rows (and any row of another grid overlapping it) in one write.
pub(crate) fn write(
    conn: &Connection,
    index: RankIndex,
    lo: i64,
    hi: i64,
    built: &Built,
) -> Result<()> {
    let idx = index.table();
    let overlapping: Vec<i64> = conn
        .prepare("SELECT lo FROM rank_segments WHERE idx = ?1 AND lo <= ?3 AND hi >= ?2")?
        .query_map(params![idx, lo, hi], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for old in overlapping.iter().chain(std::iter::once(&lo)) {
        drop_segment(conn, idx, *old)?;
    }
    let mut ins = conn.prepare(
        "INSERT INTO rank_postings (idx, term, lo, df, postings) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for (term, list) in &built.terms {
        ins.execute(params![
            idx,
            term,
            lo,
            list.len() as i64,
            postings::encode(lo, list)
        ])?;
    }
    conn.execute(
        "INSERT INTO rank_segments (idx, lo, hi, format, tokenizer, docs) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            idx,
            lo,
            hi,
            FORMAT,
            index.tokenizer_version(),
            built.docs as i64
        ],
    )?;
    Ok(())
}

/// The current summarised segments of `index`, in id order, without overlaps (a row that
/// overlaps an earlier one — another grid's leftover — is ignored).
pub fn segments(conn: &Connection, index: RankIndex) -> Result<Vec<Segment>> {
    let mut st = conn.prepare(
        "SELECT lo, hi FROM rank_segments WHERE idx = ?1 AND format = ?2 AND tokenizer = ?3 \
         ORDER BY lo",
    )?;
    let rows = st.query_map(
        params![index.table(), FORMAT, index.tokenizer_version()],
        |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
    )?;
    let mut out: Vec<Segment> = Vec::new();
    for row in rows {
        let (lo, hi) = row?;
        if hi < lo || out.last().is_some_and(|s| lo <= s.hi) {
            continue;
        }
        out.push(Segment { lo, hi });
    }
    Ok(out)
}

/// A term's posting blobs: segment `lo` → (documents holding it, encoded postings).
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub fn term(
    conn: &Connection,
    index: RankIndex,
    term: &[u8],
) -> Result<HashMap<i64, (i64, Vec<u8>)>> {
    let mut st =
        conn.prepare("SELECT lo, df, postings FROM rank_postings WHERE idx = ?1 AND term = ?2")?;
    let rows = st.query_map(params![index.table(), term], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, Vec<u8>>(2)?,
        ))
    })?;
    let mut out = HashMap::new();
    for row in rows {
        let (lo, df, blob) = row?;
        out.insert(lo, (df, blob));
    }
    Ok(out)
}

/// Calls `each(lo, blob)` for a term's posting blobs, in segment order, without copying them.
pub(crate) fn each_list(
    conn: &Connection,
    index: RankIndex,
    term: &[u8],
    mut each: impl FnMut(i64, &[u8]),
) -> Result<()> {
    let mut st = conn.prepare(
        "SELECT lo, postings FROM rank_postings WHERE idx = ?1 AND term = ?2 ORDER BY lo",
    )?;
    let mut rows = st.query(params![index.table(), term])?;
    while let Some(r) = rows.next()? {
        let lo: i64 = r.get(0)?;
        let blob = match r.get_ref(1)? {
            rusqlite::types::ValueRef::Blob(b) => b,
            _ => &[],
        };
        each(lo, blob);
    }
    Ok(())
}

/// The complete segments of `index` on a grid of `size` ids that have no current row, in id
/// order.
fn due(conn: &Connection, index: RankIndex, size: i64) -> Result<Vec<(i64, i64)>> {
    let size = size.max(1);
    let high = id_high_water(conn)?;
    let done: std::collections::HashSet<(i64, i64)> = segments(conn, index)?
        .into_iter()
        .map(|s| (s.lo, s.hi))
        .collect();
    let mut out = Vec::new();
    let mut lo: i64 = 1;
    while lo.saturating_add(size - 1) <= high {
        let hi = lo + size - 1;
        if !done.contains(&(lo, hi)) {
            out.push((lo, hi));
        }
        lo = hi + 1;
    }
    Ok(out)
}

/// The next segment of `index` to summarise on a grid of `size` ids: the first one that is
/// complete (its last id has been assigned) and has no current row.
pub(crate) fn next_due(
    conn: &Connection,
    index: RankIndex,
    size: i64,
) -> Result<Option<(i64, i64)>> {
    Ok(due(conn, index, size)?.into_iter().next())
}

/// Drops the statistics of segments no message is left in (after retention).
pub(crate) fn drop_empty(conn: &Connection) -> Result<usize> {
    let empty: Vec<(String, i64)> = conn
        .prepare(
            "SELECT idx, lo FROM rank_segments s WHERE NOT EXISTS \
             (SELECT 1 FROM messages m WHERE m.id BETWEEN s.lo AND s.hi)",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (idx, lo) in &empty {
        drop_segment(conn, idx, *lo)?;
    }
    Ok(empty.len())
}

/// Removes one segment's summary and lists.
fn drop_segment(conn: &Connection, idx: &str, lo: i64) -> Result<()> {
    conn.execute(
        "DELETE FROM rank_postings WHERE idx = ?1 AND lo = ?2",
        params![idx, lo],
    )?;
    conn.execute(
        "DELETE FROM rank_segments WHERE idx = ?1 AND lo = ?2",
        params![idx, lo],
    )?;
    Ok(())
}

/// Row counts and payload bytes of the statistics tables.
pub(crate) fn sizes(conn: &Connection) -> Result<crate::RankingSizes> {
    let segments: i64 = conn.query_row("SELECT count(*) FROM rank_segments", [], |r| r.get(0))?;
    let (terms, bytes): (i64, i64) = conn.query_row(
        "SELECT count(*), coalesce(sum(length(term) + length(postings) + 12), 0) \
         FROM rank_postings",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(crate::RankingSizes {
        segments,
        terms,
        payload_bytes: bytes,
    })
}

/// How many segment summaries are due on a grid of `size` ids, over every ranked index.
pub(crate) fn due_count(conn: &Connection, size: i64) -> Result<usize> {
    let mut n = 0;
    for index in RankIndex::ALL {
        n += due(conn, index, size)?.len();
    }
    Ok(n)
}
