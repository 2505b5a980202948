//! Read a session (its head and tail) and scroll around one of its messages.

use super::messages::{Anchored, load, window};
use super::sessions::Sessions;
use super::{
    Miss, READ_CAP, READ_HEAD, READ_TAIL, ReadResult, ScrollResult, SearchOutcome, WINDOW_CAP,
};
use crate::error::Result;
use rusqlite::{Connection, OptionalExtension};
use std::collections::HashSet;

pub(crate) fn read(
    conn: &Connection,
    sessions: &mut Sessions<'_>,
    sid: &str,
) -> Result<SearchOutcome> {
    let Some(row) = sessions.get(sid)?.filter(|r| !r.hidden()) else {
        return Ok(SearchOutcome::Miss(Miss::SessionNotFound));
    };
    let total: i64 = conn
        .prepare(
            "SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND (active = 1 OR compacted = 1)",
        )?
        .query_row([sid], |r| r.get(0))?;
    let head = load(
        conn,
        "session_id = ?1",
        "ASC",
        READ_HEAD,
        READ_CAP,
        &[&sid],
        None,
    )?;
    let mut tail = load(
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
    let messages: Vec<_> = head
        .into_iter()
        .chain(tail)
        .filter(|m| seen.insert(m.id))
        .collect();
    let truncated = total as usize > messages.len();
    Ok(SearchOutcome::Read(ReadResult {
        session: row,
        message_count: total,
        truncated,
        messages,
    }))
}

pub(crate) fn scroll(
    conn: &Connection,
    sessions: &mut Sessions<'_>,
    current_root: Option<&str>,
    sid: &str,
    anchor: i64,
    radius: usize,
) -> Result<SearchOutcome> {
    let miss = |m| Ok(SearchOutcome::Miss(m));
    if sessions.get(sid)?.filter(|r| !r.hidden()).is_none() {
        return miss(Miss::SessionNotFound);
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
        return miss(Miss::AnchorNotInHistory);
    };
    let Some(owner_row) = sessions.get(&owner)?.filter(|r| !r.hidden()) else {
        return miss(Miss::AnchorNotInHistory);
    };
    if !sessions.visible(&owner_row, active, compacted, current_root)? {
        return miss(Miss::AnchorNotInHistory);
    }
    if owner.as_str() != sid && sessions.root(&owner)? != sessions.root(sid)? {
        return miss(Miss::AnchorNotInSession);
    }
    let Anchored { window, .. } = window(conn, &owner, anchor, radius, WINDOW_CAP)?;
    Ok(SearchOutcome::Scroll(ScrollResult {
        session_id: owner,
        requested_session_id: sid.to_owned(),
        around_message_id: anchor,
        window_radius: radius,
        window,
    }))
}
