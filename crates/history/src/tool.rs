//! The `session_search` tool (spec §10): argument validation, mode inference and the four modes
//! (discover, read, scroll, browse) plus the in-session search of spec §15.6, with the exact
//! output shapes of §10.8.

use crate::IndexStatus;
use crate::backfill::IndexState;
use crate::error::Result;
use crate::search::{self, Candidate, CandidateSet, Filters, IndexCaps, Sort};
use crate::store::{HIDDEN_SOURCES, LEFT_CONTEXT_REASONS, MAX_SESSION_ID_CHARS};
use crate::{SearchContext, query};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};

pub const DEFAULT_LIMIT: usize = 3;
pub const MAX_LIMIT: usize = 10;
pub const DEFAULT_WINDOW: usize = 5;
pub const MAX_WINDOW: usize = 20;
pub const MAX_EXCLUDES: usize = 20;
const MAX_ROLE_FILTER_CHARS: usize = 64;
const MAX_TIME_CHARS: usize = 40;
/// Display caps (characters). They bound what is shown, never what is stored.
pub const BOOKEND_CAP: usize = 1200;
pub const WINDOW_CAP: usize = 4000;
pub const READ_CAP: usize = 2000;
const PREVIEW_CAP: usize = 80;
const READ_HEAD: usize = 20;
const READ_TAIL: usize = 10;
const DISCOVER_RADIUS: usize = 5;
const BOOKEND_COUNT: usize = 3;
const SESSION_SEARCH_MAX: usize = 20;
const SUMMARY_PREFIXES: [&str; 2] = ["[CONTEXT COMPACTION", "[CONTEXT SUMMARY]:"];

pub const TIMEOUT_HINT: &str =
    "Narrow the query or time range; an unavailable search does not mean history is absent.";
const ABSENCE_HINT: &str = "Results are verbatim past messages, not current state. A miss does not prove \
    something never happened: try synonyms, OR, ids, a time range or exclude_session_ids, and verify \
    with read or scroll.";
const LEGACY_NOTE: &str = "Legacy snapshot import is complete; no older history is pending.";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    Adaptive,
    Full,
    Index,
}

impl Detail {
    fn as_str(self) -> &'static str {
        match self {
            Detail::Adaptive => "adaptive",
            Detail::Full => "full",
            Detail::Index => "index",
        }
    }
}

/// Validated tool arguments.
#[derive(Debug, Clone)]
pub struct Args {
    pub query: String,
    pub session_id: Option<String>,
    pub around_message_id: Option<i64>,
    pub window: usize,
    pub limit: usize,
    pub sort: Sort,
    pub detail: Detail,
    pub roles: Vec<&'static str>,
    pub after: Option<f64>,
    pub before: Option<f64>,
    pub exclude_session_ids: Vec<String>,
}

const KNOWN_ARGS: [&str; 11] = [
    "query",
    "session_id",
    "around_message_id",
    "window",
    "limit",
    "sort",
    "detail",
    "role_filter",
    "after",
    "before",
    "exclude_session_ids",
];

fn opt_str<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
) -> std::result::Result<Option<&'a str>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(format!("{key} must be a string")),
    }
}

fn opt_int(obj: &Map<String, Value>, key: &str) -> std::result::Result<Option<i64>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .map(Some)
            .ok_or_else(|| format!("{key} must be an integer")),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => s
            .trim()
            .parse::<i64>()
            .map(Some)
            .map_err(|_| format!("{key} must be an integer")),
        Some(_) => Err(format!("{key} must be an integer")),
    }
}

fn ranged(
    obj: &Map<String, Value>,
    key: &str,
    default: usize,
    max: usize,
) -> std::result::Result<usize, String> {
    match opt_int(obj, key)? {
        None => Ok(default),
        Some(v) if v >= 1 && v <= max as i64 => Ok(v as usize),
        Some(_) => Err(format!("{key} must be between 1 and {max}")),
    }
}

/// Validate the arguments before any storage access. Unknown keys are rejected, so no argument
/// can name another user, a path or a database.
pub fn parse_args(v: &Value, now: f64) -> std::result::Result<Args, String> {
    let empty = Map::new();
    let obj = match v {
        Value::Object(o) => o,
        Value::Null => &empty,
        _ => return Err("arguments must be a JSON object".into()),
    };
    if let Some(k) = obj.keys().find(|k| !KNOWN_ARGS.contains(&k.as_str())) {
        return Err(format!("unknown parameter: {k}"));
    }
    let query = opt_str(obj, "query")?.unwrap_or("").to_owned();
    if query.chars().count() > query::MAX_QUERY_CHARS {
        return Err(format!(
            "query must be at most {} characters",
            query::MAX_QUERY_CHARS
        ));
    }
    let session_id = opt_str(obj, "session_id")?
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    if session_id
        .as_ref()
        .is_some_and(|s| s.chars().count() > MAX_SESSION_ID_CHARS)
    {
        return Err(format!(
            "session_id must be at most {MAX_SESSION_ID_CHARS} characters"
        ));
    }
    let around = match opt_int(obj, "around_message_id")? {
        Some(n) if n < 0 => return Err("around_message_id must be >= 0".into()),
        Some(0) | None => None,
        Some(n) => Some(n),
    };
    if around.is_some() && session_id.is_none() {
        return Err("around_message_id requires session_id".into());
    }
    let window = ranged(obj, "window", DEFAULT_WINDOW, MAX_WINDOW)?;
    let limit = ranged(obj, "limit", DEFAULT_LIMIT, MAX_LIMIT)?;
    let sort = match opt_str(obj, "sort")?.map(str::trim).unwrap_or("") {
        "" | "relevance" => Sort::Relevance,
        "newest" => Sort::Newest,
        "oldest" => Sort::Oldest,
        other => return Err(format!("sort must be newest or oldest, not {other:?}")),
    };
    let detail = match opt_str(obj, "detail")?.map(str::trim).unwrap_or("") {
        "" | "adaptive" => Detail::Adaptive,
        "full" => Detail::Full,
        "index" => Detail::Index,
        other => {
            return Err(format!(
                "detail must be adaptive, full or index, not {other:?}"
            ));
        }
    };
    let role_text = opt_str(obj, "role_filter")?.unwrap_or("");
    if role_text.chars().count() > MAX_ROLE_FILTER_CHARS {
        return Err(format!(
            "role_filter must be at most {MAX_ROLE_FILTER_CHARS} characters"
        ));
    }
    let mut roles: Vec<&'static str> = Vec::new();
    for r in role_text
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
    {
        let role = match r.to_ascii_lowercase().as_str() {
            "user" => "user",
            "assistant" => "assistant",
            "tool" => "tool",
            _ => {
                return Err(format!(
                    "role_filter allows only user, assistant and tool, not {r:?}"
                ));
            }
        };
        if !roles.contains(&role) {
            roles.push(role);
        }
    }
    if roles.is_empty() {
        roles = vec!["user", "assistant"];
    }
    let bound = |key: &str| -> std::result::Result<Option<f64>, String> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(Value::String(s)) => {
                let s = s.trim();
                if s.is_empty() {
                    Ok(None)
                } else if s.chars().count() > MAX_TIME_CHARS {
                    Err(format!("{key} must be at most {MAX_TIME_CHARS} characters"))
                } else {
                    query::parse_time_bound(s, now).map(Some).ok_or_else(|| {
                        format!("{key} must be an ISO date/datetime or a relative value like 12h, 3d, 2w")
                    })
                }
            }
            Some(_) => Err(format!("{key} must be a string")),
        }
    };
    let after = bound("after")?;
    let before = bound("before")?;
    if let (Some(a), Some(b)) = (after, before)
        && a >= b
    {
        return Err("after must be earlier than before".into());
    }
    let mut exclude_session_ids: Vec<String> = Vec::new();
    match obj.get("exclude_session_ids") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for it in items {
                let Value::String(s) = it else {
                    return Err("exclude_session_ids must be a list of strings".into());
                };
                if s.chars().count() > MAX_SESSION_ID_CHARS {
                    return Err(format!(
                        "excluded session ids must be at most {MAX_SESSION_ID_CHARS} characters"
                    ));
                }
                let s = s.trim().to_owned();
                if !s.is_empty() && !exclude_session_ids.contains(&s) {
                    exclude_session_ids.push(s);
                }
            }
            if exclude_session_ids.len() > MAX_EXCLUDES {
                return Err(format!(
                    "exclude_session_ids allows at most {MAX_EXCLUDES} items"
                ));
            }
        }
        Some(_) => return Err("exclude_session_ids must be a list of strings".into()),
    }
    Ok(Args {
        query,
        session_id,
        around_message_id: around,
        window,
        limit,
        sort,
        detail,
        roles,
        after,
        before,
        exclude_session_ids,
    })
}

pub fn invalid_arguments(msg: &str) -> Value {
    json!({"success": false, "error": "invalid_arguments", "message": msg})
}

/// One `sessions` row.
#[derive(Debug, Clone)]
pub(crate) struct SessionRow {
    pub id: String,
    pub source: String,
    pub title: String,
    pub model: String,
    pub started_at: f64,
    pub last_active: f64,
    pub parent: String,
    pub end_reason: String,
    pub message_count: i64,
}

impl SessionRow {
    fn hidden(&self) -> bool {
        HIDDEN_SOURCES.contains(&self.source.as_str())
    }
    fn left_context(&self) -> bool {
        LEFT_CONTEXT_REASONS.contains(&self.end_reason.as_str())
    }
    fn to_json(&self) -> Value {
        json!({
            "id": self.id, "source": self.source, "title": self.title, "model": self.model,
            "started_at": self.started_at, "last_active": self.last_active,
            "parent_session_id": self.parent, "end_reason": self.end_reason,
            "message_count": self.message_count,
        })
    }
}

/// Session lookups with a per-call cache (lineage walks revisit the same rows).
pub(crate) struct Sessions<'c> {
    conn: &'c Connection,
    cache: HashMap<String, Option<SessionRow>>,
}

impl<'c> Sessions<'c> {
    pub(crate) fn new(conn: &'c Connection) -> Self {
        Self {
            conn,
            cache: HashMap::new(),
        }
    }

    pub(crate) fn get(&mut self, id: &str) -> Result<Option<SessionRow>> {
        if let Some(r) = self.cache.get(id) {
            return Ok(r.clone());
        }
        let row = self
            .conn
            .prepare(
                "SELECT id, source, title, model, started_at, last_active, parent_session_id, end_reason, message_count
                 FROM sessions WHERE id = ?1",
            )?
            .query_row([id], |r| {
                Ok(SessionRow {
                    id: r.get(0)?,
                    source: r.get(1)?,
                    title: r.get(2)?,
                    model: r.get(3)?,
                    started_at: r.get(4)?,
                    last_active: r.get(5)?,
                    parent: r.get(6)?,
                    end_reason: r.get(7)?,
                    message_count: r.get(8)?,
                })
            })
            .optional()?;
        self.cache.insert(id.to_owned(), row.clone());
        Ok(row)
    }

    /// Lineage root: walk parents (at most 100 hops), stopping at a cycle, a missing parent or
    /// a hidden-source ancestor.
    pub(crate) fn root(&mut self, id: &str) -> Result<String> {
        let mut root = id.to_owned();
        let mut seen = HashSet::new();
        seen.insert(root.clone());
        for _ in 0..100 {
            let Some(row) = self.get(&root)? else { break };
            if row.parent.is_empty() || seen.contains(&row.parent) {
                break;
            }
            match self.get(&row.parent)? {
                Some(p) if !p.hidden() => {
                    seen.insert(p.id.clone());
                    root = p.id;
                }
                _ => break,
            }
        }
        Ok(root)
    }
}

/// The "do not show what is already in context" rule (spec §7.3).
fn visible_history(
    sessions: &mut Sessions<'_>,
    hit_session: &SessionRow,
    active: bool,
    compacted: bool,
    current_root: Option<&str>,
) -> Result<bool> {
    if !active && !compacted {
        return Ok(false);
    }
    let Some(cur) = current_root else {
        return Ok(true);
    };
    if sessions.root(&hit_session.id)? != cur {
        return Ok(true);
    }
    Ok(hit_session.left_context() || (!active && compacted))
}

fn truncate_chars(s: &str, cap: usize) -> &str {
    match s.char_indices().nth(cap) {
        Some((b, _)) => &s[..b],
        None => s,
    }
}

/// Load shaped messages. `cond` is an SQL condition on `messages` with `?1` = session id and
/// further positional parameters in `extra`.
fn load_messages(
    conn: &Connection,
    cond: &str,
    order: &str,
    limit: usize,
    cap: usize,
    p: &[&dyn rusqlite::ToSql],
    anchor: Option<i64>,
) -> Result<Vec<(i64, Value)>> {
    let sql = format!(
        "SELECT id, role, substr(content, 1, {cap1}), length(content), tool_name, tool_calls, tool_call_id,
                timestamp, provenance
         FROM messages WHERE {cond} AND (active = 1 OR compacted = 1) ORDER BY id {order} LIMIT {limit}",
        cap1 = cap + 1
    );
    let mut st = conn.prepare(&sql)?;
    let rows = st
        .query_map(p, |r| {
            let id: i64 = r.get(0)?;
            let content: String = r.get(2)?;
            let len: i64 = r.get(3)?;
            let tool_name: String = r.get(4)?;
            let tool_calls: String = r.get(5)?;
            let tool_call_id: String = r.get(6)?;
            let mut m = Map::new();
            m.insert("id".into(), json!(id));
            m.insert("role".into(), json!(r.get::<_, String>(1)?));
            let shown = truncate_chars(&content, cap);
            m.insert("content".into(), json!(shown));
            m.insert("timestamp".into(), json!(r.get::<_, f64>(7)?));
            if !tool_name.is_empty() {
                m.insert("tool_name".into(), json!(tool_name));
            }
            if !tool_calls.is_empty() {
                let v =
                    serde_json::from_str::<Value>(&tool_calls).unwrap_or(Value::String(tool_calls));
                m.insert("tool_calls".into(), v);
            }
            if !tool_call_id.is_empty() {
                m.insert("tool_call_id".into(), json!(tool_call_id));
            }
            m.insert("provenance".into(), json!(r.get::<_, String>(8)?));
            if anchor == Some(id) {
                m.insert("anchor".into(), json!(true));
            }
            if len as usize > cap {
                m.insert("content_truncated".into(), json!(true));
                m.insert("original_content_chars".into(), json!(len));
            }
            Ok((id, Value::Object(m)))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

fn count_visible(conn: &Connection, sid: &str, cond: &str, anchor: i64) -> Result<i64> {
    let sql = format!(
        "SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND {cond} AND (active = 1 OR compacted = 1)"
    );
    Ok(conn
        .prepare(&sql)?
        .query_row(params![sid, anchor], |r| r.get(0))?)
}

/// An anchored window: up to `radius` visible rows on each side of the anchor.
struct Window {
    messages: Vec<Value>,
    first_id: i64,
    last_id: i64,
    returned_before: usize,
    returned_after: usize,
    total_before: i64,
    total_after: i64,
}

fn window(conn: &Connection, sid: &str, anchor: i64, radius: usize, cap: usize) -> Result<Window> {
    let mut before = load_messages(
        conn,
        "session_id = ?1 AND id < ?2",
        "DESC",
        radius,
        cap,
        &[&sid, &anchor],
        None,
    )?;
    before.reverse();
    let center = load_messages(
        conn,
        "session_id = ?1 AND id = ?2",
        "ASC",
        1,
        cap,
        &[&sid, &anchor],
        Some(anchor),
    )?;
    let after = load_messages(
        conn,
        "session_id = ?1 AND id > ?2",
        "ASC",
        radius,
        cap,
        &[&sid, &anchor],
        None,
    )?;
    let first_id = before.first().or(center.first()).map_or(anchor, |m| m.0);
    let last_id = after.last().or(center.last()).map_or(anchor, |m| m.0);
    let (rb, ra) = (before.len(), after.len());
    let messages = before
        .into_iter()
        .chain(center)
        .chain(after)
        .map(|m| m.1)
        .collect();
    Ok(Window {
        messages,
        first_id,
        last_id,
        returned_before: rb,
        returned_after: ra,
        total_before: count_visible(conn, sid, "id < ?2", anchor)?,
        total_after: count_visible(conn, sid, "id > ?2", anchor)?,
    })
}

fn common(payload: &mut Map<String, Value>, states: [IndexState; 3]) {
    payload.insert(
        "legacy_import".into(),
        json!({"complete": true, "note": LEGACY_NOTE}),
    );
    payload.insert("index_status".into(), json!(IndexStatus::of(states)));
}

fn error(code: &str) -> Value {
    json!({"success": false, "error": code})
}

/// Run the tool against one user's database (inside a read snapshot).
pub(crate) fn run(conn: &Connection, ctx: &SearchContext, args: &Args) -> Result<Value> {
    let states = crate::backfill::states(conn)?;
    let caps = IndexCaps {
        fts: states[0],
        trigram: states[1],
        cjk: states[2],
    };
    let mut sessions = Sessions::new(conn);
    let current_root = match ctx.current_session_id.as_deref().filter(|s| !s.is_empty()) {
        Some(cur) => Some(sessions.root(cur)?),
        None => None,
    };
    let has_query = !args.query.trim().is_empty();
    let mut out = match (&args.session_id, args.around_message_id) {
        (Some(sid), Some(anchor)) => scroll(
            conn,
            &mut sessions,
            current_root.as_deref(),
            sid,
            anchor,
            args.window,
        )?,
        (Some(sid), None) if has_query => search_in_session(conn, &mut sessions, sid, args, caps)?,
        (Some(sid), None) => read(conn, &mut sessions, sid)?,
        (None, _) if has_query => discover(
            conn,
            &mut sessions,
            current_root.as_deref(),
            ctx,
            args,
            caps,
        )?,
        (None, _) => browse(conn, &mut sessions, ctx, args.limit)?,
    };
    if let Value::Object(m) = &mut out
        && m.get("success") == Some(&Value::Bool(true))
    {
        common(m, states);
    }
    Ok(out)
}

fn read(conn: &Connection, sessions: &mut Sessions<'_>, sid: &str) -> Result<Value> {
    let Some(row) = sessions.get(sid)?.filter(|r| !r.hidden()) else {
        return Ok(error("session_not_found"));
    };
    let total: i64 = conn
        .prepare(
            "SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND (active = 1 OR compacted = 1)",
        )?
        .query_row([sid], |r| r.get(0))?;
    let head = load_messages(
        conn,
        "session_id = ?1",
        "ASC",
        READ_HEAD,
        READ_CAP,
        &[&sid],
        None,
    )?;
    let mut tail = load_messages(
        conn,
        "session_id = ?1",
        "DESC",
        READ_TAIL,
        READ_CAP,
        &[&sid],
        None,
    )?;
    tail.reverse();
    let mut seen = HashSet::new();
    let messages: Vec<Value> = head
        .into_iter()
        .chain(tail)
        .filter(|(id, _)| seen.insert(*id))
        .map(|m| m.1)
        .collect();
    let truncated = total as usize > messages.len();
    let mut hint = String::from(
        "Messages are verbatim evidence; each is capped at 2000 characters for display.",
    );
    if truncated {
        hint.push_str(" Only the first 20 and last 10 are shown: scroll with session_id and around_message_id to see the middle.");
    }
    Ok(json!({
        "success": true, "mode": "read", "session_id": sid, "session_meta": row.to_json(),
        "message_count": total, "truncated": truncated, "messages": messages, "hint": hint,
    }))
}

fn scroll(
    conn: &Connection,
    sessions: &mut Sessions<'_>,
    current_root: Option<&str>,
    sid: &str,
    anchor: i64,
    radius: usize,
) -> Result<Value> {
    if sessions.get(sid)?.filter(|r| !r.hidden()).is_none() {
        return Ok(error("session_not_found"));
    }
    let row: Option<(String, bool, bool)> = conn
        .prepare("SELECT session_id, active, compacted FROM messages WHERE id = ?1")?
        .query_row([anchor], |r| {
            Ok((
                r.get(0)?,
                r.get::<_, i64>(1)? != 0,
                r.get::<_, i64>(2)? != 0,
            ))
        })
        .optional()?;
    let Some((owner, active, compacted)) = row else {
        return Ok(error("anchor_not_in_history"));
    };
    let Some(owner_row) = sessions.get(&owner)?.filter(|r| !r.hidden()) else {
        return Ok(error("anchor_not_in_history"));
    };
    if !visible_history(sessions, &owner_row, active, compacted, current_root)? {
        return Ok(error("anchor_not_in_history"));
    }
    if owner.as_str() != sid && sessions.root(&owner)? != sessions.root(sid)? {
        return Ok(error("anchor_not_in_session"));
    }
    let w = window(conn, &owner, anchor, radius, WINDOW_CAP)?;
    let mut out = json!({
        "success": true, "mode": "scroll", "session_id": owner, "around_message_id": anchor,
        "window": radius, "messages": w.messages,
        "messages_before": w.total_before, "messages_after": w.total_after,
        "returned_before": w.returned_before, "returned_after": w.returned_after,
        "hint": "messages_before/messages_after count every visible message before/after the anchor; \
                 to scroll forward pass the last message id, backward the first (the boundary message repeats).",
    });
    if owner.as_str() != sid
        && let Value::Object(m) = &mut out
    {
        m.insert(
            "warning".into(),
            json!(format!("around_message_id {anchor} lives in {owner} (same lineage as {sid}); rebound transparently")),
        );
    }
    Ok(out)
}

fn first_visible_id(conn: &Connection, sid: &str) -> Result<Option<(i64, bool, bool, String)>> {
    Ok(conn
        .prepare(
            "SELECT id, active, compacted, role FROM messages WHERE session_id = ?1 AND (active = 1 OR compacted = 1)
             ORDER BY id LIMIT 1",
        )?
        .query_row([sid], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? != 0, r.get::<_, i64>(2)? != 0, r.get(3)?)))
        .optional()?)
}

/// A discover hit before hydration.
struct Hit {
    session: SessionRow,
    message_id: i64,
    role: String,
    title_match: bool,
}

/// Title probe (spec §7.4): the newest `title #N` continuation first, then the exact title.
fn title_probe(
    conn: &Connection,
    sessions: &mut Sessions<'_>,
    current_root: Option<&str>,
    excluded: &HashSet<String>,
    args: &Args,
) -> Result<Option<Hit>> {
    let t = args
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
        if args.after.is_some_and(|a| row.started_at < a)
            || args.before.is_some_and(|b| row.started_at >= b)
        {
            continue;
        }
        let Some((mid, active, compacted, _role)) = first_visible_id(conn, &id)? else {
            continue;
        };
        if !visible_history(sessions, &row, active, compacted, current_root)? {
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

fn discover(
    conn: &Connection,
    sessions: &mut Sessions<'_>,
    current_root: Option<&str>,
    _ctx: &SearchContext,
    args: &Args,
    caps: IndexCaps,
) -> Result<Value> {
    let mut excluded = HashSet::new();
    for x in &args.exclude_session_ids {
        excluded.insert(sessions.root(x)?);
    }
    let mut hits: Vec<Hit> = Vec::new();
    let mut roots: HashSet<String> = HashSet::new();
    if let Some(h) = title_probe(conn, sessions, current_root, &excluded, args)? {
        roots.insert(sessions.root(&h.session.id)?);
        hits.push(h);
    }
    let filters = Filters {
        roles: args.roles.clone(),
        after: args.after,
        before: args.before,
        session_id: None,
        exclude_hidden: true,
    };
    let set: CandidateSet = search::candidates(
        conn,
        &args.query,
        &filters,
        args.sort,
        search::SCAN_LIMIT,
        caps,
    )?;
    // Cron is demoted, not excluded: a stable sort keeps BM25/recency order within each class.
    let mut rows: Vec<&Candidate> = set.rows.iter().collect();
    rows.sort_by_key(|c| c.source == "cron");
    for c in rows {
        if hits.len() >= args.limit {
            break;
        }
        let Some(row) = sessions.get(&c.session_id)? else {
            continue;
        };
        if row.hidden() || !visible_history(sessions, &row, c.active, c.compacted, current_root)? {
            continue;
        }
        let root = sessions.root(&c.session_id)?;
        if excluded.contains(&root) || !roots.insert(root) {
            continue;
        }
        hits.push(Hit {
            session: row,
            message_id: c.id,
            role: c.role.clone(),
            title_match: false,
        });
    }
    hits.truncate(args.limit);

    let mut results = Vec::with_capacity(hits.len());
    for (i, h) in hits.iter().enumerate() {
        let root_id = sessions.root(&h.session.id)?;
        let meta = sessions.get(&root_id)?.unwrap_or_else(|| h.session.clone());
        let snippet = if h.title_match {
            format!("Session title matched: {}", h.session.title)
        } else {
            search::snippet(conn, &set.matcher, h.message_id)?
        };
        let detail = match args.detail {
            Detail::Index => "index",
            Detail::Full => "full",
            Detail::Adaptive if i == 0 => "full",
            Detail::Adaptive => "compact",
        };
        let mut r = Map::new();
        r.insert("session_id".into(), json!(h.session.id));
        r.insert("when".into(), json!(h.session.started_at));
        r.insert("source".into(), json!(meta.source));
        r.insert("model".into(), json!(meta.model));
        r.insert("title".into(), json!(meta.title));
        r.insert("matched_role".into(), json!(h.role));
        r.insert("match_message_id".into(), json!(h.message_id));
        r.insert("snippet".into(), json!(snippet));
        if detail != "index" {
            let sid = h.session.id.as_str();
            let (bs, msgs, be, w) = if detail == "full" {
                let w = window(conn, sid, h.message_id, DISCOVER_RADIUS, WINDOW_CAP)?;
                let not_summary = SUMMARY_PREFIXES
                    .iter()
                    .map(|p| format!(" AND substr(content, 1, {}) <> '{}'", p.chars().count(), p))
                    .collect::<String>();
                let start = load_messages(
                    conn,
                    &format!("session_id = ?1 AND id < ?2{not_summary}"),
                    "ASC",
                    BOOKEND_COUNT,
                    BOOKEND_CAP,
                    &[&sid, &w.first_id],
                    None,
                )?;
                let mut end = load_messages(
                    conn,
                    &format!("session_id = ?1 AND id > ?2{not_summary}"),
                    "DESC",
                    BOOKEND_COUNT,
                    BOOKEND_CAP,
                    &[&sid, &w.last_id],
                    None,
                )?;
                end.reverse();
                let bs: Vec<Value> = start.into_iter().map(|m| m.1).collect();
                let be: Vec<Value> = end.into_iter().map(|m| m.1).collect();
                (bs, w.messages.clone(), be, Some(w))
            } else {
                let center = load_messages(
                    conn,
                    "session_id = ?1 AND id = ?2",
                    "ASC",
                    1,
                    WINDOW_CAP,
                    &[&sid, &h.message_id],
                    Some(h.message_id),
                )?;
                (
                    Vec::new(),
                    center.into_iter().map(|m| m.1).collect(),
                    Vec::new(),
                    None,
                )
            };
            r.insert("bookend_start".into(), json!(bs));
            r.insert("messages".into(), json!(msgs));
            r.insert("bookend_end".into(), json!(be));
            let (tb, ta, rb, ra) = match &w {
                Some(w) => (
                    w.total_before,
                    w.total_after,
                    w.returned_before,
                    w.returned_after,
                ),
                None => (
                    count_visible(conn, sid, "id < ?2", h.message_id)?,
                    count_visible(conn, sid, "id > ?2", h.message_id)?,
                    0,
                    0,
                ),
            };
            r.insert("messages_before".into(), json!(tb));
            r.insert("messages_after".into(), json!(ta));
            r.insert("returned_before".into(), json!(rb));
            r.insert("returned_after".into(), json!(ra));
        }
        r.insert("detail".into(), json!(detail));
        if root_id != h.session.id {
            r.insert("parent_session_id".into(), json!(root_id));
        }
        results.push(Value::Object(r));
    }
    let count = results.len();
    let mut out = json!({
        "success": true, "mode": "discover", "query": args.query, "detail": args.detail.as_str(),
        "results": results, "count": count, "search_path": set.path,
        "candidate_limit": search::SCAN_LIMIT,
        "candidate_limit_reached": set.scanned >= search::SCAN_LIMIT,
        "hint": ABSENCE_HINT,
    });
    if let Value::Object(m) = &mut out {
        if count == 0 {
            m.insert("message".into(), json!("No matching sessions found."));
        }
        insert_gap(m, &set);
    }
    Ok(out)
}

/// While the route's index is still building, say which ids were scanned without it.
fn insert_gap(m: &mut Map<String, Value>, set: &CandidateSet) {
    if let Some(gap) = &set.gap {
        m.insert("gap_scan".into(), json!(gap));
    }
}

/// `session_id` + `query`: search inside one session, compacted rows included (spec §15.6).
fn search_in_session(
    conn: &Connection,
    sessions: &mut Sessions<'_>,
    sid: &str,
    args: &Args,
    caps: IndexCaps,
) -> Result<Value> {
    if sessions.get(sid)?.filter(|r| !r.hidden()).is_none() {
        return Ok(error("session_not_found"));
    }
    let filters = Filters {
        roles: args.roles.clone(),
        after: None,
        before: None,
        session_id: Some(sid.to_owned()),
        exclude_hidden: true,
    };
    let set = search::candidates(
        conn,
        &args.query,
        &filters,
        args.sort,
        SESSION_SEARCH_MAX,
        caps,
    )?;
    let mut results = Vec::with_capacity(set.rows.len());
    for c in &set.rows {
        results.push(json!({
            "match_message_id": c.id, "role": c.role, "timestamp": c.timestamp,
            "active": c.active, "compacted": c.compacted,
            "snippet": search::snippet(conn, &set.matcher, c.id)?,
        }));
    }
    let count = results.len();
    let mut out = json!({
        "success": true, "mode": "session_search", "session_id": sid, "query": args.query,
        "results": results, "count": count, "search_path": set.path,
        "hint": "Matches inside this session, including messages compacted out of the live context. \
                 Scroll with session_id and around_message_id=match_message_id to read around a match.",
    });
    if let Value::Object(m) = &mut out {
        insert_gap(m, &set);
    }
    Ok(out)
}

fn browse(
    conn: &Connection,
    _sessions: &mut Sessions<'_>,
    ctx: &SearchContext,
    limit: usize,
) -> Result<Value> {
    let hidden = HIDDEN_SOURCES.map(|h| format!("'{h}'")).join(",");
    let current = ctx.current_session_id.clone().unwrap_or_default();
    let rows: Vec<SessionRow> = conn
        .prepare(&format!(
            "SELECT id, source, title, model, started_at, last_active, parent_session_id, end_reason, message_count
             FROM sessions WHERE source NOT IN ({hidden}) AND id <> ?1 ORDER BY last_active DESC LIMIT ?2"
        ))?
        .query_map(params![current, limit as i64], |r| {
            Ok(SessionRow {
                id: r.get(0)?,
                source: r.get(1)?,
                title: r.get(2)?,
                model: r.get(3)?,
                started_at: r.get(4)?,
                last_active: r.get(5)?,
                parent: r.get(6)?,
                end_reason: r.get(7)?,
                message_count: r.get(8)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    // Two index-ordered probes instead of one sort over the whole session.
    let mut user_st = conn.prepare(
        "SELECT substr(content, 1, 400) FROM messages WHERE session_id = ?1 AND role = 'user'
         AND (active = 1 OR compacted = 1) ORDER BY id LIMIT 1",
    )?;
    let mut any_st = conn.prepare(
        "SELECT substr(content, 1, 400) FROM messages WHERE session_id = ?1
         AND (active = 1 OR compacted = 1) ORDER BY id LIMIT 1",
    )?;
    let mut results = Vec::with_capacity(rows.len());
    for s in rows {
        let raw: String = match user_st.query_row([&s.id], |r| r.get(0)).optional()? {
            Some(t) => t,
            None => any_st
                .query_row([&s.id], |r| r.get(0))
                .optional()?
                .unwrap_or_default(),
        };
        let collapsed = raw.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut preview = truncate_chars(&collapsed, PREVIEW_CAP).to_owned();
        if preview.len() < collapsed.len() {
            preview.push_str("...");
        }
        results.push(json!({
            "session_id": s.id, "title": s.title, "source": s.source, "started_at": s.started_at,
            "last_active": s.last_active, "message_count": s.message_count, "preview": preview,
        }));
    }
    let count = results.len();
    Ok(json!({
        "success": true, "mode": "browse", "results": results, "count": count,
        "message": "Recent sessions. Search with query, or read one with session_id.",
    }))
}
