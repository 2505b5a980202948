//! Recently active sessions with the start of their first message.

use super::sessions::{SESSION_COLS, session_row};
use super::{BROWSE_TEXT_CHARS, BrowseEntry, SessionInfo};
use crate::error::Result;
use crate::store::HIDDEN_SOURCES;
use rusqlite::{Connection, OptionalExtension, params};

pub(crate) fn browse(conn: &Connection, current: &str, limit: usize) -> Result<Vec<BrowseEntry>> {
    let hidden = HIDDEN_SOURCES.map(|h| format!("'{h}'")).join(",");
    let rows: Vec<SessionInfo> = conn
        .prepare(&format!(
            "SELECT {SESSION_COLS}
             FROM sessions WHERE source NOT IN ({hidden}) AND id <> ?1 ORDER BY last_active DESC LIMIT ?2"
        ))?
        .query_map(params![current, limit as i64], session_row)?
        .collect::<rusqlite::Result<_>>()?;
    // Two index-ordered probes instead of one sort over the whole session.
    let mut user_st = conn.prepare(&format!(
        "SELECT substr(content, 1, {BROWSE_TEXT_CHARS}) FROM messages WHERE session_id = ?1 AND role = 'user'
         AND (active = 1 OR compacted = 1) ORDER BY id LIMIT 1"
    ))?;
    let mut any_st = conn.prepare(&format!(
        "SELECT substr(content, 1, {BROWSE_TEXT_CHARS}) FROM messages WHERE session_id = ?1
         AND (active = 1 OR compacted = 1) ORDER BY id LIMIT 1"
    ))?;
    let mut out = Vec::with_capacity(rows.len());
    for s in rows {
        let first_text: String = match user_st.query_row([&s.id], |r| r.get(0)).optional()? {
            Some(t) => t,
            None => any_st
                .query_row([&s.id], |r| r.get(0))
                .optional()?
                .unwrap_or_default(),
        };
        out.push(BrowseEntry {
            session_id: s.id,
            title: s.title,
            source: s.source,
            started_at: s.started_at,
            last_active: s.last_active,
            message_count: s.message_count,
            first_text,
        });
    }
    Ok(out)
}
