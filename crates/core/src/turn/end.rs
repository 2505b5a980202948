//! Turn end: interruption notice (on stop or failure), plan snapshot on the last AI/tool message,
//! secret redaction of this turn's messages, and the chat snapshot written to the main store.

use crate::plan::PLAN_METADATA_KEY;
use crate::redaction::redact;
use crate::services::Services;
use crate::session::SessionData;
use crate::turn::StopCause;
use mpa_protocol::{Content, ContentPart, Message, Role, TurnStatus};
use mpa_store::Chat;

pub const INTERRUPTION_KEY: &str = "moviepilot_interruption";

pub async fn finish(
    services: &Services,
    data: &mut SessionData,
    turn_start: usize,
    status: TurnStatus,
    error: Option<&str>,
    cause: StopCause,
) {
    let notice = match status {
        TurnStatus::Stopped => Some(format!(
            "[The previous turn was stopped {}. Tool calls without a received result are marked \
             \"result unknown\": verify the current state read-only before retrying any write.]",
            match cause {
                StopCause::User => "by the user",
                StopCause::Shutdown => "because the host was shutting down",
            }
        )),
        TurnStatus::Failed => Some(format!(
            "[The previous turn ended with an error: {}. Tool calls without a received result are marked \
             \"result unknown\".]",
            error.unwrap_or("unknown error")
        )),
        TurnStatus::Completed | TurnStatus::IterationLimit | TurnStatus::Partial => None,
    };
    if let Some(text) = notice {
        let mut m = Message::assistant(text, vec![]);
        m.metadata
            .insert(INTERRUPTION_KEY.into(), serde_json::Value::Bool(true));
        data.transcript.push(m);
    }
    let plan = data
        .tools
        .lock()
        .ok()
        .and_then(|s| s.plan.as_ref().map(|p| p.to_json()));
    if let Some(plan) = plan
        && let Some(last) = data
            .transcript
            .tail_mut(turn_start)
            .iter_mut()
            .rev()
            .find(|m| matches!(m.role, Role::Assistant | Role::Tool))
    {
        last.metadata.insert(PLAN_METADATA_KEY.into(), plan);
    }
    for m in data.transcript.tail_mut(turn_start) {
        redact_message(m);
    }
    if data.title.is_empty()
        && let Some(first) = data
            .transcript
            .messages()
            .iter()
            .find(|m| m.role == Role::User)
    {
        data.title = make_title(&first.text());
    }
    let messages = data.transcript.messages();
    let chat = Chat {
        session_id: data.session_id.clone(),
        user_id: data.owner.clone(),
        channel: data.channel.clone(),
        title: data.title.clone(),
        agent_messages: messages.to_vec(),
        display_messages: display_messages(messages),
        message_count: messages.len() as i64,
        session_state: data.persisted.to_json(),
        created_at: data.created_at,
        updated_at: chrono::Utc::now(),
    };
    if let Err(e) = services.store.save_chat(chat).await {
        tracing::error!(session = %data.session_id, error = %e, "chat snapshot not saved");
    }
}

fn redact_in_place(s: &mut String) {
    if let std::borrow::Cow::Owned(o) = redact(s) {
        *s = o;
    }
}

fn redact_message(m: &mut Message) {
    match &mut m.content {
        Content::Text(t) => redact_in_place(t),
        Content::Parts(parts) => {
            for p in parts {
                if let ContentPart::Text { text } = p {
                    redact_in_place(text);
                }
            }
        }
    }
    for c in &mut m.tool_calls {
        redact_in_place(&mut c.arguments);
    }
}

/// Title from the first user message: at most 36 columns, CJK characters counting two.
pub fn make_title(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut width = 0;
    let mut out = String::new();
    for c in flat.chars() {
        let w = if (c as u32) >= 0x2E80 { 2 } else { 1 };
        if width + w > 36 {
            out.push('…');
            break;
        }
        width += w;
        out.push(c);
    }
    out
}

/// What a front end shows: user and assistant text, plus one line per tool result.
pub fn display_messages(messages: &[Message]) -> serde_json::Value {
    let mut out = Vec::new();
    for m in messages {
        match m.role {
            Role::User => out.push(serde_json::json!({
                "role": "user",
                "content": m.text(),
                "images": m.content.image_count(),
            })),
            Role::Assistant => {
                let text = m.text();
                if !text.is_empty() {
                    let mut v = serde_json::json!({"role": "assistant", "content": text});
                    if m.metadata.contains_key(INTERRUPTION_KEY) {
                        v["notice"] = serde_json::Value::Bool(true);
                    }
                    out.push(v);
                }
            }
            Role::Tool => {
                let outcome = m.outcome.unwrap_or(mpa_protocol::Outcome::Unknown);
                out.push(serde_json::json!({
                    "role": "tool",
                    "tool_id": m.tool_call_id,
                    "name": m.name,
                    "outcome": outcome.as_str(),
                    "status": if outcome.is_error() { "error" } else { "done" },
                    "message": crate::tools::invoke::summary_line(&m.text()),
                }));
            }
            Role::System => {}
        }
    }
    serde_json::Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_bounded() {
        assert_eq!(make_title("  hello   world "), "hello world");
        let t = make_title(&"电影".repeat(20));
        assert_eq!(t.chars().count(), 19);
        assert!(t.ends_with('…'));
    }
}
