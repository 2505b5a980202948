//! Loading visible messages cut at a display cap, counting them, and anchored windows.

use super::{MessageWindow, ShownMessage};
use crate::error::Result;
use rusqlite::{Connection, params};

pub(crate) fn truncate_chars(s: &str, cap: usize) -> &str {
    match s.char_indices().nth(cap) {
        Some((b, _)) => &s[..b],
        None => s,
    }
}

/// Load visible messages (`active = 1 OR compacted = 1`). `cond` is an SQL condition on
/// `messages` with `?1` = session id and further positional parameters in `p`.
pub(crate) fn load(
    conn: &Connection,
    cond: &str,
    order: &str,
    limit: usize,
    cap: usize,
    p: &[&dyn rusqlite::ToSql],
    anchor: Option<i64>,
) -> Result<Vec<ShownMessage>> {
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
            Ok(ShownMessage {
                id,
                role: r.get(1)?,
                content: truncate_chars(&content, cap).to_owned(),
                timestamp: r.get(7)?,
                tool_name: Some(tool_name).filter(|t| !t.is_empty()),
                tool_calls: Some(tool_calls).filter(|t| !t.is_empty()).map(|t| {
                    serde_json::from_str::<serde_json::Value>(&t)
                        .unwrap_or(serde_json::Value::String(t))
                }),
                tool_call_id: Some(tool_call_id).filter(|t| !t.is_empty()),
                provenance: r.get(8)?,
                anchor: anchor == Some(id),
                original_chars: (len as usize > cap).then_some(len),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

pub(crate) fn count_visible(conn: &Connection, sid: &str, cond: &str, anchor: i64) -> Result<i64> {
    let sql = format!(
        "SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND {cond} AND (active = 1 OR compacted = 1)"
    );
    Ok(conn
        .prepare(&sql)?
        .query_row(params![sid, anchor], |r| r.get(0))?)
}

/// An anchored window and the ids at its edges (where bookends start).
pub(crate) struct Anchored {
    pub(crate) window: MessageWindow,
    pub(crate) first_id: i64,
    pub(crate) last_id: i64,
}

/// Up to `radius` visible rows on each side of the anchor.
pub(crate) fn window(
    conn: &Connection,
    sid: &str,
    anchor: i64,
    radius: usize,
    cap: usize,
) -> Result<Anchored> {
    let mut before = load(
        conn,
        "session_id = ?1 AND id < ?2",
        "DESC",
        radius,
        cap,
        &[&sid, &anchor],
        None,
    )?;
    before.reverse();
    let center = load(
        conn,
        "session_id = ?1 AND id = ?2",
        "ASC",
        1,
        cap,
        &[&sid, &anchor],
        Some(anchor),
    )?;
    let after = load(
        conn,
        "session_id = ?1 AND id > ?2",
        "ASC",
        radius,
        cap,
        &[&sid, &anchor],
        None,
    )?;
    let first_id = before.first().or(center.first()).map_or(anchor, |m| m.id);
    let last_id = after.last().or(center.last()).map_or(anchor, |m| m.id);
    let (rb, ra) = (before.len(), after.len());
    let messages = before.into_iter().chain(center).chain(after).collect();
    Ok(Anchored {
        window: MessageWindow {
            messages,
            returned_before: rb,
            returned_after: ra,
            total_before: count_visible(conn, sid, "id < ?2", anchor)?,
            total_after: count_visible(conn, sid, "id > ?2", anchor)?,
        },
        first_id,
        last_id,
    })
}
