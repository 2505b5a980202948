//! JSONL import (DESIGN.md §5): one message per line with `session_id`, `message_id`, `role`,
//! `content`, `ts` (RFC 3339) and optional `source`, `parent_session_id`, `title`, `tool_name`,
//! `tool_call_id`, `tool_calls`, `user`, `provenance`. Lines are grouped into per-session batches
//! of at most 100 and appended through [`History::append`], so every batch is one transaction
//! and a re-run is idempotent (first copy wins): a killed import loses nothing and duplicates
//! nothing when run again.

use crate::error::Result;
use crate::{CapturedMessage, History, Provenance, SessionMeta};
use mpa_redact::UserKey;
use serde::Deserialize;
use std::io::BufRead;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    session_id: String,
    message_id: String,
    role: String,
    #[serde(default)]
    content: String,
    #[serde(default)]
    ts: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    parent_session_id: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    tool_calls: Option<serde_json::Value>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    provenance: Option<Provenance>,
}

/// One parsed line.
#[derive(Debug, Clone)]
pub struct ImportLine {
    pub session: SessionMeta,
    pub message: CapturedMessage,
}

/// Parse one JSONL line. `owner` is the `--user` name; a `user` field must equal it.
pub fn parse_line(text: &str, owner: &str) -> std::result::Result<ImportLine, String> {
    let l: Line = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    if let Some(u) = &l.user
        && u != owner
    {
        return Err(format!("line belongs to user {u:?}, not {owner:?}"));
    }
    let role = crate::store::evidence_role(&l.role)
        .ok_or_else(|| format!("role must be user, assistant or tool, not {:?}", l.role))?;
    if l.session_id.trim().is_empty()
        || l.session_id.chars().count() > crate::store::MAX_SESSION_ID_CHARS
    {
        return Err("session_id must be 1..=255 characters".into());
    }
    if l.message_id.trim().is_empty()
        || l.message_id.chars().count() > crate::store::MAX_SESSION_ID_CHARS
    {
        return Err("message_id must be 1..=255 characters".into());
    }
    let ts = match l.ts.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => Some(
            chrono::DateTime::parse_from_rfc3339(s)
                .map_err(|e| format!("ts is not RFC 3339: {e}"))?
                .with_timezone(&chrono::Utc),
        ),
        None => None,
    };
    let provenance = l.provenance.unwrap_or_default();
    if ts.is_none() && provenance == Provenance::Observed {
        return Err("ts is required (only legacy_snapshot lines may omit it)".into());
    }
    Ok(ImportLine {
        session: SessionMeta {
            session_id: l.session_id,
            source: l.source.unwrap_or_default(),
            title: l.title,
            parent_session_id: l.parent_session_id.filter(|p| !p.is_empty()),
            model: None,
            started_at: None,
        },
        message: CapturedMessage {
            message_uid: l.message_id,
            role,
            content: l.content,
            tool_name: l.tool_name,
            tool_call_id: l.tool_call_id,
            tool_calls: l.tool_calls,
            ts,
            provenance,
        },
    })
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ImportStats {
    pub lines: usize,
    pub inserted: usize,
    pub duplicates: usize,
    /// Lines of deleted (tombstoned) sessions: ignored.
    pub tombstoned: usize,
    /// `(line number, reason)` of skipped lines.
    pub skipped: Vec<(usize, String)>,
    pub bytes: u64,
}

/// Progress after each batch.
#[derive(Debug, Clone, Copy)]
pub struct ImportProgress {
    pub lines: usize,
    pub bytes: u64,
    pub inserted: usize,
}

struct Batch {
    session: SessionMeta,
    msgs: Vec<CapturedMessage>,
}

/// Messages per import transaction: large enough that commits are not the bottleneck, small
/// enough that a kill loses (and a re-run redoes) little work.
const TX_MESSAGES: usize = 1000;

type Inflight = tokio::task::JoinHandle<Result<(Vec<crate::AppendReport>, Vec<usize>)>>;

fn account(stats: &mut ImportStats, reports: &[crate::AppendReport], sizes: &[usize]) {
    for (rep, n) in reports.iter().zip(sizes) {
        stats.inserted += rep.inserted;
        stats.duplicates += rep.duplicates;
        if rep.tombstoned {
            stats.tombstoned += n;
        }
    }
}

async fn wait(inflight: &mut Option<Inflight>, stats: &mut ImportStats) -> Result<()> {
    if let Some(h) = inflight.take() {
        let (reports, sizes) = h
            .await
            .map_err(|e| crate::HistoryError::Worker(e.to_string()))??;
        account(stats, &reports, &sizes);
    }
    Ok(())
}

/// Hand the pending batches to the writer and keep parsing meanwhile (one transaction in
/// flight at a time, so commits stay in file order).
async fn flush(
    hub: &History,
    user: &UserKey,
    pending: &mut Vec<Batch>,
    inflight: &mut Option<Inflight>,
    stats: &mut ImportStats,
) -> Result<()> {
    wait(inflight, stats).await?;
    if pending.is_empty() {
        return Ok(());
    }
    let batches: Vec<(SessionMeta, Vec<CapturedMessage>)> = std::mem::take(pending)
        .into_iter()
        .map(|b| (b.session, b.msgs))
        .collect();
    let sizes: Vec<usize> = batches.iter().map(|b| b.1.len()).collect();
    let (hub, user) = (hub.clone(), user.clone());
    *inflight = Some(tokio::spawn(async move {
        let reports = hub.append_many(&user, batches).await?;
        Ok((reports, sizes))
    }));
    Ok(())
}

/// Import every line of `reader` for `user` (whose display name is `owner`).
pub async fn import_reader<R: BufRead>(
    hub: &History,
    user: &UserKey,
    owner: &str,
    mut reader: R,
    mut on_progress: impl FnMut(ImportProgress),
) -> Result<ImportStats> {
    let mut stats = ImportStats::default();
    let mut pending: Vec<Batch> = Vec::new();
    let mut pending_msgs = 0usize;
    let mut inflight: Option<Inflight> = None;
    let mut buf = String::new();
    loop {
        buf.clear();
        let n = reader
            .read_line(&mut buf)
            .map_err(|e| crate::HistoryError::Io {
                path: std::path::PathBuf::from("<import input>"),
                source: e,
            })?;
        if n == 0 {
            break;
        }
        stats.lines += 1;
        stats.bytes += n as u64;
        let text = buf.trim();
        if text.is_empty() {
            continue;
        }
        let ImportLine { session, message } = match parse_line(text, owner) {
            Ok(l) => l,
            Err(reason) => {
                stats.skipped.push((stats.lines, reason));
                continue;
            }
        };
        let same = pending.last().is_some_and(|b| {
            b.session.session_id == session.session_id && b.msgs.len() < crate::store::MAX_BATCH
        });
        if same {
            if let Some(b) = pending.last_mut() {
                if b.session.title.is_none() {
                    b.session.title = session.title;
                }
                if b.session.parent_session_id.is_none() {
                    b.session.parent_session_id = session.parent_session_id;
                }
                if b.session.source.is_empty() {
                    b.session.source = session.source;
                }
                b.msgs.push(message);
            }
        } else {
            if pending_msgs >= TX_MESSAGES {
                flush(hub, user, &mut pending, &mut inflight, &mut stats).await?;
                pending_msgs = 0;
                on_progress(ImportProgress {
                    lines: stats.lines,
                    bytes: stats.bytes,
                    inserted: stats.inserted,
                });
            }
            pending.push(Batch {
                session,
                msgs: vec![message],
            });
        }
        pending_msgs += 1;
    }
    flush(hub, user, &mut pending, &mut inflight, &mut stats).await?;
    wait(&mut inflight, &mut stats).await?;
    on_progress(ImportProgress {
        lines: stats.lines,
        bytes: stats.bytes,
        inserted: stats.inserted,
    });
    Ok(stats)
}
