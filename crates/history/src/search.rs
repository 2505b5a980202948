//! Candidate search and routing (spec §9): FTS5 first, the substring retry, the OR-relaxed retry,
//! the syntax-error rebuild, and the LIKE scan over canonical rows.

use crate::backfill::IndexState;
use crate::budget::{Budget, Pacer};
use crate::error::{FailureClass, HistoryError, Result};
use crate::query;
use crate::rank::{ListCache, RankIndex, Walk};
use crate::store::HIDDEN_SOURCES;
use rusqlite::types::Value;
use rusqlite::{Connection, ErrorCode, Statement};
use serde::Serialize;
use std::cell::RefCell;

/// Discover scans at most this many candidate rows (spec §10.3).
pub const SCAN_LIMIT: usize = 300;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Relevance,
    Newest,
    Oldest,
}

/// Filters applied on every route, inside the SQL so LIMIT cannot be filled by filtered rows.
#[derive(Debug, Clone)]
pub struct Filters {
    /// Validated role names (`user`, `assistant`, `tool`).
    pub roles: Vec<&'static str>,
    pub after: Option<f64>,
    pub before: Option<f64>,
    pub session_id: Option<String>,
    pub exclude_hidden: bool,
}

#[derive(Debug, Clone)]
pub struct Candidate {
    pub id: i64,
    pub session_id: String,
    pub role: String,
    pub active: bool,
    pub compacted: bool,
    pub timestamp: f64,
    pub source: String,
}

/// What matched, so snippets can be computed later for the few rows actually shown.
#[derive(Debug, Clone)]
pub enum Matcher {
    None,
    Fts { table: &'static str, expr: String },
    Like { anchor: String },
}

/// Candidate rows in route order: a list a query returned, or a ranked walk that produces
/// them one at a time (so a caller that needs three sessions never pays for three hundred).
pub enum Rows<'c> {
    List {
        rows: std::vec::IntoIter<Candidate>,
        /// Rows the route returned before any gap-scan rows were merged in.
        scanned: usize,
    },
    Ranked {
        walk: Box<Walk<'c>>,
        peeked: Option<Candidate>,
    },
}

impl<'c> Rows<'c> {
    fn list(rows: Vec<Candidate>, scanned: usize) -> Self {
        Self::List {
            rows: rows.into_iter(),
            scanned,
        }
    }

    pub fn next_row(&mut self) -> Result<Option<Candidate>> {
        match self {
            Self::List { rows, .. } => Ok(rows.next()),
            Self::Ranked { walk, peeked } => match peeked.take() {
                Some(c) => Ok(Some(c)),
                None => walk.next_row(),
            },
        }
    }

    /// Whether at least one row comes (keeps it for [`Rows::next_row`]).
    pub fn has_rows(&mut self) -> Result<bool> {
        match self {
            Self::List { rows, .. } => Ok(rows.len() > 0),
            Self::Ranked { walk, peeked } => {
                if peeked.is_none() {
                    *peeked = walk.next_row()?;
                }
                Ok(peeked.is_some())
            }
        }
    }

    /// Whether the route has at least `limit` candidates (`candidate_limit_reached`): a list
    /// knows; a walk that stopped early counts the rest newest first without ranking.
    pub fn limit_reached(&mut self, limit: usize) -> Result<bool> {
        match self {
            Self::List { scanned, .. } => Ok(*scanned >= limit),
            Self::Ranked { walk, .. } => walk.at_least(limit),
        }
    }

    /// Up to `limit` rows.
    pub fn take(&mut self, limit: usize) -> Result<Vec<Candidate>> {
        let mut out = Vec::new();
        while out.len() < limit {
            match self.next_row()? {
                Some(c) => out.push(c),
                None => break,
            }
        }
        Ok(out)
    }
}

pub struct CandidateSet<'c> {
    pub rows: Rows<'c>,
    pub path: &'static str,
    pub matcher: Matcher,
    /// Set when the route's index is still building: the unindexed id range was LIKE-scanned.
    pub gap: Option<GapScan>,
}

/// The bounded LIKE scan over a building index's unindexed ids (spec §15.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GapScan {
    pub index: &'static str,
    /// Inclusive range of message ids not yet in the index.
    pub unindexed_ids: [i64; 2],
    /// Rows found only by the scan.
    pub hits: usize,
}

/// What a search may use: the indexes that can serve queries right now, the store's decoded
/// posting lists, and the time and interest left ([`Budget`], checked between blocks of Rust
/// work, which SQLite's progress handler does not see).
#[derive(Clone, Copy)]
pub struct IndexCaps<'s> {
    pub fts: IndexState,
    pub trigram: IndexState,
    pub cjk: IndexState,
    /// The process's decoded posting lists and the key of this store in them.
    pub(crate) lists: Option<(&'s crate::rank::SharedLists, u64)>,
    pub(crate) budget: &'s Budget,
}

fn filter_sql(f: &Filters, params: &mut Vec<Value>) -> String {
    let mut s = String::from(" AND (m.active = 1 OR m.compacted = 1)");
    if f.exclude_hidden {
        let list = HIDDEN_SOURCES.map(|h| format!("'{h}'")).join(",");
        s.push_str(&format!(" AND s.source NOT IN ({list})"));
    }
    if !f.roles.is_empty() {
        let list = f
            .roles
            .iter()
            .map(|r| format!("'{r}'"))
            .collect::<Vec<_>>()
            .join(",");
        s.push_str(&format!(" AND m.role IN ({list})"));
    }
    if let Some(a) = f.after {
        params.push(Value::Real(a));
        s.push_str(&format!(" AND s.started_at >= ?{}", params.len()));
    }
    if let Some(b) = f.before {
        params.push(Value::Real(b));
        s.push_str(&format!(" AND s.started_at < ?{}", params.len()));
    }
    if let Some(sid) = &f.session_id {
        params.push(Value::Text(sid.clone()));
        s.push_str(&format!(" AND m.session_id = ?{}", params.len()));
    }
    s
}

pub(crate) fn candidate(r: &rusqlite::Row<'_>) -> rusqlite::Result<Candidate> {
    Ok(Candidate {
        id: r.get(0)?,
        session_id: r.get(1)?,
        role: r.get(2)?,
        active: r.get::<_, i64>(3)? != 0,
        compacted: r.get::<_, i64>(4)? != 0,
        timestamp: r.get(5)?,
        source: r.get(6)?,
    })
}

fn read_rows(conn: &Connection, sql: &str, params: Vec<Value>) -> Result<Vec<Candidate>> {
    let mut st = conn.prepare(sql)?;
    let rows = st
        .query_map(rusqlite::params_from_iter(params), candidate)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

const COLS: &str = "m.id, m.session_id, m.role, m.active, m.compacted, m.timestamp, s.source";

/// The statement that returns one candidate by id (its last parameter) when it passes the
/// filters, through the `messages_filter` covering index, and the parameters bound before it.
pub fn filter_check<'c>(conn: &'c Connection, f: &Filters) -> Result<(Statement<'c>, Vec<Value>)> {
    let mut params = Vec::new();
    let filters = filter_sql(f, &mut params);
    let check_sql = format!(
        "SELECT {COLS} FROM messages m INDEXED BY messages_filter \
         JOIN sessions s ON s.id = m.session_id WHERE m.id = ?{n}{filters}",
        n = params.len() + 1
    );
    Ok((conn.prepare(&check_sql)?, params))
}

#[expect(
    clippy::too_many_arguments,
    reason = "the route's query, its filters and ordering, and what the search may use"
)]
fn fts_query<'c>(
    conn: &'c Connection,
    table: &'static str,
    raw_expr: &str,
    f: &Filters,
    sort: Sort,
    limit: usize,
    lists: Option<&RefCell<ListCache<'_>>>,
    budget: &Budget,
) -> Result<Rows<'c>> {
    // Every match ranked from the posting lists of complete id segments (see `crate::rank`),
    // when the index is ready (`lists`); not inside one session (a small range) or a time window.
    if let Some(cache) = lists
        && sort == Sort::Relevance
        && f.after.is_none()
        && f.before.is_none()
        && f.session_id.is_none()
        && let Some(index) = RankIndex::of_table(table)
        && let Some(plan) = match crate::rank::plan(conn, index, raw_expr, cache, budget) {
            Ok(plan) => plan,
            // The deadline is the search's; anything else wrong with the lists (derived data)
            // costs speed, not the answer.
            Err(e) if e.classify() == FailureClass::Timeout => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "ranking lists unreadable; ranking with bm25()");
                None
            }
        }
    {
        let (check, params) = filter_check(conn, f)?;
        return Ok(Rows::Ranked {
            walk: Box::new(Walk::new(conn, plan, check, params, budget.clone())?),
            peeked: None,
        });
    }
    // The base index keeps tool bodies in `tool_result`; this route never serves the tool role
    // (that goes to LIKE), so restrict matching to the conversational columns.
    let expr = match RankIndex::of_table(table) {
        Some(RankIndex::Base) => RankIndex::Base.match_expr(raw_expr),
        _ => raw_expr.to_owned(),
    };
    // A time-bounded search filters in SQL: walking the ranked list could visit many rows
    // outside a narrow range before finding enough inside it.
    if sort == Sort::Relevance && f.after.is_none() && f.before.is_none() {
        let rows = ranked(conn, table, &expr, f, limit, budget)?;
        let n = rows.len();
        return Ok(Rows::list(rows, n));
    }
    let mut params = vec![Value::Text(expr)];
    let filters = filter_sql(f, &mut params);
    // Time orders tie-break on id, not rank: a rank key would be computed for every match.
    let order = match sort {
        Sort::Relevance => format!("{table}.rank"),
        Sort::Newest => "m.timestamp DESC, m.id DESC".to_owned(),
        Sort::Oldest => "m.timestamp ASC, m.id ASC".to_owned(),
    };
    let sql = format!(
        "SELECT {COLS} FROM {table} JOIN messages m ON m.id = {table}.rowid \
         JOIN sessions s ON s.id = m.session_id \
         WHERE {table} MATCH ?1{filters} ORDER BY {order} LIMIT {limit}"
    );
    let rows = read_rows(conn, &sql, params)?;
    let n = rows.len();
    Ok(Rows::list(rows, n))
}

/// Relevance: every match is ranked by BM25 (FTS5 sorts the whole match set once), then the
/// ranked rowids are walked best first and each is checked against the filters (role,
/// visibility, hidden source, session) until `limit` rows pass. So no filtered row can
/// crowd a better one out, and no match is left unranked however old it is; only the rows
/// actually walked pay for the join (through the `messages_filter` covering index).
fn ranked(
    conn: &Connection,
    table: &'static str,
    expr: &str,
    f: &Filters,
    limit: usize,
    budget: &Budget,
) -> Result<Vec<Candidate>> {
    let (mut check, params) = filter_check(conn, f)?;
    // Inside one session only its id range is ranked (a session's ids are one or a few runs).
    let range = match &f.session_id {
        Some(sid) => {
            let (lo, hi): (Option<i64>, Option<i64>) = conn.query_row(
                "SELECT MIN(id), MAX(id) FROM messages WHERE session_id = ?1",
                [sid],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            match (lo, hi) {
                (Some(lo), Some(hi)) => format!(" AND rowid BETWEEN {lo} AND {hi}"),
                _ => return Ok(Vec::new()),
            }
        }
        None => String::new(),
    };
    // Scores come out in rowid order and are sorted here, which is cheaper than FTS5's
    // `ORDER BY rank` (every match through SQLite's sorter). Ties keep the newer row first.
    let mut scored: Vec<(f64, i64)> = conn
        .prepare(&format!(
            "SELECT bm25({table}), rowid FROM {table} WHERE {table} MATCH ?1{range}"
        ))?
        .query_map([expr], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    budget.check()?;
    scored.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut out = Vec::with_capacity(limit.min(64));
    let mut pacer = Pacer::new(budget);
    for &(_, id) in &scored {
        if out.len() >= limit {
            break;
        }
        pacer.tick()?;
        let mut p = params.clone();
        p.push(Value::Integer(id));
        let mut hit = check.query_map(rusqlite::params_from_iter(p), candidate)?;
        if let Some(c) = hit.next() {
            out.push(c?);
        }
    }
    Ok(out)
}

fn like_query(
    conn: &Connection,
    expr: &str,
    f: &Filters,
    sort: Sort,
    limit: usize,
    id_range: Option<(i64, i64)>,
) -> Result<Vec<Candidate>> {
    let groups = query::like_groups(expr);
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let mut params = Vec::new();
    let mut filters = filter_sql(f, &mut params);
    if let Some((after, upto)) = id_range {
        filters.push_str(&format!(" AND m.id > {after} AND m.id <= {upto}"));
    }
    let mut ors = Vec::new();
    for g in &groups {
        let mut ands = Vec::new();
        for t in g {
            params.push(Value::Text(query::like_pattern(&t.text)));
            let n = params.len();
            let clause = format!(
                "(m.content LIKE ?{n} ESCAPE '\\' OR m.tool_name LIKE ?{n} ESCAPE '\\' OR m.tool_calls LIKE ?{n} ESCAPE '\\')"
            );
            ands.push(if t.negated {
                format!("NOT {clause}")
            } else {
                clause
            });
        }
        ors.push(format!("({})", ands.join(" AND ")));
    }
    let dir = if sort == Sort::Oldest { "ASC" } else { "DESC" };
    let sql = format!(
        // Filters (role, visibility, source, time) come first: SQLite evaluates the terms in
        // order, so tool bodies (most of the bytes) are never read for user/assistant searches.
        "SELECT {COLS} FROM messages m JOIN sessions s ON s.id = m.session_id \
         WHERE TRUE{filters} AND ({}) ORDER BY m.timestamp {dir}, m.id {dir} LIMIT {limit}",
        ors.join(" OR ")
    );
    read_rows(conn, &sql, params)
}

/// An FTS5 query error that a relaxed retry may fix (syntax), as opposed to a timeout or
/// corruption, which must surface.
fn is_query_syntax_error(e: &HistoryError) -> bool {
    match e {
        HistoryError::Sqlite(rusqlite::Error::SqliteFailure(err, _)) => {
            err.code == ErrorCode::Unknown
        }
        HistoryError::Sqlite(rusqlite::Error::SqlInputError { .. }) => true,
        _ => false,
    }
}

fn like_anchor(expr: &str) -> String {
    query::like_groups(expr)
        .first()
        .and_then(|g| g.iter().find(|t| !t.negated))
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

/// The set if it has at least one row.
fn non_empty(mut set: CandidateSet<'_>) -> Result<Option<CandidateSet<'_>>> {
    Ok(set.rows.has_rows()?.then_some(set))
}

/// Run the routing ladder of spec §9 and return the candidate rows.
pub fn candidates<'c>(
    conn: &'c Connection,
    raw_query: &str,
    f: &Filters,
    sort: Sort,
    limit: usize,
    caps: IndexCaps<'_>,
) -> Result<CandidateSet<'c>> {
    let expr = query::sanitize(raw_query);
    if expr.is_empty() {
        return Ok(CandidateSet {
            rows: Rows::list(Vec::new(), 0),
            path: "empty",
            matcher: Matcher::None,
            gap: None,
        });
    }
    let like = |conn: &'c Connection| -> Result<CandidateSet<'c>> {
        let rows = like_query(conn, &expr, f, sort, limit, None)?;
        let n = rows.len();
        Ok(CandidateSet {
            rows: Rows::list(rows, n),
            gap: None,
            path: "like",
            matcher: Matcher::Like {
                anchor: like_anchor(&expr),
            },
        })
    };
    if f.roles.contains(&"tool") || !caps.fts.usable() {
        return like(conn);
    }
    // Posting lists decoded by one route are reused by the next (the relaxed retries read the
    // same tokens).
    let lists = RefCell::new(ListCache::new(caps.lists));
    let state_of = |table: &str| match table {
        "messages_fts_cjk" => caps.cjk,
        "messages_fts_trigram" => caps.trigram,
        _ => caps.fts,
    };
    let fts = |table: &'static str,
               e: &str,
               path: &'static str|
     -> Result<Option<CandidateSet<'c>>> {
        if e.trim().is_empty() {
            return Ok(None);
        }
        let state = state_of(table);
        let ready = state.is_ready().then_some(&lists);
        let rows = fts_query(conn, table, e, f, sort, limit, ready, caps.budget)?;
        let (mut rows, scanned) = match rows {
            Rows::List { rows, scanned } => (rows.collect::<Vec<_>>(), scanned),
            ranked @ Rows::Ranked { .. } => {
                return Ok(Some(CandidateSet {
                    rows: ranked,
                    gap: None,
                    path,
                    matcher: Matcher::Fts {
                        table,
                        expr: e.to_owned(),
                    },
                }));
            }
        };
        let mut gap = None;
        // While the index builds, rows in (P, H] are not in it yet: scan them with LIKE so old
        // messages never vanish (bounded by the id range, the remaining limit and the deadline).
        if let IndexState::Building { high, progress } = state
            && progress < high
        {
            let mut hits = 0;
            if rows.len() < limit {
                let seen: std::collections::HashSet<i64> = rows.iter().map(|r| r.id).collect();
                let extra =
                    like_query(conn, e, f, sort, limit - rows.len(), Some((progress, high)))?;
                for r in extra.into_iter().filter(|r| !seen.contains(&r.id)) {
                    rows.push(r);
                    hits += 1;
                }
                match sort {
                    Sort::Relevance => {}
                    Sort::Newest => rows
                        .sort_by(|a, b| b.timestamp.total_cmp(&a.timestamp).then(b.id.cmp(&a.id))),
                    Sort::Oldest => rows
                        .sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp).then(a.id.cmp(&b.id))),
                }
            }
            gap = Some(GapScan {
                index: table,
                unindexed_ids: [progress + 1, high],
                hits,
            });
        }
        Ok(Some(CandidateSet {
            rows: Rows::list(rows, scanned),
            gap,
            path,
            matcher: Matcher::Fts {
                table,
                expr: e.to_owned(),
            },
        }))
    };

    if query::has_cjk(&expr) {
        let quoted = query::quote_each_token(&expr, true);
        // A `%` survives sanitising only in CJK text, precisely so it can be matched literally:
        // the indexes treat it as a separator, so such queries go to LIKE.
        let literal = expr.contains('%');
        if caps.cjk.usable() && !literal && !query::has_lone_cjk_char(&expr) {
            match fts("messages_fts_cjk", &quoted, "cjk") {
                Ok(Some(set)) => return Ok(set),
                Ok(None) => {}
                Err(e) if is_query_syntax_error(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let per_token_ok = query::non_operator_tokens(&expr)
            .iter()
            .filter(|t| query::has_cjk(t))
            .all(|t| t.chars().filter(|c| query::is_cjk(*c)).count() >= 3);
        if caps.trigram.usable() && per_token_ok && !literal && !query::has_lone_cjk_char(&expr) {
            match fts("messages_fts_trigram", &quoted, "trigram") {
                Ok(Some(set)) => return Ok(set),
                Ok(None) => {}
                Err(e) if is_query_syntax_error(&e) => {}
                Err(e) => return Err(e),
            }
        }
        return like(conn);
    }

    // Non-CJK: FTS5, with a syntax-safe rebuild if FTS5 rejects the sanitised text.
    let mut base_expr = expr.clone();
    let first = match fts("messages_fts", &expr, "fts5") {
        Ok(s) => s,
        Err(e) if is_query_syntax_error(&e) => {
            base_expr = query::strict_rebuild(&expr);
            match fts("messages_fts", &base_expr, "fts5") {
                Ok(s) => s,
                Err(e) if is_query_syntax_error(&e) => return like(conn),
                Err(e) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    };
    let Some(mut first) = first else {
        return like(conn);
    };
    if first.rows.has_rows()? {
        return Ok(first);
    }
    // Substring retry: Latin fused to CJK (`修改youer服务端`) is one unicode61 token.
    let quoted = query::quote_each_token(&base_expr, false);
    if caps.cjk.usable() {
        match fts("messages_fts_cjk", &quoted, "cjk") {
            Ok(Some(set)) => {
                if let Some(set) = non_empty(set)? {
                    return Ok(set);
                }
            }
            Ok(None) => {}
            Err(e) if is_query_syntax_error(&e) => {}
            Err(e) => return Err(e),
        }
    }
    // The trigram retry exists for Latin fused to CJK; the native CJK index above already splits
    // those, so trigram (costly for common trigrams) only runs while that index is not ready.
    let tokens = query::non_operator_tokens(&base_expr);
    if caps.trigram.usable()
        && !caps.cjk.usable()
        && !tokens.is_empty()
        && tokens.iter().all(|t| t.chars().count() >= 3)
    {
        match fts("messages_fts_trigram", &quoted, "trigram") {
            Ok(Some(set)) => {
                if let Some(set) = non_empty(set)? {
                    return Ok(set);
                }
            }
            Ok(None) => {}
            Err(e) if is_query_syntax_error(&e) => {}
            Err(e) => return Err(e),
        }
    }
    if let Some(relaxed) = query::or_relaxed(&base_expr) {
        match fts("messages_fts", &relaxed, "fts5_or") {
            Ok(Some(set)) => {
                if let Some(set) = non_empty(set)? {
                    return Ok(set);
                }
            }
            Ok(None) => {}
            Err(e) if is_query_syntax_error(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(first)
}

/// Phrase occurrences in one row up to which FTS5's `snippet()` is used. It scores a window
/// at every occurrence by walking every occurrence (quadratic, inside one SQLite step, where
/// neither the progress handler nor a deadline can stop it): 3,000 repetitions of a word and a
/// query naming it 7 times took seconds, 201 times hours. Up to this many it costs about a
/// millisecond; a row with more gets the plain snippet around its first match.
pub(crate) const SNIPPET_MAX_OCCURRENCES: i64 = 512;

/// A snippet for one shown row: FTS5 `snippet()` on the route that matched (for a row with at
/// most [`SNIPPET_MAX_OCCURRENCES`] matches), otherwise 240 characters starting 60 before the
/// first case-insensitive occurrence of the anchor term.
pub fn snippet(conn: &Connection, matcher: &Matcher, id: i64) -> Result<String> {
    if let Matcher::Fts { table, expr } = matcher {
        let sql = format!(
            "SELECT CASE WHEN {count}({table}, {SNIPPET_MAX_OCCURRENCES}) <= \
             {SNIPPET_MAX_OCCURRENCES} THEN snippet({table}, -1, '>>>', '<<<', '...', 40) END \
             FROM {table} WHERE {table} MATCH ?1 AND rowid = ?2",
            count = crate::rank::OCCURRENCES_FUNCTION
        );
        let s = match conn.query_row(&sql, rusqlite::params![expr, id], |r| {
            r.get::<_, Option<String>>(0)
        }) {
            Ok(s) => s,
            Err(e) => {
                let e = HistoryError::from(e);
                // Out of time: no fallback either. Any other failure (the row left the index,
                // a damaged index): the plain snippet below.
                if e.classify() == FailureClass::Timeout {
                    return Err(e);
                }
                None
            }
        };
        if let Some(s) = s.filter(|s| !s.is_empty()) {
            return Ok(s);
        }
    }
    let anchor = match matcher {
        Matcher::Like { anchor } => anchor.clone(),
        Matcher::Fts { expr, .. } => query::non_operator_tokens(expr)
            .into_iter()
            .next()
            .unwrap_or_default(),
        Matcher::None => String::new(),
    };
    let (content, tool_name, tool_calls): (String, String, String) = conn.query_row(
        "SELECT content, tool_name, tool_calls FROM messages WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let text = [content, tool_name, tool_calls]
        .into_iter()
        .find(|t| !anchor.is_empty() && find_ci(t, &anchor).is_some())
        .unwrap_or_default();
    let source = if text.is_empty() {
        conn.query_row("SELECT content FROM messages WHERE id = ?1", [id], |r| {
            r.get::<_, String>(0)
        })?
    } else {
        text
    };
    let start_char = find_ci(&source, &anchor).unwrap_or(0).saturating_sub(60);
    Ok(source.chars().skip(start_char).take(240).collect())
}

/// Character index of the first case-insensitive occurrence of `needle` (Unicode lowercase).
fn find_ci(hay: &str, needle: &str) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    let hay_l: Vec<char> = hay.chars().flat_map(char::to_lowercase).collect();
    let nee_l: Vec<char> = needle.chars().flat_map(char::to_lowercase).collect();
    if hay_l.len() != hay.chars().count() {
        // Lowercasing changed the length (rare scripts): fall back to a case-sensitive search.
        return hay.find(needle).map(|b| hay[..b].chars().count());
    }
    // Linear (a substring search), so a megabyte tool body costs a millisecond whatever the
    // anchor: compared slice by slice it could cost its length times the anchor's.
    let hay_s: String = hay_l.into_iter().collect();
    let nee_s: String = nee_l.into_iter().collect();
    hay_s.find(&nee_s).map(|b| hay_s[..b].chars().count())
}
