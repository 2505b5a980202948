//! Evidence capture: every user message, every assistant message (with its tool calls) and every
//! full tool result (before any display cap) goes to the session owner's history store, verbatim
//! apart from secret redaction (done by the store, once). Synthetic notices are not stored, and
//! images are replaced by a note. Each message gets a stable uid in its metadata, so a retried
//! capture is idempotent.

use crate::agent::Services;
use crate::session::SessionData;
use mpa_history::{CapturedMessage, Provenance, SessionMeta};
use mpa_protocol::{Message, Role, UserKey};

pub const UID_KEY: &str = "mpa_uid";

fn uid_of(m: &mut Message) -> String {
    if let Some(u) = m.metadata.get(UID_KEY).and_then(|v| v.as_str()) {
        return u.to_string();
    }
    let u = uuid::Uuid::new_v4().simple().to_string();
    m.metadata
        .insert(UID_KEY.into(), serde_json::Value::String(u.clone()));
    u
}

fn captured(m: &mut Message, full_content: Option<String>) -> CapturedMessage {
    let uid = uid_of(m);
    let mut content = full_content.unwrap_or_else(|| m.text());
    let images = m.content.image_count();
    if images > 0 {
        content.push_str(&format!(
            "\n[{images} image(s) attached; images are not stored]"
        ));
    }
    CapturedMessage {
        message_uid: uid,
        role: m.role,
        content,
        tool_name: m.name.clone(),
        tool_call_id: m.tool_call_id.clone(),
        tool_calls: (!m.tool_calls.is_empty()).then(|| {
            serde_json::Value::Array(
                m.tool_calls
                    .iter()
                    .map(|c| {
                        serde_json::json!({"id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments}})
                    })
                    .collect(),
            )
        }),
        ts: None,
        provenance: Provenance::Observed,
    }
}

/// Captures `data.messages[from..]`; `full` supplies uncapped tool results by position.
pub async fn capture(
    services: &Services,
    data: &mut SessionData,
    from: usize,
    mut full: Vec<Option<String>>,
) {
    let Some(hub) = &services.caps.history else {
        return;
    };
    let mut batch = Vec::new();
    for (i, m) in data.messages[from..].iter_mut().enumerate() {
        if m.role == Role::System {
            continue;
        }
        let full_content = full.get_mut(i).and_then(Option::take);
        batch.push(captured(m, full_content));
    }
    if batch.is_empty() {
        return;
    }
    let meta = SessionMeta {
        session_id: data.session_id.clone(),
        source: data.channel.clone(),
        title: (!data.title.is_empty()).then(|| data.title.clone()),
        parent_session_id: None,
        model: Some(services.cfg.model.model.clone()),
        started_at: Some(data.created_at),
    };
    let owner = UserKey::for_user(&data.owner);
    for chunk in batch.chunks(100) {
        if let Err(e) = hub.append(&owner, meta.clone(), chunk.to_vec()).await {
            tracing::warn!(session = %data.session_id, error = %e, "evidence not captured");
        }
    }
}
