//! Steering intake (spec runtime.md §2.3): the first step of `prepare_request`. Messages the
//! user sent while the turn ran join the transcript here as real user messages, right before the
//! next model call — never between an assistant's tool calls and their results — and each is
//! acknowledged `applied` on the turn's own stream once it is stored.
//!
//! The model reads a steering message as a JSON text block (`message`, `input` with
//! `steering: true` and its id, the fixed `continuation_context`, `images`, `files`), followed by
//! its images; the chat's display list and the evidence history keep the user's own words.

use crate::services::Services;
use crate::session::steering::{SteeringInbox, SteeringMessage, Taken};
use crate::transcript::Transcript;
use mpa_protocol::{Event, Message, Role, SteeringStatus};
use serde_json::{Value, json};

/// Metadata key carrying a steering message's id on its user message.
pub const STEERING_ID_KEY: &str = "moviepilot_steering_message_id";

/// What the model is told a steering message is.
pub const CONTINUATION_CONTEXT: &str = "The user sent this while you were working on the \
current task. It is a supplement to that task, not a new one: keep the task's scope, stop \
conditions, confirmation criteria, output format and safety constraints unless the user \
explicitly changes them here.";

/// Whether a user message may join here: the transcript does not end with an assistant's tool
/// calls still waiting for some of their results.
pub fn boundary_open(messages: &[Message]) -> bool {
    let results = messages
        .iter()
        .rev()
        .take_while(|m| m.role == Role::Tool)
        .count();
    let Some(call) = messages
        .len()
        .checked_sub(results + 1)
        .map(|i| &messages[i])
    else {
        return true;
    };
    if call.role != Role::Assistant {
        return true;
    }
    let answered = &messages[messages.len() - results..];
    call.tool_calls.iter().all(|c| {
        answered
            .iter()
            .any(|r| r.tool_call_id.as_deref() == Some(c.id.as_str()))
    })
}

/// The user message the model reads for `m`.
pub fn message_of(services: &Services, m: &SteeringMessage) -> Message {
    let images: Vec<Value> = (1..=m.images.len())
        .map(|index| json!({"index": index, "type": "image"}))
        .collect();
    let block = json!({
        "message": m.text,
        "input": {"mode": "text", "steering": true, "steering_message_id": m.message_id},
        "continuation_context": CONTINUATION_CONTEXT,
        "images": images,
        "files": [],
    });
    let text = serde_json::to_string_pretty(&block).unwrap_or_else(|_| m.text.clone());
    let mut message = super::begin::user_message(services, &text, &m.images);
    message
        .metadata
        .insert(STEERING_ID_KEY.into(), Value::String(m.message_id.clone()));
    message
}

/// Takes the inbox's waiting messages into the transcript when it is at a boundary (the
/// evidence keeps each one's own words). Returns what was taken, for the caller to store and
/// then acknowledge.
pub fn intake(
    services: &Services,
    inbox: &SteeringInbox,
    transcript: &mut Transcript,
) -> Vec<Taken> {
    if inbox.pending() == 0 || !boundary_open(transcript.messages()) {
        return Vec::new();
    }
    let taken = inbox.take();
    for t in &taken {
        transcript.push_with_full(
            message_of(services, &t.message),
            Some(t.message.text.clone()),
        );
    }
    taken
}

/// The sender's acknowledgement: the message waits for the turn's next model call.
pub fn queued_event(m: &SteeringMessage) -> Event {
    Event::Steering {
        status: SteeringStatus::Queued,
        message_id: m.message_id.clone(),
        content: m.text.clone(),
        assistant_message_id: None,
        continuation_message_id: None,
    }
}

/// On the turn's stream: the message is in the conversation; a new assistant segment starts.
pub fn applied_event(t: &Taken) -> Event {
    Event::Steering {
        status: SteeringStatus::Applied,
        message_id: t.message.message_id.clone(),
        content: t.message.text.clone(),
        assistant_message_id: Some(t.assistant_message_id.clone()),
        continuation_message_id: Some(t.continuation_message_id.clone()),
    }
}

/// On the turn's stream: a stop came first; the model never saw the message.
pub fn discarded_event(m: &SteeringMessage) -> Event {
    Event::Steering {
        status: SteeringStatus::Discarded,
        message_id: m.message_id.clone(),
        content: m.text.clone(),
        assistant_message_id: None,
        continuation_message_id: None,
    }
}

/// The steering id of a user message, if it is a steering message.
pub fn steering_id(m: &Message) -> Option<&str> {
    m.metadata.get(STEERING_ID_KEY).and_then(Value::as_str)
}

/// What the user typed, from a steering message's JSON block (its whole text when the block
/// does not read, e.g. after redaction changed it).
pub fn user_text(m: &Message) -> String {
    let text = m.text();
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
        .unwrap_or(text)
}

/// The display line of a steering message: the user's words and its id, so a reload shows it
/// where it joined the conversation.
pub fn display_line(m: &Message, id: &str) -> Value {
    json!({
        "role": "user",
        "content": user_text(m),
        "images": m.content.image_count(),
        "steering_message_id": id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpa_protocol::{Outcome, ToolCall};

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "test_echo".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn a_boundary_is_never_between_a_tool_call_and_its_results() {
        let ask = Message::user("go");
        let calls = Message::assistant("", vec![call("a"), call("b")]);
        let a = Message::tool("a", "test_echo", "{}", Outcome::Succeeded);
        let b = Message::tool("b", "test_echo", "{}", Outcome::Succeeded);
        assert!(boundary_open(&[]));
        assert!(boundary_open(std::slice::from_ref(&ask)));
        assert!(!boundary_open(&[ask.clone(), calls.clone()]));
        assert!(!boundary_open(&[ask.clone(), calls.clone(), a.clone()]));
        assert!(boundary_open(&[ask.clone(), calls, a, b]));
        assert!(boundary_open(&[ask, Message::assistant("done", vec![])]));
    }

    #[test]
    fn the_display_keeps_the_users_words() {
        let block = json!({"message": "只要 4K 的", "input": {"steering": true}});
        let mut m = Message::user(serde_json::to_string_pretty(&block).unwrap());
        m.metadata.insert(STEERING_ID_KEY.into(), json!("s1"));
        assert_eq!(steering_id(&m), Some("s1"));
        assert_eq!(
            display_line(&m, "s1"),
            json!({"role": "user", "content": "只要 4K 的", "images": 0,
                   "steering_message_id": "s1"})
        );
    }
}
