//! The session list's search and the page's own display snapshot (spec runtime.md §14.1).
//! Search covers only the caller's own sessions — administrators included: titles, and content
//! through the evidence history (the user's own store, the same search `session_search` runs).
//! The display snapshot is whatever JSON the page saves, kept beside the chat as a file.

use crate::capability::Recall;
use crate::{Agent, ChatSummary, CoreError};
use mpa_protocol::Actor;
use serde_json::{Value, json};
use std::path::PathBuf;

/// Longest search text, in characters.
pub const MAX_QUERY_CHARS: usize = 200;
/// Largest display snapshot the page may save.
pub const MAX_DISPLAY_BYTES: usize = 1024 * 1024;
/// How many of the caller's newest sessions a search looks through.
const SEARCH_WINDOW: u32 = 1000;

/// One search hit: the session, whether its title or its content matched, and a snippet.
pub struct SessionMatch {
    pub summary: ChatSummary,
    pub matched: &'static str,
    pub snippet: Option<String>,
}

/// The caller's sessions whose title or content matches `q`: title matches first (newest
/// first), then content matches in the history's order.
pub async fn search(agent: &Agent, actor: &Actor, q: &str) -> Result<Vec<SessionMatch>, CoreError> {
    let q = q.trim();
    let n = q.chars().count();
    if n == 0 || n > MAX_QUERY_CHARS {
        return Err(CoreError::InvalidInput(format!(
            "q must have 1-{MAX_QUERY_CHARS} characters (it has {n})"
        )));
    }
    const PAGE: u32 = 200;
    let mut own = Vec::new();
    for page in 1..=SEARCH_WINDOW / PAGE {
        let rows = agent.list_sessions(actor, false, page, PAGE).await?;
        let last = rows.len() < PAGE as usize;
        own.extend(rows);
        if last {
            break;
        }
    }
    let needle = q.to_lowercase();
    let mut out: Vec<SessionMatch> = own
        .iter()
        .filter(|c| c.title.to_lowercase().contains(&needle))
        .map(|c| SessionMatch {
            summary: c.clone(),
            matched: "title",
            snippet: None,
        })
        .collect();
    if let Some(history) = agent.services().caps.get::<Recall>().map(Recall::history) {
        let key = mpa_redact::UserKey::for_user(&actor.user_id);
        let found = crate::tools::session_search::search_json(
            history,
            &key,
            None,
            json!({"query": q, "limit": 10, "detail": "index"}),
        )
        .await;
        for hit in found["results"].as_array().into_iter().flatten() {
            let Some(id) = hit["session_id"].as_str() else {
                continue;
            };
            if out.iter().any(|m| m.summary.session_id == id) {
                continue;
            }
            // Only a session in the caller's own list: the history is theirs, and this keeps it so.
            if let Some(c) = own.iter().find(|c| c.session_id == id) {
                out.push(SessionMatch {
                    summary: c.clone(),
                    matched: "content",
                    snippet: hit["snippet"].as_str().map(str::to_owned),
                });
            }
        }
    }
    Ok(out)
}

fn display_path(agent: &Agent, session_id: &str) -> PathBuf {
    agent
        .services()
        .store
        .path()
        .parent()
        .unwrap_or_else(|| std::path::Path::new("."))
        .join("agent/runtime/display")
        .join(format!("{session_id}.json"))
}

/// Saves the page's display snapshot of a session the caller may access.
pub async fn save_display(
    agent: &Agent,
    actor: &Actor,
    session_id: &str,
    display: &Value,
) -> Result<(), CoreError> {
    agent.check_access(actor, session_id).await?;
    let bytes = serde_json::to_vec(display).map_err(|e| CoreError::InvalidInput(e.to_string()))?;
    if bytes.len() > MAX_DISPLAY_BYTES {
        return Err(CoreError::InvalidInput(format!(
            "the display snapshot is {} bytes; at most {MAX_DISPLAY_BYTES} are kept",
            bytes.len()
        )));
    }
    let path = display_path(agent, session_id);
    tokio::task::spawn_blocking(move || {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &path)
    })
    .await
    .map_err(|e| CoreError::AttachmentStorage(e.to_string()))?
    .map_err(|e| CoreError::Config(format!("the display snapshot could not be saved: {e}")))
}

/// The page's saved display snapshot of a session (its access already checked), if any.
pub fn load_display(agent: &Agent, session_id: &str) -> Option<Value> {
    std::fs::read(display_path(agent, session_id))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
}

/// Removes a deleted session's display snapshot.
pub fn forget_display(agent: &Agent, session_id: &str) {
    let _ = std::fs::remove_file(display_path(agent, session_id));
}
