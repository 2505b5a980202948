//! Relevance ranking at scale: every match that passes the filters is ranked, and most of
//! them without touching FTS5.
//!
//! Scoring a row through FTS5 costs about a microsecond (its length is a B-tree lookup in
//! `<table>_docsize`, and the row goes through SQLite's VM); a common term matches a hundred
//! thousand rows of a two-million-message history. So message ids are cut into fixed ranges —
//! *segments* of [`DEFAULT_SEGMENT_IDS`] ids — and once a later id exists (ids only grow, a
//! message's text never changes) a background task writes, for each term of the segment, its
//! posting list: the documents holding it with the term's frequency and the document's length
//! ([`stats`], [`postings`]). A ranked search then evaluates the query over those lists in Rust
//! (BM25 exactly as FTS5 computes it, with one set of collection statistics per query), scores
//! only the ids no segment covers yet through the `mpa_rank` FTS5 function ([`ffi`]), and hands
//! rows out best first ([`walk`]); the caller stops pulling when it has enough. A phrase of
//! several tokens (Chinese bigrams) is only bounded from the lists (it occurs at most as often
//! as its rarest token) and checked by FTS5 when it reaches the top. Everything the lists cannot
//! serve (prefix queries, an index that is rebuilding, a store whose segments are not
//! summarised yet) goes to the plain `bm25()` path.

// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod expr;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod ffi;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod postings;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod stats;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod walk;

pub(crate) use ffi::OCCURRENCES_FUNCTION;
pub use ffi::register_rank_function;
pub use walk::{ListCache, SharedLists, Walk, plan};

/// Ids per segment. A segment is summarised once its last id has been assigned; the ids
/// above the last summarised segment (at most about this many) are scored through FTS5, which
/// costs about a microsecond a match — small segments keep that part small (a query reads one
/// list row per segment and token, a few microseconds each).
pub const DEFAULT_SEGMENT_IDS: i64 = 1 << 13;

/// BM25 parameters of FTS5's `bm25()`.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// A row's BM25 score as FTS5's `bm25()` computes it: over the phrases in order, `idf_p · f_p ·
/// (k1 + 1) / (f_p + k1 · (1 − b + b · D / avgdl))`, each step written as FTS5 writes it, for the
/// phrase frequencies `freq` of a document of `d` tokens. `mpa_rank` and the posting-list scorer
/// both call this one function, so a row scores bit-for-bit the same on either path. A phrase
/// that does not occur adds exactly 0, so it is skipped. Non-decreasing in every frequency in
/// floating point too (each step is a correctly rounded monotone operation), so frequency bounds
/// give a score bound.
pub fn bm25(freq: &[f64], idf: &[f64], d: f64, avgdl: f64) -> f64 {
    bm25_normed(freq, idf, length_norm(d, avgdl))
}

/// The document-length part of BM25's denominator, `k1 (1 − b + b · D / avgdl)`, as FTS5 writes
/// it (the same for every phrase of a row, so it can be computed once per length).
pub(crate) fn length_norm(d: f64, avgdl: f64) -> f64 {
    K1 * (1.0 - B + B * d / avgdl)
}

/// [`bm25`] given the row's [`length_norm`].
pub(crate) fn bm25_normed(freq: &[f64], idf: &[f64], norm: f64) -> f64 {
    let mut score = 0.0;
    for (&f, &w) in freq.iter().zip(idf) {
        if f > 0.0 {
            score += w * ((f * (K1 + 1.0)) / (f + norm));
        }
    }
    score
}

/// FTS5's idf for a phrase held by `n` of `rows` documents (never ≤ 0).
pub fn idf(rows: f64, n: f64) -> f64 {
    let n = n.clamp(0.0, rows);
    let v = ((rows - n + 0.5) / (n + 0.5)).ln();
    if v <= 0.0 { 1e-6 } else { v }
}

/// The indexes whose ranking can use segment statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RankIndex {
    /// `messages_fts` (SQLite's `unicode61`), searched through its first three columns.
    Base,
    /// `messages_fts_cjk` (the native `cjk_unicode61`).
    Cjk,
}

impl RankIndex {
    pub const ALL: [RankIndex; 2] = [RankIndex::Base, RankIndex::Cjk];

    pub(crate) fn of_table(table: &str) -> Option<Self> {
        match table {
            "messages_fts" => Some(Self::Base),
            "messages_fts_cjk" => Some(Self::Cjk),
            _ => None,
        }
    }

    pub fn table(self) -> &'static str {
        match self {
            Self::Base => "messages_fts",
            Self::Cjk => "messages_fts_cjk",
        }
    }

    /// The index's columns, in declaration order (read from `<table>_src`).
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            Self::Base => &["content", "tool_name", "tool_calls", "tool_result"],
            Self::Cjk => &["content", "tool_name"],
        }
    }

    /// Leading columns a ranked search matches (the base index's tool bodies are excluded by a
    /// column filter; their tokens still count in the document length).
    pub fn searched_columns(self) -> usize {
        match self {
            Self::Base => 3,
            Self::Cjk => 2,
        }
    }

    /// Version of the token stream the statistics were computed with.
    pub(crate) fn tokenizer_version(self) -> i64 {
        match self {
            Self::Base => 0,
            Self::Cjk => i64::from(crate::tokenizer::TOKENIZER_VERSION),
        }
    }

    /// Calls `emit(term, colocated)` for each token of one column value, as the index does.
    pub(crate) fn tokenize_document(self, text: &[u8], emit: &mut impl FnMut(&[u8], bool)) {
        match self {
            Self::Base => crate::tokenizer::tokenize_unicode61(text, &mut |t, _, _| emit(t, false)),
            Self::Cjk => crate::tokenizer::tokenize_cjk(
                text,
                crate::tokenizer::TokenizeReason::Document,
                &mut |t, _, _, colocated| emit(t, colocated),
            ),
        }
    }

    /// The tokens of a query string, or `None` if the tokenizer marks any as colocated (a
    /// synonym, which the bounds do not model).
    pub(crate) fn tokenize_query(self, text: &str) -> Option<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        let mut synonym = false;
        match self {
            Self::Base => crate::tokenizer::tokenize_unicode61(text.as_bytes(), &mut |t, _, _| {
                out.push(truncate(t).to_vec())
            }),
            Self::Cjk => crate::tokenizer::tokenize_cjk(
                text.as_bytes(),
                crate::tokenizer::TokenizeReason::Query { prefix: false },
                &mut |t, _, _, colocated| {
                    synonym |= colocated;
                    out.push(truncate(t).to_vec());
                },
            ),
        }
        (!synonym).then_some(out)
    }

    /// The column filter a ranked search of this index wraps its expression in.
    pub fn match_expr(self, expr: &str) -> String {
        match self {
            Self::Base => format!("{{content tool_name tool_calls}} : ({expr})"),
            Self::Cjk => expr.to_owned(),
        }
    }
}

/// FTS5 indexes at most this many bytes of a token (`FTS5_MAX_TOKEN_SIZE`); statistics key on
/// the same prefix.
const MAX_TOKEN_BYTES: usize = 32768;

pub(crate) fn truncate(token: &[u8]) -> &[u8] {
    &token[..token.len().min(MAX_TOKEN_BYTES)]
}
