//! Discover across sessions (title probe, ranked candidates, one hit per lineage, hydration) and
//! the search inside one session.

use super::messages::{count_visible, load, window};
use super::sessions::Sessions;
use super::{
    BOOKEND_CAP, Detail, DiscoverHit, DiscoverRequest, DiscoverResult, HitContext, HitDetail,
    IN_SESSION_MAX, InSessionMatch, InSessionResult, MAX_LIMIT, Miss, SearchOutcome, SearchRole,
    SessionInfo, Snippet, Sort, WINDOW_CAP, role_names,
};
use crate::error::Result;
use crate::search::{self, Candidate, CandidateSet, Filters, IndexCaps};
use crate::store::HIDDEN_SOURCES;
use rusqlite::{Connection, OptionalExtension};
use std::collections::HashSet;

/// Messages on each side of the match in a full hit.
const DISCOVER_RADIUS: usize = 5;
/// First/last messages of a full hit's session.
const BOOKEND_COUNT: usize = 3;
/// Compaction summaries are not bookends.
const SUMMARY_PREFIXES: [&str; 2] = ["[CONTEXT COMPACTION", "[CONTEXT SUMMARY]:"];

/// A discover hit before hydration.
struct Hit {
    session: SessionInfo,
    message_id: i64,
    role: String,
    title_match: bool,
}

fn first_visible_id(conn: &Connection, sid: &str) -> Result<Option<(i64, bool, bool)>> {
    Ok(conn
        .prepare(
            "SELECT id, active, compacted FROM messages WHERE session_id = ?1 AND (active = 1 OR compacted = 1)
             ORDER BY id LIMIT 1",
        )?
        .query_row([sid], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)? != 0, r.get::<_, i64>(2)? != 0))
        })
        .optional()?)
}

/// Title probe (spec §7.4): the newest `title #N` continuation first, then the exact title.
fn title_probe(
    conn: &Connection,
    sessions: &mut Sessions<'_>,
    current_root: Option<&str>,
    excluded: &HashSet<String>,
    req: &DiscoverRequest,
) -> Result<Option<Hit>> {
    let t = req
        .query
        .trim()
        .trim_matches(|c| c == '`' || c == '"' || c == '\'')
        .trim();
    if t.is_empty() {
        return Ok(None);
    }
    let hidden = HIDDEN_SOURCES.map(|h| format!("'{h}'")).join(",");
    let mut ids: Vec<String> = conn
        .prepare(&format!(
            "SELECT id FROM sessions WHERE title LIKE ?1 ESCAPE '\\' AND source NOT IN ({hidden})
             ORDER BY started_at DESC LIMIT 5"
        ))?
        .query_map([format!("{} #%", crate::query::escape_like(t))], |r| {
            r.get(0)
        })?
        .collect::<rusqlite::Result<_>>()?;
    let exact: Vec<String> = conn
        .prepare(&format!(
            "SELECT id FROM sessions WHERE title = ?1 COLLATE NOCASE AND source NOT IN ({hidden})
             ORDER BY started_at DESC LIMIT 5"
        ))?
        .query_map([t], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    ids.extend(exact);
    for id in ids {
        let Some(row) = sessions.get(&id)? else {
            continue;
        };
        if req.after.is_some_and(|a| row.started_at < a)
            || req.before.is_some_and(|b| row.started_at >= b)
        {
            continue;
        }
        let Some((mid, active, compacted)) = first_visible_id(conn, &id)? else {
            continue;
        };
        if !sessions.visible(&row, active, compacted, current_root)? {
            continue;
        }
        if excluded.contains(&sessions.root(&id)?) {
            continue;
        }
        return Ok(Some(Hit {
            session: row,
            message_id: mid,
            role: "session_title".into(),
            title_match: true,
        }));
    }
    Ok(None)
}

/// Lineage dedup (spec §10.3 step 4): keeps `c` if its session is visible, its lineage is not
/// excluded and not taken yet.
fn take_hit(
    sessions: &mut Sessions<'_>,
    current_root: Option<&str>,
    excluded: &HashSet<String>,
    roots: &mut HashSet<String>,
    hits: &mut Vec<Hit>,
    c: Candidate,
) -> Result<()> {
    let Some(row) = sessions.get(&c.session_id)? else {
        return Ok(());
    };
    if row.hidden() || !sessions.visible(&row, c.active, c.compacted, current_root)? {
        return Ok(());
    }
    let root = sessions.root(&c.session_id)?;
    if excluded.contains(&root) || !roots.insert(root) {
        return Ok(());
    }
    hits.push(Hit {
        session: row,
        message_id: c.id,
        role: c.role,
        title_match: false,
    });
    Ok(())
}

pub(crate) fn discover(
    conn: &Connection,
    sessions: &mut Sessions<'_>,
    current_root: Option<&str>,
    req: &DiscoverRequest,
    caps: IndexCaps<'_>,
) -> Result<SearchOutcome> {
    let limit = req.limit.clamp(1, MAX_LIMIT);
    let mut excluded = HashSet::new();
    for x in &req.exclude_session_ids {
        excluded.insert(sessions.root(x)?);
    }
    let mut hits: Vec<Hit> = Vec::new();
    let mut roots: HashSet<String> = HashSet::new();
    if let Some(h) = title_probe(conn, sessions, current_root, &excluded, req)? {
        roots.insert(sessions.root(&h.session.id)?);
        hits.push(h);
    }
    let filters = Filters {
        roles: role_names(&req.roles),
        after: req.after,
        before: req.before,
        session_id: None,
        exclude_hidden: true,
    };
    let mut set: CandidateSet<'_> = search::candidates(
        conn,
        &req.query,
        &filters,
        req.sort,
        search::SCAN_LIMIT,
        caps,
    )?;
    // Cron is demoted, not excluded (spec §10.3): of the first SCAN_LIMIT candidates, every
    // other row comes before every cron row, each class in BM25/recency order. Rows are pulled
    // one at a time and cron rows held back, so the walk stops as soon as `limit` lineages are
    // found — the same hits the sorted list of SCAN_LIMIT rows gives.
    let mut cron: Vec<Candidate> = Vec::new();
    let mut pulled = 0;
    while hits.len() < limit && pulled < search::SCAN_LIMIT {
        let Some(c) = set.rows.next_row()? else {
            break;
        };
        pulled += 1;
        if c.source == "cron" {
            cron.push(c);
            continue;
        }
        take_hit(sessions, current_root, &excluded, &mut roots, &mut hits, c)?;
    }
    for c in cron {
        if hits.len() >= limit {
            break;
        }
        take_hit(sessions, current_root, &excluded, &mut roots, &mut hits, c)?;
    }
    hits.truncate(limit);

    let mut out = Vec::with_capacity(hits.len());
    for (i, h) in hits.into_iter().enumerate() {
        let root_id = sessions.root(&h.session.id)?;
        let meta = sessions.get(&root_id)?.unwrap_or_else(|| h.session.clone());
        let snippet = if h.title_match {
            Snippet::Title(h.session.title.clone())
        } else {
            Snippet::Text(search::snippet(conn, &set.matcher, h.message_id)?)
        };
        let detail = match req.detail {
            Detail::Index => HitDetail::Index,
            Detail::Full => HitDetail::Full,
            Detail::Adaptive if i == 0 => HitDetail::Full,
            Detail::Adaptive => HitDetail::Compact,
        };
        let context = match detail {
            HitDetail::Index => None,
            HitDetail::Full => Some(full_context(conn, &h.session.id, h.message_id)?),
            HitDetail::Compact => Some(compact_context(conn, &h.session.id, h.message_id)?),
        };
        out.push(DiscoverHit {
            lineage_root: (root_id != h.session.id).then_some(root_id),
            session_id: h.session.id,
            started_at: h.session.started_at,
            source: meta.source,
            model: meta.model,
            title: meta.title,
            matched_role: h.role,
            match_message_id: h.message_id,
            snippet,
            detail,
            context,
        });
    }
    Ok(SearchOutcome::Discover(DiscoverResult {
        query: req.query.clone(),
        detail: req.detail,
        hits: out,
        search_path: set.path,
        candidate_limit: search::SCAN_LIMIT,
        candidate_limit_reached: set.rows.limit_reached(search::SCAN_LIMIT)?,
        gap_scan: set.gap,
    }))
}

/// The window around the match plus the session's first and last messages outside it.
fn full_context(conn: &Connection, sid: &str, id: i64) -> Result<HitContext> {
    let w = window(conn, sid, id, DISCOVER_RADIUS, WINDOW_CAP)?;
    let not_summary = SUMMARY_PREFIXES
        .iter()
        .map(|p| format!(" AND substr(content, 1, {}) <> '{}'", p.chars().count(), p))
        .collect::<String>();
    let bookend_start = load(
        conn,
        &format!("session_id = ?1 AND id < ?2{not_summary}"),
        "ASC",
        BOOKEND_COUNT,
        BOOKEND_CAP,
        &[&sid, &w.first_id],
        None,
    )?;
    let mut bookend_end = load(
        conn,
        &format!("session_id = ?1 AND id > ?2{not_summary}"),
        "DESC",
        BOOKEND_COUNT,
        BOOKEND_CAP,
        &[&sid, &w.last_id],
        None,
    )?;
    bookend_end.reverse();
    let w = w.window;
    Ok(HitContext {
        bookend_start,
        messages: w.messages,
        bookend_end,
        messages_before: w.total_before,
        messages_after: w.total_after,
        returned_before: w.returned_before,
        returned_after: w.returned_after,
    })
}

/// The matching message alone, with the counts around it.
fn compact_context(conn: &Connection, sid: &str, id: i64) -> Result<HitContext> {
    let messages = load(
        conn,
        "session_id = ?1 AND id = ?2",
        "ASC",
        1,
        WINDOW_CAP,
        &[&sid, &id],
        Some(id),
    )?;
    Ok(HitContext {
        bookend_start: Vec::new(),
        messages,
        bookend_end: Vec::new(),
        messages_before: count_visible(conn, sid, "id < ?2", id)?,
        messages_after: count_visible(conn, sid, "id > ?2", id)?,
        returned_before: 0,
        returned_after: 0,
    })
}

/// Search inside one session, compacted rows included (spec §15.6).
pub(crate) fn in_session(
    conn: &Connection,
    sessions: &mut Sessions<'_>,
    sid: &str,
    query: &str,
    roles: &[SearchRole],
    sort: Sort,
    caps: IndexCaps<'_>,
) -> Result<SearchOutcome> {
    if sessions.get(sid)?.filter(|r| !r.hidden()).is_none() {
        return Ok(SearchOutcome::Miss(Miss::SessionNotFound));
    }
    let filters = Filters {
        roles: role_names(roles),
        after: None,
        before: None,
        session_id: Some(sid.to_owned()),
        exclude_hidden: true,
    };
    let mut set = search::candidates(conn, query, &filters, sort, IN_SESSION_MAX, caps)?;
    let rows = set.rows.take(IN_SESSION_MAX)?;
    let mut matches = Vec::with_capacity(rows.len());
    for c in &rows {
        matches.push(InSessionMatch {
            message_id: c.id,
            role: c.role.clone(),
            timestamp: c.timestamp,
            active: c.active,
            compacted: c.compacted,
            snippet: search::snippet(conn, &set.matcher, c.id)?,
        });
    }
    Ok(SearchOutcome::InSession(InSessionResult {
        session_id: sid.to_owned(),
        query: query.to_owned(),
        matches,
        search_path: set.path,
        gap_scan: set.gap,
    }))
}
