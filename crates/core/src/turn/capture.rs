//! Evidence capture: every user message, every assistant message (with its tool calls) and every
//! full tool result (before any display cap) goes to the session owner's history store, verbatim
//! apart from secret redaction (done by the store, once). Synthetic notices are not stored, and
//! images are replaced by a note. Each message gets a stable uid in its metadata, so a retried
//! capture is idempotent.

use crate::session::SessionData;
use crate::transcript::Transcript;
use mpa_history::{CapturedMessage, Provenance, SessionMeta};
use mpa_protocol::{Message, Role};
use mpa_redact::UserKey;

pub const UID_KEY: &str = "mpa_uid";

/// Host notices and host commands (with their replies) are not evidence of the conversation.
fn is_host_text(m: &Message) -> bool {
    m.metadata.contains_key(super::end::INTERRUPTION_KEY)
        || m.metadata
            .contains_key(super::host_command::HOST_COMMAND_KEY)
}

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
    if let Some(note) = crate::vision::evidence_note(m) {
        content.push_str("\n\n");
        content.push_str(note);
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

/// Where a session's evidence goes.
pub struct CaptureTarget<'a> {
    pub history: &'a mpa_history::History,
    pub owner: UserKey,
    pub meta: SessionMeta,
}

impl<'a> CaptureTarget<'a> {
    pub fn for_session(
        history: Option<&'a mpa_history::History>,
        data: &SessionData,
        model: &str,
    ) -> Option<Self> {
        Some(Self {
            history: history?,
            owner: UserKey::for_user(&data.owner),
            meta: SessionMeta {
                session_id: data.session_id.clone(),
                source: data.channel.clone(),
                title: (!data.title.is_empty()).then(|| data.title.clone()),
                parent_session_id: None,
                model: Some(model.to_string()),
                started_at: Some(data.created_at),
            },
        })
    }
}

/// Captures every message the transcript has not captured yet, with the full content of capped
/// results. A failed append is logged and retried with the next flush (uids keep it idempotent).
pub async fn flush(target: &CaptureTarget<'_>, transcript: &mut Transcript) {
    let (from, items) = transcript.uncaptured();
    let upto = from + items.len();
    let batch: Vec<CapturedMessage> = items
        .into_iter()
        .filter(|(m, _)| m.role != Role::System && !is_host_text(m))
        .map(|(m, full)| captured(m, full))
        .collect();
    let mut ok = true;
    for chunk in batch.chunks(100) {
        if let Err(e) = target
            .history
            .append(&target.owner, target.meta.clone(), chunk.to_vec())
            .await
        {
            ok = false;
            // A damaged store is logged by the history itself, once an hour per user (and
            // shown in /healthz), not once a turn.
            if e.classify() != mpa_history::FailureClass::Storage {
                tracing::warn!(session = %target.meta.session_id, error = %e, "evidence not captured");
            }
        }
    }
    if ok {
        transcript.mark_captured(upto);
    }
}

/// Marks messages compacted out of the live context (still searchable). A failure is logged: the
/// messages stay in the store either way.
pub async fn mark_compacted(target: &CaptureTarget<'_>, removed: &[Message]) {
    let uids: Vec<String> = removed
        .iter()
        .filter_map(|m| m.metadata.get(UID_KEY).and_then(|v| v.as_str()))
        .map(str::to_string)
        .collect();
    if uids.is_empty() {
        return;
    }
    if let Err(e) = target
        .history
        .mark_compacted(&target.owner, &target.meta.session_id, uids)
        .await
    {
        tracing::warn!(session = %target.meta.session_id, error = %e, "compacted messages not marked");
    }
}

/// Marks a regenerated or edited exchange rewound (never searchable again): recall returns only
/// the answer the user kept. A failure is logged; the rows stay until retention then.
pub async fn mark_rewound(target: &CaptureTarget<'_>, uids: Vec<String>) {
    if uids.is_empty() {
        return;
    }
    if let Err(e) = target
        .history
        .mark_rewound(&target.owner, &target.meta.session_id, uids)
        .await
    {
        tracing::warn!(session = %target.meta.session_id, error = %e, "rewound messages not marked");
    }
}
