//! The ranked walk: every match of a query, scored once, handed out best first (ties: newer
//! first) as the caller pulls, each checked against the filters on the way out.

use super::expr::{Mask, Query, Truth, parse};
use super::postings::{self, Posting};
use super::stats::{self, Segment};
use super::{RankIndex, bm25_normed, idf, length_norm};
use crate::budget::{Budget, Pacer};
use crate::error::Result;
use crate::search::Candidate;
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, Statement};
use std::cell::RefCell;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex};

/// More unsummarised ids than this (a store whose posting lists are still being built) and the
/// search keeps `bm25()`: scoring them all through FTS5 is what it would do anyway.
const MAX_UNSUMMARISED_IDS: i64 = 1 << 18;

/// Entries a walk orders up front; the rest wait unsorted.
const HEAD_ENTRIES: usize = 1024;

/// A row's score, or — while a phrase of several tokens in it is unconfirmed — an upper bound.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    score: f64,
    id: i64,
    exact: bool,
}

impl Eq for Entry {}

impl Ord for Entry {
    /// Best score first, then the newer row; for the same score and row the bound first, so
    /// it is resolved before the exact entry it may turn into is compared with anything.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.score
            .total_cmp(&other.score)
            .then(self.id.cmp(&other.id))
            .then(other.exact.cmp(&self.exact))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A query ready to walk: its collection statistics and every match, scored or bounded.
pub struct Plan {
    index: RankIndex,
    match_expr: String,
    avgdl: f64,
    idf: Vec<f64>,
    entries: Vec<Entry>,
    /// Rows scored through FTS5 (unsummarised ids) and postings read from segment lists.
    pub rows_scored_by_fts5: usize,
    pub postings_read: usize,
}

/// Rows and tokens of an index, from FTS5's averages record (`<table>_data` id 1: SQLite
/// varints, the row count then each column's token total).
fn averages(conn: &Connection, table: &str) -> Result<Option<(i64, i64)>> {
    let block: Option<Vec<u8>> = conn
        .query_row(
            &format!("SELECT block FROM {table}_data WHERE id = 1"),
            [],
            |r| r.get(0),
        )
        .optional()?;
    let Some(block) = block else {
        return Ok(None);
    };
    let mut at = 0;
    let Some(rows) = sqlite_varint(&block, &mut at) else {
        return Ok(None);
    };
    let mut tokens = 0u64;
    while at < block.len() {
        let Some(col) = sqlite_varint(&block, &mut at) else {
            return Ok(None);
        };
        tokens = tokens.saturating_add(col);
    }
    match (i64::try_from(rows), i64::try_from(tokens)) {
        (Ok(r), Ok(t)) => Ok(Some((r, t))),
        _ => Ok(None),
    }
}

/// SQLite's big-endian varint (1–9 bytes; the ninth contributes all eight bits).
fn sqlite_varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for i in 0..9 {
        let b = *buf.get(*at)?;
        *at += 1;
        if i == 8 {
            return Some((v << 8) | u64::from(b));
        }
        v = (v << 7) | u64::from(b & 0x7F);
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Id ranges up to `high` no summarised segment covers (gaps and the tail).
fn unsummarised(segments: &[Segment], high: i64) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut next = 1;
    for s in segments {
        if s.lo > next && next <= high {
            out.push((next, (s.lo - 1).min(high)));
        }
        next = next.max(s.hi + 1);
    }
    if next <= high {
        out.push((next, high));
    }
    out
}

/// `mpa_rank(table, ?avgdl, ?idf…)` as SQL, its parameters numbered from `first`.
fn rank_call(table: &str, phrases: usize, first: usize) -> String {
    let idf: String = (0..phrases)
        .map(|i| format!(", ?{}", first + 1 + i))
        .collect();
    format!("{}({table}, ?{first}{idf})", super::ffi::RANK_FUNCTION)
}

/// The first index at or after `from` whose posting has an id ≥ `id` (galloping search).
fn seek(list: &[Posting], from: usize, id: i64) -> usize {
    if list.get(from).is_none_or(|p| p.id >= id) {
        return from;
    }
    let mut step = 1;
    let mut lo = from;
    while lo + step < list.len() && list[lo + step].id < id {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step + 1).min(list.len());
    lo + 1 + list[lo + 1..hi].partition_point(|p| p.id < id)
}

/// The scores of every summarised row from the posting lists. `lists[t]` are the postings of distinct
/// token `t`; `phrases[p]` the tokens of phrase `p`; `required` the tokens every matching row
/// holds (the shortest of their lists drives the walk, the others are sought by id; without
/// one, the lists are merged). Checks `budget` between blocks of rows: this is Rust work that
/// SQLite's progress handler never sees.
#[expect(
    clippy::too_many_arguments,
    reason = "one scoring pass over prepared parts; a struct would only rename them"
)]
fn score_lists(
    query: &Query,
    phrases: &[Vec<usize>],
    lists: &[&[Posting]],
    required: &[usize],
    idf: &[f64],
    avgdl: f64,
    out: &mut Vec<Entry>,
    budget: &Budget,
) -> Result<()> {
    let has_not = query.has_not();
    let driver = required.iter().copied().min_by_key(|&t| lists[t].len());
    // What a row's phrase masks decide (match, counted phrases) is computed once per distinct
    // pair of masks when there are few phrases (a table indexed by both masks).
    let small = phrases.len() <= MEMO_PHRASES;
    let mut memo: Vec<u32> = if small {
        vec![0; 1 << (2 * phrases.len())]
    } else {
        Vec::new()
    };
    let mut at = vec![0usize; lists.len()];
    let mut tf = vec![0u32; lists.len()];
    let mut freq = vec![0f64; phrases.len()];
    let mut norms = vec![f64::NAN; 4096];
    let mut pacer = Pacer::new(budget);
    loop {
        pacer.tick()?;
        // The next candidate: the driver's next row, or the smallest id at the lists' heads.
        let id = match driver {
            Some(d) => match lists[d].get(at[d]) {
                Some(p) => p.id,
                None => return Ok(()),
            },
            None => {
                let Some(id) = lists
                    .iter()
                    .zip(&at)
                    .filter_map(|(l, &i)| l.get(i).map(|p| p.id))
                    .min()
                else {
                    return Ok(());
                };
                id
            }
        };
        let mut len = 0u32;
        for (t, l) in lists.iter().enumerate() {
            if driver.is_some() {
                at[t] = seek(l, at[t], id);
            }
            tf[t] = 0;
            if let Some(p) = l.get(at[t]).filter(|p| p.id == id) {
                tf[t] = p.tf;
                len = p.len;
                at[t] += 1;
            }
        }
        let (mut present, mut maybe): (Mask, Mask) = (0, 0);
        for (p, toks) in phrases.iter().enumerate() {
            let least = toks.iter().map(|&t| tf[t]).min().unwrap_or(0);
            freq[p] = f64::from(least);
            if least > 0 {
                if toks.len() == 1 {
                    present |= 1 << p;
                } else {
                    maybe |= 1 << p;
                }
            }
        }
        // Exact when every phrase is certain and FTS5's reporting is known (no NOT); otherwise
        // a bound counting every phrase the row holds (FTS5 reports a subset of them, and a
        // phrase of several tokens at most as often as its rarest token), which FTS5 confirms
        // when the row reaches the top. Exact rows count, as FTS5 reports them, only the
        // phrases of branches that match.
        let (truth, counted) = if small {
            let key = (present | (maybe << phrases.len())) as usize;
            if memo[key] == 0 {
                memo[key] = encode_decision(query, present, maybe);
            }
            decode_decision(memo[key])
        } else {
            let truth = query.eval(present, maybe);
            (truth, query.counted(present))
        };
        if truth == Truth::No {
            continue;
        }
        let exact = truth == Truth::Yes && maybe == 0 && !has_not;
        if exact && counted != present {
            for (p, f) in freq.iter_mut().enumerate() {
                if counted & (1 << p) == 0 {
                    *f = 0.0;
                }
            }
        }
        // Lengths repeat: the norm of a short one is computed once.
        let norm = match norms.get_mut(len as usize) {
            Some(n) if !n.is_nan() => *n,
            Some(n) => {
                *n = length_norm(f64::from(len), avgdl);
                *n
            }
            None => length_norm(f64::from(len), avgdl),
        };
        out.push(Entry {
            score: bm25_normed(&freq, idf, norm),
            id,
            exact,
        });
    }
}

/// Phrase counts up to which a segment's match decisions are memoised by mask.
const MEMO_PHRASES: usize = 7;

/// (match, counted phrases) packed for the memo: bit 31 set (computed), bits 29–30 the truth,
/// the low bits the counted mask (at most [`MEMO_PHRASES`] bits).
fn encode_decision(query: &Query, present: Mask, maybe: Mask) -> u32 {
    let truth = match query.eval(present, maybe) {
        Truth::No => 0,
        Truth::Yes => 1,
        Truth::Maybe => 2,
    };
    (1 << 31) | (truth << 29) | (query.counted(present) as u32 & 0xFFFF)
}

fn decode_decision(v: u32) -> (Truth, Mask) {
    let truth = match (v >> 29) & 3 {
        1 => Truth::Yes,
        2 => Truth::Maybe,
        _ => Truth::No,
    };
    (truth, Mask::from(v & 0xFFFF))
}

/// One token's postings over every summarised segment, in id order (segments are disjoint id
/// ranges, so their lists simply follow one another), and the segments whose stored list for it
/// does not decode.
#[derive(Debug, Default)]
struct TokenLists {
    all: Vec<Posting>,
    unreadable: Vec<(i64, i64)>,
}

/// Decoded posting lists kept between searches, for the whole process (every user's store;
/// the least recently used go first once `budget` bytes are held): a search that needs a token
/// another one decoded — over the same summarised segments of the same store — does not read
/// and decode it again.
pub struct SharedLists {
    budget: usize,
    inner: Mutex<SharedState>,
}

/// (store, index, token).
type SharedKey = (u64, RankIndex, Vec<u8>);

#[derive(Default)]
struct SharedState {
    lists: HashMap<SharedKey, Shared>,
    bytes: usize,
    tick: u64,
}

struct Shared {
    lists: Arc<TokenLists>,
    /// Which segments the lists cover (they are stale once a segment is added or dropped).
    segments: u64,
    bytes: usize,
    used: u64,
}

impl SharedLists {
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            budget,
            inner: Mutex::new(SharedState::default()),
        }
    }

    fn get(&self, key: &SharedKey, segments: u64) -> Option<Arc<TokenLists>> {
        let mut st = self.inner.lock().ok()?;
        st.tick += 1;
        let tick = st.tick;
        let e = st.lists.get_mut(key).filter(|e| e.segments == segments)?;
        e.used = tick;
        Some(e.lists.clone())
    }

    fn put(&self, key: SharedKey, segments: u64, lists: Arc<TokenLists>) {
        let bytes = lists.all.len() * std::mem::size_of::<Posting>() + key.2.len() + 64;
        if bytes > self.budget / 4 {
            return;
        }
        let Ok(mut st) = self.inner.lock() else {
            return;
        };
        st.tick += 1;
        let used = st.tick;
        if let Some(old) = st.lists.insert(
            key,
            Shared {
                lists,
                segments,
                bytes,
                used,
            },
        ) {
            st.bytes -= old.bytes;
        }
        st.bytes += bytes;
        while st.bytes > self.budget {
            let Some(oldest) = st
                .lists
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(e) = st.lists.remove(&oldest) {
                st.bytes -= e.bytes;
            }
        }
    }
}

/// Posting lists one search uses, shared by its plans (a query that finds nothing is retried
/// relaxed over the same tokens) and, through the store's [`SharedLists`], with later searches.
#[derive(Default)]
pub struct ListCache<'s> {
    lists: HashMap<(RankIndex, Vec<u8>), Arc<TokenLists>>,
    /// A phrase's postings over the ids no list covers (the relaxed retries read the same ones).
    phrases: HashMap<(RankIndex, String), Arc<Vec<Posting>>>,
    /// The process's lists and this store's key in them.
    shared: Option<(&'s SharedLists, u64)>,
}

impl<'s> ListCache<'s> {
    pub(crate) fn new(shared: Option<(&'s SharedLists, u64)>) -> Self {
        Self {
            lists: HashMap::new(),
            phrases: HashMap::new(),
            shared,
        }
    }

    /// A phrase's postings over `open` (id ranges), read through FTS5.
    fn phrase_postings(
        &mut self,
        conn: &Connection,
        index: RankIndex,
        phrase: &str,
        open: &[(i64, i64)],
    ) -> Result<Arc<Vec<Posting>>> {
        let key = (index, phrase.to_owned());
        if let Some(l) = self.phrases.get(&key) {
            return Ok(l.clone());
        }
        let mut out = Vec::new();
        if !open.is_empty() {
            let table = index.table();
            let mut st = conn.prepare(&format!(
                "SELECT rowid, {}({table}) FROM {table} WHERE {table} MATCH ?1 \
                 AND rowid BETWEEN ?2 AND ?3",
                super::ffi::PHRASE_FUNCTION
            ))?;
            let expr = index.match_expr(phrase);
            for &(lo, hi) in open {
                let mut rows = st.query(rusqlite::params![expr, lo, hi])?;
                while let Some(r) = rows.next()? {
                    let packed: i64 = r.get(1)?;
                    let tf = u32::try_from(packed >> 32).unwrap_or(u32::MAX);
                    if tf > 0 {
                        out.push(Posting {
                            id: r.get(0)?,
                            tf,
                            len: (packed & 0xFFFF_FFFF) as u32,
                        });
                    }
                }
            }
            out.sort_unstable_by_key(|p| p.id);
        }
        let l = Arc::new(out);
        self.phrases.insert(key, l.clone());
        Ok(l)
    }

    fn get(
        &mut self,
        conn: &Connection,
        index: RankIndex,
        token: &[u8],
        segments: &HashMap<i64, i64>,
        fingerprint: u64,
    ) -> Result<Arc<TokenLists>> {
        let key = (index, token.to_vec());
        if let Some(l) = self.lists.get(&key) {
            return Ok(l.clone());
        }
        if let Some(l) = self
            .shared
            .and_then(|(s, store)| s.get(&(store, key.0, key.1.clone()), fingerprint))
        {
            self.lists.insert(key, l.clone());
            return Ok(l);
        }
        let mut lists = TokenLists::default();
        stats::each_list(conn, index, token, |lo, blob| {
            // A row of a segment that is not current (another grid, another tokenizer) is not
            // read.
            if let Some(&hi) = segments.get(&lo)
                && !postings::decode_into(lo, hi, blob, &mut lists.all)
            {
                lists.unreadable.push((lo, hi));
            }
        })?;
        let l = Arc::new(lists);
        if let Some((shared, store)) = self.shared {
            shared.put((store, key.0, key.1.clone()), fingerprint, l.clone());
        }
        self.lists.insert(key, l.clone());
        Ok(l)
    }
}

/// Identifies a set of segments (FNV-1a over their bounds).
fn fingerprint(segments: &[Segment]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for s in segments {
        for b in s.lo.to_le_bytes().into_iter().chain(s.hi.to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// A plan for ranking `expr` (sanitised, without the column filter) on `index`, or `None` when
/// the posting lists cannot serve it (the caller then uses `bm25()`).
pub fn plan(
    conn: &Connection,
    index: RankIndex,
    expr: &str,
    cache: &RefCell<ListCache<'_>>,
    budget: &Budget,
) -> Result<Option<Plan>> {
    let started = std::time::Instant::now();
    let Some(query) = parse(expr, index) else {
        return Ok(None);
    };
    let table = index.table();
    let Some((rows, tokens)) = averages(conn, table)? else {
        return Ok(None);
    };
    if rows <= 0 || tokens <= 0 {
        return Ok(None);
    }
    let avgdl = tokens as f64 / rows as f64;
    // Ids above the last message have no rows (an id can be spent by a duplicate append).
    let last_id: i64 = conn.query_row("SELECT coalesce(max(id), 0) FROM messages", [], |r| {
        r.get(0)
    })?;
    let segments = stats::segments(conn, index)?;
    let mut open = unsummarised(&segments, last_id);
    if open.iter().map(|&(lo, hi)| hi - lo + 1).sum::<i64>() > MAX_UNSUMMARISED_IDS {
        return Ok(None);
    }
    // Distinct tokens and each phrase's tokens by index.
    let mut distinct: Vec<&[u8]> = Vec::new();
    let phrases: Vec<Vec<usize>> = query
        .phrases
        .iter()
        .map(|p| {
            p.tokens
                .iter()
                .map(|t| match distinct.iter().position(|d| *d == t.as_slice()) {
                    Some(i) => i,
                    None => {
                        distinct.push(t);
                        distinct.len() - 1
                    }
                })
                .collect()
        })
        .collect();
    let his: HashMap<i64, i64> = segments.iter().map(|s| (s.lo, s.hi)).collect();
    let print = fingerprint(&segments);
    let token_lists: Vec<Arc<TokenLists>> = {
        let mut cache = cache.borrow_mut();
        distinct
            .iter()
            .map(|t| cache.get(conn, index, t, &his, print))
            .collect::<Result<_>>()?
    };
    // A segment with an unreadable list is scored through FTS5 like an unsummarised range,
    // and its postings leave every token's list.
    let mut unreadable: Vec<(i64, i64)> = token_lists
        .iter()
        .flat_map(|l| l.unreadable.iter().copied())
        .collect();
    budget.check()?;
    unreadable.sort_unstable();
    unreadable.dedup();
    let filtered: Vec<Vec<Posting>>;
    let lists: Vec<&[Posting]> = if unreadable.is_empty() {
        token_lists.iter().map(|l| l.all.as_slice()).collect()
    } else {
        filtered = token_lists
            .iter()
            .map(|l| {
                l.all
                    .iter()
                    .filter(|p| !unreadable.iter().any(|&(lo, hi)| (lo..=hi).contains(&p.id)))
                    .copied()
                    .collect()
            })
            .collect();
        open.extend(
            unreadable
                .iter()
                .filter(|&&(lo, _)| lo <= last_id)
                .map(|&(lo, hi)| (lo, hi.min(last_id))),
        );
        filtered.iter().map(Vec::as_slice).collect()
    };
    // The ids no list covers: each phrase's postings there, from FTS5 one phrase at a time (a
    // phrase alone is cheap for FTS5; an AND of common terms is not), exact even for a phrase of
    // several tokens.
    let tail: Vec<Arc<Vec<Posting>>> = {
        let mut cache = cache.borrow_mut();
        query
            .phrases
            .iter()
            .map(|p| cache.phrase_postings(conn, index, &p.text, &open))
            .collect::<Result<_>>()?
    };
    // Document frequencies: summarised segments from their lists (exact for one token, the
    // rarest token for a phrase of several), plus the phrase's rows above them.
    let idfs: Vec<f64> = phrases
        .iter()
        .zip(&tail)
        .map(|(toks, tail)| {
            let listed = toks
                .iter()
                .map(|&t| lists[t].len() as i64)
                .min()
                .unwrap_or(0);
            idf(rows as f64, (listed + tail.len() as i64) as f64)
        })
        .collect();
    let required_phrases = query.required();
    let mut required: Vec<usize> = phrases
        .iter()
        .enumerate()
        .filter(|(p, _)| required_phrases & (1 << p) != 0)
        .flat_map(|(_, toks)| toks.iter().copied())
        .collect();
    required.sort_unstable();
    required.dedup();
    let loaded = started.elapsed();
    let postings_read = lists.iter().map(|l| l.len()).sum::<usize>();
    let mut entries = Vec::with_capacity(match required.iter().map(|&t| lists[t].len()).min() {
        Some(n) => n,
        None => postings_read,
    });
    budget.check()?;
    score_lists(
        &query,
        &phrases,
        &lists,
        &required,
        &idfs,
        avgdl,
        &mut entries,
        budget,
    )?;
    let scored = started.elapsed();
    // Rows above the segments: every phrase is one list there, its occurrences exact.
    let rows_scored_by_fts5 = tail.iter().map(|l| l.len()).sum::<usize>();
    if rows_scored_by_fts5 > 0 {
        let own: Vec<Vec<usize>> = (0..phrases.len()).map(|p| vec![p]).collect();
        let tail_lists: Vec<&[Posting]> = tail.iter().map(|l| l.as_slice()).collect();
        let tail_required: Vec<usize> = (0..phrases.len())
            .filter(|p| required_phrases & (1 << p) != 0)
            .collect();
        score_lists(
            &query,
            &own,
            &tail_lists,
            &tail_required,
            &idfs,
            avgdl,
            &mut entries,
            budget,
        )?;
    }
    let match_expr = index.match_expr(expr);
    tracing::trace!(
        index = table,
        expr,
        open_ranges = open.len(),
        open_ids = open.iter().map(|&(lo, hi)| hi - lo + 1).sum::<i64>(),
        load_us = loaded.as_micros() as u64,
        lists_us = (scored - loaded).as_micros() as u64,
        fts5_us = (started.elapsed() - scored).as_micros() as u64,
        postings_read,
        rows_scored_by_fts5,
        entries = entries.len(),
        "ranked plan"
    );
    Ok(Some(Plan {
        index,
        match_expr,
        avgdl,
        idf: idfs,
        entries,
        rows_scored_by_fts5,
        postings_read,
    }))
}

/// Rows of a plan that pass the filters, best first, one at a time.
pub struct Walk<'c> {
    conn: &'c Connection,
    index: RankIndex,
    match_expr: String,
    heap: BinaryHeap<Entry>,
    /// Entries no better than any the heap started with, kept unsorted until the heap's best
    /// falls below the best of them (most walks never get there).
    rest: Vec<Entry>,
    /// `mpa_rank` for one row: confirms a bounded entry.
    confirm: Statement<'c>,
    confirm_params: Vec<Value>,
    check: Statement<'c>,
    check_params: Vec<Value>,
    /// Rows returned so far.
    returned: usize,
    /// Bounded entries confirmed through FTS5 (for tests and benchmarks).
    pub confirmed: usize,
    pub rows_scored_by_fts5: usize,
    pub postings_read: usize,
    /// Every match has been returned or filtered out.
    exhausted: bool,
    /// Checked between rows: filtered-out rows can make one pull long.
    budget: Budget,
    /// Time spent confirming bounds and counting for `at_least` (for the trace).
    confirm_time: std::time::Duration,
    count_time: std::time::Duration,
}

impl<'c> Walk<'c> {
    /// `check` selects one candidate by id (its last parameter) when it passes the filters,
    /// bound to `check_params` first.
    pub fn new(
        conn: &'c Connection,
        plan: Plan,
        check: Statement<'c>,
        check_params: Vec<Value>,
        budget: Budget,
    ) -> Result<Self> {
        let table = plan.index.table();
        let confirm = conn.prepare(&format!(
            "SELECT {} FROM {table} WHERE {table} MATCH ?1 AND rowid = ?2",
            rank_call(table, plan.idf.len(), 3)
        ))?;
        // Only the best entries are ordered up front (a caller wants a few rows); the others
        // join when the walk gets down to them.
        let mut entries = plan.entries;
        let rest = if entries.len() > HEAD_ENTRIES {
            entries.select_nth_unstable_by(HEAD_ENTRIES, |a, b| b.cmp(a));
            entries.split_off(HEAD_ENTRIES)
        } else {
            Vec::new()
        };
        let heap = BinaryHeap::from(entries);
        let mut confirm_params = vec![Value::Text(plan.match_expr.clone()), Value::Null];
        confirm_params.push(Value::Real(plan.avgdl));
        confirm_params.extend(plan.idf.iter().map(|&v| Value::Real(v)));
        Ok(Self {
            conn,
            index: plan.index,
            match_expr: plan.match_expr,
            heap,
            rest,
            confirm,
            confirm_params,
            check,
            check_params,
            returned: 0,
            confirmed: 0,
            rows_scored_by_fts5: plan.rows_scored_by_fts5,
            postings_read: plan.postings_read,
            exhausted: false,
            budget,
            confirm_time: std::time::Duration::ZERO,
            count_time: std::time::Duration::ZERO,
        })
    }

    fn check(&mut self, id: i64) -> Result<Option<Candidate>> {
        let mut p = self.check_params.clone();
        p.push(Value::Integer(id));
        let mut hit = self
            .check
            .query_map(rusqlite::params_from_iter(p), crate::search::candidate)?;
        Ok(hit.next().transpose()?)
    }

    /// The exact score of a row FTS5 matches, `None` if it does not match after all.
    fn confirm(&mut self, id: i64) -> Result<Option<f64>> {
        let started = std::time::Instant::now();
        self.confirm_params[1] = Value::Integer(id);
        self.confirmed += 1;
        let score = self
            .confirm
            .query_row(
                rusqlite::params_from_iter(self.confirm_params.iter()),
                |r| r.get(0),
            )
            .optional()?;
        self.confirm_time += started.elapsed();
        Ok(score)
    }

    /// The next row that passes the filters, or `None` when every match has been seen.
    pub fn next_row(&mut self) -> Result<Option<Candidate>> {
        // Once per pull (a discover pulls a few hundred at most), then once per block of
        // entries skipped by the filters.
        self.budget.check()?;
        let budget = self.budget.clone();
        let mut pacer = Pacer::new(&budget);
        loop {
            pacer.tick()?;
            // `rest[0]` is the best of the rest (`select_nth_unstable_by` put it there).
            let rest_best = self.rest.first().copied();
            if rest_best.is_some_and(|r| self.heap.peek().is_none_or(|top| *top < r)) {
                self.heap.extend(self.rest.drain(..));
            }
            let Some(top) = self.heap.pop() else {
                break;
            };
            if !top.exact {
                // A bound: its real score is no higher, so it goes back in its place.
                if let Some(score) = self.confirm(top.id)? {
                    self.heap.push(Entry {
                        score,
                        id: top.id,
                        exact: true,
                    });
                }
                continue;
            }
            if let Some(c) = self.check(top.id)? {
                self.returned += 1;
                return Ok(Some(c));
            }
        }
        self.exhausted = true;
        Ok(None)
    }

    /// Whether at least `k` matching rows pass the filters, counting newest first without
    /// scoring (for `candidate_limit_reached` when the walk stopped early).
    pub fn at_least(&mut self, k: usize) -> Result<bool> {
        if self.returned >= k {
            return Ok(true);
        }
        if self.exhausted {
            return Ok(false);
        }
        let started = std::time::Instant::now();
        let enough = self.count_newest_first(k);
        self.count_time += started.elapsed();
        enough
    }

    fn count_newest_first(&mut self, k: usize) -> Result<bool> {
        let conn = self.conn;
        let table = self.index.table();
        let mut ids = conn.prepare(&format!(
            "SELECT rowid FROM {table} WHERE {table} MATCH ?1 ORDER BY rowid DESC"
        ))?;
        let mut rows = ids.query([&self.match_expr])?;
        let mut passed = 0;
        let budget = self.budget.clone();
        let mut pacer = Pacer::new(&budget);
        while let Some(r) = rows.next()? {
            pacer.tick()?;
            if self.check(r.get(0)?)?.is_some() {
                passed += 1;
                if passed >= k {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

impl Drop for Walk<'_> {
    fn drop(&mut self) {
        tracing::trace!(
            index = self.index.table(),
            postings_read = self.postings_read,
            rows_scored_by_fts5 = self.rows_scored_by_fts5,
            confirmed = self.confirmed,
            confirm_us = self.confirm_time.as_micros() as u64,
            count_us = self.count_time.as_micros() as u64,
            returned = self.returned,
            "ranked walk"
        );
    }
}

impl Plan {
    // public for the crate's tests (tests/all.rs); not part of the API
    #[doc(hidden)]
    pub fn idf(&self) -> &[f64] {
        &self.idf
    }

    // public for the crate's tests (tests/all.rs); not part of the API

    #[doc(hidden)]
    pub fn avgdl(&self) -> f64 {
        self.avgdl
    }
}

/// The parsed query, for tests.
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub fn parse_for_test(expr: &str, index: RankIndex) -> Option<Query> {
    parse(expr, index)
}
