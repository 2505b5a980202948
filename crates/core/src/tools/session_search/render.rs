//! The JSON the model sees (spec §10.8), built once from the typed recall result.

use mpa_history::recall::{
    BrowseEntry, DiscoverHit, DiscoverResult, InSessionResult, MessageWindow, ReadResult,
    ScrollResult, SearchOutcome, SessionInfo, ShownMessage, Snippet,
};
use mpa_history::{FailureClass, HistoryError, SearchResponse};
use serde_json::{Map, Value, json};

const PREVIEW_CAP: usize = 80;

pub(crate) const TIMEOUT_HINT: &str =
    "Narrow the query or time range; an unavailable search does not mean history is absent.";
/// Fixed words: the error itself may name the data directory.
const STORAGE_MESSAGE: &str = "this user's history file is damaged or unreadable";
const STORAGE_HINT: &str = "This user's history file cannot be read; nothing was searched and \
    this does not mean history is absent. Tell the user; the host operator has to restore the \
    file from a backup.";
const TOO_COMPLEX_HINT: &str = "Use a few specific terms (quote exact phrases, OR only a few \
    alternatives) and search again.";
const ABSENCE_HINT: &str = "Results are verbatim past messages, not current state. A miss does not prove \
    something never happened: try synonyms, OR, ids, a time range or exclude_session_ids, and verify \
    with read or scroll.";
const LEGACY_NOTE: &str = "Legacy snapshot import is complete; no older history is pending.";
/// Shown with `legacy_import{complete:false}` while an import is unfinished.
pub const LEGACY_INCOMPLETE_NOTE: &str = "A legacy history import is unfinished: misses are \
inconclusive while incomplete. Only surviving legacy records can be imported; messages \
discarded earlier are unavailable.";

/// A successful response's JSON (`success: true`), or `{success:false, error}` for a miss.
pub(crate) fn response(r: &SearchResponse) -> Value {
    let mut out = match &r.outcome {
        SearchOutcome::Discover(d) => discover(d),
        SearchOutcome::InSession(s) => in_session(s),
        SearchOutcome::Read(s) => read(s),
        SearchOutcome::Scroll(s) => scroll(s),
        SearchOutcome::Browse(b) => browse(b),
        SearchOutcome::Miss(m) => return json!({"success": false, "error": m.code()}),
    };
    if let Value::Object(m) = &mut out {
        let legacy = if r.legacy_import_pending {
            json!({"complete": false, "note": LEGACY_INCOMPLETE_NOTE})
        } else {
            json!({"complete": true, "note": LEGACY_NOTE})
        };
        m.insert("legacy_import".into(), legacy);
        m.insert("index_status".into(), json!(r.index_status));
    }
    out
}

/// The failure JSON of a read that could not run.
pub(crate) fn failure(e: &HistoryError) -> Value {
    match e.classify() {
        FailureClass::Timeout => json!({
            "success": false, "error": "query_timeout", "complete": false, "hint": TIMEOUT_HINT,
        }),
        FailureClass::Unavailable => json!({
            "success": false, "error": "query_unavailable", "complete": false, "hint": TIMEOUT_HINT,
        }),
        FailureClass::Storage => json!({
            "success": false, "error": "storage_unavailable", "complete": false,
            "message": STORAGE_MESSAGE, "hint": STORAGE_HINT,
        }),
        FailureClass::TooComplex => json!({
            "success": false, "error": "query_too_complex", "complete": false,
            "message": e.to_string(), "hint": TOO_COMPLEX_HINT,
        }),
    }
}

pub(crate) fn invalid_arguments(msg: &str) -> Value {
    json!({"success": false, "error": "invalid_arguments", "message": msg})
}

fn message(m: &ShownMessage) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(m.id));
    o.insert("role".into(), json!(m.role));
    o.insert("content".into(), json!(m.content));
    o.insert("timestamp".into(), json!(m.timestamp));
    if let Some(t) = &m.tool_name {
        o.insert("tool_name".into(), json!(t));
    }
    if let Some(t) = &m.tool_calls {
        o.insert("tool_calls".into(), t.clone());
    }
    if let Some(t) = &m.tool_call_id {
        o.insert("tool_call_id".into(), json!(t));
    }
    o.insert("provenance".into(), json!(m.provenance));
    if m.anchor {
        o.insert("anchor".into(), json!(true));
    }
    if let Some(n) = m.original_chars {
        o.insert("content_truncated".into(), json!(true));
        o.insert("original_content_chars".into(), json!(n));
    }
    Value::Object(o)
}

fn messages(ms: &[ShownMessage]) -> Vec<Value> {
    ms.iter().map(message).collect()
}

fn session_meta(s: &SessionInfo) -> Value {
    json!({
        "id": s.id, "source": s.source, "title": s.title, "model": s.model,
        "started_at": s.started_at, "last_active": s.last_active,
        "parent_session_id": s.parent_session_id, "end_reason": s.end_reason,
        "message_count": s.message_count,
    })
}

fn hit(h: &DiscoverHit) -> Value {
    let mut r = Map::new();
    r.insert("session_id".into(), json!(h.session_id));
    r.insert("when".into(), json!(h.started_at));
    r.insert("source".into(), json!(h.source));
    r.insert("model".into(), json!(h.model));
    r.insert("title".into(), json!(h.title));
    r.insert("matched_role".into(), json!(h.matched_role));
    r.insert("match_message_id".into(), json!(h.match_message_id));
    let snippet = match &h.snippet {
        Snippet::Title(t) => format!("Session title matched: {t}"),
        Snippet::Text(t) => t.clone(),
    };
    r.insert("snippet".into(), json!(snippet));
    if let Some(c) = &h.context {
        r.insert("bookend_start".into(), json!(messages(&c.bookend_start)));
        r.insert("messages".into(), json!(messages(&c.messages)));
        r.insert("bookend_end".into(), json!(messages(&c.bookend_end)));
        r.insert("messages_before".into(), json!(c.messages_before));
        r.insert("messages_after".into(), json!(c.messages_after));
        r.insert("returned_before".into(), json!(c.returned_before));
        r.insert("returned_after".into(), json!(c.returned_after));
    }
    r.insert("detail".into(), json!(h.detail.as_str()));
    if let Some(root) = &h.lineage_root {
        r.insert("parent_session_id".into(), json!(root));
    }
    Value::Object(r)
}

fn insert_gap(m: &mut Map<String, Value>, gap: Option<&mpa_history::recall::GapScan>) {
    if let Some(gap) = gap {
        m.insert("gap_scan".into(), json!(gap));
    }
}

fn discover(d: &DiscoverResult) -> Value {
    let results: Vec<Value> = d.hits.iter().map(hit).collect();
    let count = results.len();
    let mut out = json!({
        "success": true, "mode": "discover", "query": d.query, "detail": d.detail.as_str(),
        "results": results, "count": count, "search_path": d.search_path,
        "candidate_limit": d.candidate_limit,
        "candidate_limit_reached": d.candidate_limit_reached,
        "hint": ABSENCE_HINT,
    });
    if let Value::Object(m) = &mut out {
        if count == 0 {
            m.insert("message".into(), json!("No matching sessions found."));
        }
        insert_gap(m, d.gap_scan.as_ref());
    }
    out
}

fn in_session(s: &InSessionResult) -> Value {
    let results: Vec<Value> = s
        .matches
        .iter()
        .map(|c| {
            json!({
                "match_message_id": c.message_id, "role": c.role, "timestamp": c.timestamp,
                "active": c.active, "compacted": c.compacted, "snippet": c.snippet,
            })
        })
        .collect();
    let count = results.len();
    let mut out = json!({
        "success": true, "mode": "session_search", "session_id": s.session_id, "query": s.query,
        "results": results, "count": count, "search_path": s.search_path,
        "hint": "Matches inside this session, including messages compacted out of the live context. \
                 Scroll with session_id and around_message_id=match_message_id to read around a match.",
    });
    if let Value::Object(m) = &mut out {
        insert_gap(m, s.gap_scan.as_ref());
    }
    out
}

fn read(r: &ReadResult) -> Value {
    let mut hint = format!(
        "Messages are verbatim evidence; each is capped at {} characters for display.",
        mpa_history::recall::READ_CAP
    );
    if r.truncated {
        hint.push_str(&format!(
            " Only the first {} and last {} are shown: scroll with session_id and around_message_id to see the middle.",
            mpa_history::recall::READ_HEAD,
            mpa_history::recall::READ_TAIL
        ));
    }
    json!({
        "success": true, "mode": "read", "session_id": r.session.id,
        "session_meta": session_meta(&r.session),
        "message_count": r.message_count, "truncated": r.truncated,
        "messages": messages(&r.messages), "hint": hint,
    })
}

fn scroll(s: &ScrollResult) -> Value {
    let w: &MessageWindow = &s.window;
    let mut out = json!({
        "success": true, "mode": "scroll", "session_id": s.session_id,
        "around_message_id": s.around_message_id, "window": s.window_radius,
        "messages": messages(&w.messages),
        "messages_before": w.total_before, "messages_after": w.total_after,
        "returned_before": w.returned_before, "returned_after": w.returned_after,
        "hint": "messages_before/messages_after count every visible message before/after the anchor; \
                 to scroll forward pass the last message id, backward the first (the boundary message repeats).",
    });
    if s.session_id != s.requested_session_id
        && let Value::Object(m) = &mut out
    {
        m.insert(
            "warning".into(),
            json!(format!(
                "around_message_id {} lives in {} (same lineage as {}); rebound transparently",
                s.around_message_id, s.session_id, s.requested_session_id
            )),
        );
    }
    out
}

fn truncate_chars(s: &str, cap: usize) -> &str {
    match s.char_indices().nth(cap) {
        Some((b, _)) => &s[..b],
        None => s,
    }
}

fn browse(entries: &[BrowseEntry]) -> Value {
    let results: Vec<Value> = entries
        .iter()
        .map(|s| {
            let collapsed = s
                .first_text
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let mut preview = truncate_chars(&collapsed, PREVIEW_CAP).to_owned();
            if preview.len() < collapsed.len() {
                preview.push_str("...");
            }
            json!({
                "session_id": s.session_id, "title": s.title, "source": s.source,
                "started_at": s.started_at, "last_active": s.last_active,
                "message_count": s.message_count, "preview": preview,
            })
        })
        .collect();
    let count = results.len();
    json!({
        "success": true, "mode": "browse", "results": results, "count": count,
        "message": "Recent sessions. Search with query, or read one with session_id.",
    })
}
