//! The write operations: validation, redaction-prepared messages, append with tombstones,
//! compaction flags, end reasons, delete, and retention.

use super::*;

/// Append batch limits (spec §6.1).
pub const MAX_BATCH: usize = 100;
pub const MAX_SESSION_ID_CHARS: usize = 255;
/// Retention deletes sessions in batches so no single transaction holds the lock for long.
pub(crate) const CLEANUP_BATCH: usize = 200;

pub fn now_epoch() -> f64 {
    chrono::Utc::now().timestamp_micros() as f64 / 1e6
}

pub(crate) fn to_epoch(ts: &chrono::DateTime<chrono::Utc>) -> f64 {
    ts.timestamp_micros() as f64 / 1e6
}

/// The roles evidence may have (spec §6.1): user, assistant and tool.
pub(crate) fn evidence_role(role: &str) -> Option<Role> {
    [Role::User, Role::Assistant, Role::Tool]
        .into_iter()
        .find(|r| r.as_str() == role)
}

/// Validation that happens before any storage access (spec §6.1).
pub(crate) fn validate_append(session: &SessionMeta, msgs: &[CapturedMessage]) -> Result<()> {
    if msgs.len() > MAX_BATCH {
        return Err(HistoryError::InvalidInput(format!(
            "batch of {} messages exceeds the limit of {MAX_BATCH}",
            msgs.len()
        )));
    }
    validate_session_id(&session.session_id)?;
    if let Some(p) = &session.parent_session_id
        && p.chars().count() > MAX_SESSION_ID_CHARS
    {
        return Err(HistoryError::InvalidInput(
            "parent_session_id is too long".into(),
        ));
    }
    for (i, m) in msgs.iter().enumerate() {
        if m.message_uid.trim().is_empty() || m.message_uid.chars().count() > MAX_SESSION_ID_CHARS {
            return Err(HistoryError::InvalidInput(format!(
                "message {i}: message_uid must be 1..={MAX_SESSION_ID_CHARS} characters"
            )));
        }
        if !matches!(m.role, Role::User | Role::Assistant | Role::Tool) {
            return Err(HistoryError::InvalidInput(format!(
                "message {i}: role {} is not user, assistant or tool",
                m.role.as_str()
            )));
        }
    }
    Ok(())
}

pub(crate) fn validate_session_id(id: &str) -> Result<()> {
    if id.trim().is_empty() || id.chars().count() > MAX_SESSION_ID_CHARS {
        return Err(HistoryError::InvalidInput(format!(
            "session id must be 1..={MAX_SESSION_ID_CHARS} characters"
        )));
    }
    Ok(())
}

/// A message after redaction, ready to insert.
pub(crate) struct PreparedMessage {
    uid: String,
    role: &'static str,
    content: String,
    tool_name: String,
    tool_call_id: String,
    tool_calls: String,
    ts: Option<f64>,
    provenance: Provenance,
}

/// Redaction runs outside the write lock: it is the only CPU-heavy part of an append.
pub(crate) fn prepare(msgs: Vec<CapturedMessage>) -> Vec<PreparedMessage> {
    msgs.into_iter()
        .map(|m| {
            let tool_calls = match &m.tool_calls {
                None | Some(serde_json::Value::Null) => String::new(),
                Some(v) => mpa_redact::redact(&v.to_string()).into_owned(),
            };
            let content = match mpa_redact::redact(&m.content) {
                std::borrow::Cow::Borrowed(_) => m.content,
                std::borrow::Cow::Owned(s) => s,
            };
            PreparedMessage {
                uid: m.message_uid,
                role: m.role.as_str(),
                content,
                tool_name: m.tool_name.unwrap_or_default(),
                tool_call_id: m.tool_call_id.unwrap_or_default(),
                tool_calls,
                ts: m.ts.as_ref().map(to_epoch),
                provenance: m.provenance,
            }
        })
        .collect()
}

pub(crate) fn append(
    conn: &Connection,
    session: &SessionMeta,
    msgs: &[PreparedMessage],
) -> Result<AppendReport> {
    let sid = session.session_id.as_str();
    let tombstoned: bool = conn
        .prepare("SELECT 1 FROM deleted_sessions WHERE id = ?1")?
        .exists([sid])?;
    if tombstoned {
        return Ok(AppendReport {
            inserted: 0,
            duplicates: 0,
            tombstoned: true,
        });
    }
    let now = now_epoch();
    let existing_last: Option<f64> = conn
        .prepare("SELECT last_active FROM sessions WHERE id = ?1")?
        .query_row([sid], |r| r.get(0))
        .optional()?;
    let min_ts = msgs
        .iter()
        .filter_map(|m| m.ts)
        .fold(None, |a: Option<f64>, t| Some(a.map_or(t, |a| a.min(t))));
    let max_ts = msgs
        .iter()
        .filter_map(|m| m.ts)
        .fold(None, |a: Option<f64>, t| Some(a.map_or(t, |a| a.max(t))));
    let started = session
        .started_at
        .as_ref()
        .map(to_epoch)
        .or(min_ts)
        .unwrap_or(now);
    let source = if session.source.trim().is_empty() {
        "chat"
    } else {
        session.source.trim()
    };
    let title = session
        .title
        .as_deref()
        .map(|t| mpa_redact::redact(t).into_owned())
        .unwrap_or_default();
    conn.prepare(
        "INSERT INTO sessions (id, source, title, model, started_at, last_active, parent_session_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)
         ON CONFLICT(id) DO UPDATE SET
           title = CASE WHEN excluded.title <> '' THEN excluded.title ELSE title END,
           model = CASE WHEN excluded.model <> '' THEN excluded.model ELSE model END,
           parent_session_id = CASE WHEN parent_session_id = '' THEN excluded.parent_session_id
                                    ELSE parent_session_id END",
    )?
    .execute(params![
        sid,
        source,
        title,
        session.model.as_deref().unwrap_or(""),
        started,
        session.parent_session_id.as_deref().unwrap_or("")
    ])?;
    // Legacy rows without a timestamp must never look as if they happened at import time.
    let legacy_ts = existing_last.or(max_ts).unwrap_or(started);
    let mut ins = conn.prepare(
        "INSERT INTO messages (session_id, message_uid, role, content, tool_call_id, tool_name,
           tool_calls, timestamp, provenance)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT(session_id, message_uid) DO NOTHING",
    )?;
    let mut inserted = 0;
    for m in msgs {
        let ts = m.ts.unwrap_or(match m.provenance {
            Provenance::Observed => now,
            Provenance::LegacySnapshot => legacy_ts,
        });
        inserted += ins.execute(params![
            sid,
            m.uid,
            m.role,
            m.content,
            m.tool_call_id,
            m.tool_name,
            m.tool_calls,
            ts,
            m.provenance.as_str()
        ])?;
    }
    Ok(AppendReport {
        inserted,
        duplicates: msgs.len() - inserted,
        tombstoned: false,
    })
}

/// Mark rows compacted (`active=0, compacted=1`). Only currently active rows change: the
/// carried tail is never re-marked and rewound rows stay rewound (Hermes #86366).
pub(crate) fn set_flags(
    conn: &Connection,
    sid: &str,
    uids: &[String],
    compacted: bool,
) -> Result<usize> {
    let mut st = conn.prepare(
        "UPDATE messages SET active = 0, compacted = ?3 WHERE session_id = ?1 AND message_uid = ?2 AND active = 1",
    )?;
    let mut n = 0;
    for uid in uids {
        n += st.execute(params![sid, uid, compacted as i64])?;
    }
    Ok(n)
}

/// Record an end reason. The first reason wins, except that a reason meaning "left live
/// context" may replace one that does not, so late compression/reset reasons still count.
pub(crate) fn end_session(conn: &Connection, sid: &str, reason: &str) -> Result<()> {
    let left = LEFT_CONTEXT_REASONS.contains(&reason);
    let list = LEFT_CONTEXT_REASONS.map(|r| format!("'{r}'")).join(",");
    let sql = format!(
        "UPDATE sessions SET end_reason = ?2 WHERE id = ?1 AND (end_reason = '' OR (?3 AND end_reason NOT IN ({list})))"
    );
    conn.execute(&sql, params![sid, reason, left])?;
    Ok(())
}

/// Tombstone, then messages (their FTS rows go through the triggers while the session row still
/// exists for the joined views), then the session — one transaction.
pub(crate) fn delete_session(conn: &Connection, sid: &str) -> Result<DeleteReport> {
    conn.execute(
        "INSERT OR IGNORE INTO deleted_sessions (id, deleted_at) VALUES (?1, ?2)",
        params![sid, now_epoch()],
    )?;
    let messages_deleted = conn.execute("DELETE FROM messages WHERE session_id = ?1", [sid])?;
    let existed = conn.execute("DELETE FROM sessions WHERE id = ?1", [sid])? > 0;
    Ok(DeleteReport {
        session_id: sid.to_owned(),
        session_existed: existed,
        messages_deleted,
    })
}

/// Expire up to one batch of sessions whose own `last_active` is before `cutoff`.
pub(crate) fn expire_batch(conn: &Connection, cutoff: f64) -> Result<(usize, usize)> {
    let ids: Vec<String> = conn
        .prepare("SELECT id FROM sessions WHERE last_active < ?1 ORDER BY last_active LIMIT ?2")?
        .query_map(params![cutoff, CLEANUP_BATCH as i64], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut msgs = 0;
    for id in &ids {
        msgs += delete_session(conn, id)?.messages_deleted;
    }
    Ok((ids.len(), msgs))
}

pub(crate) fn cleanup(store: &UserStore, older_than_days: u32) -> Result<CleanupReport> {
    if older_than_days == 0 {
        return Ok(CleanupReport {
            enabled: false,
            cutoff: None,
            sessions_expired: 0,
            messages_deleted: 0,
            tombstones_removed: 0,
        });
    }
    let cutoff = now_epoch() - f64::from(older_than_days) * 86400.0;
    let mut report = CleanupReport {
        enabled: true,
        cutoff: Some(cutoff),
        sessions_expired: 0,
        messages_deleted: 0,
        tombstones_removed: 0,
    };
    loop {
        let (s, m) = store.write(|c| expire_batch(c, cutoff))?;
        report.sessions_expired += s;
        report.messages_deleted += m;
        if s < CLEANUP_BATCH {
            break;
        }
    }
    report.tombstones_removed = store.write(|c| {
        // Ranking statistics of segments nothing is left in go with them.
        crate::rank::stats::drop_empty(c)?;
        Ok(c.execute(
            "DELETE FROM deleted_sessions WHERE deleted_at < ?1",
            [cutoff],
        )?)
    })?;
    Ok(report)
}
