//! Repeated results as references (spec learning-guardrails.md §5.7, runtime.md §14.5): when a
//! tool returns, in one session, a long result (at least [`MIN_CHARS`] characters) identical to
//! one the model can still read, the model reads a short reference to that earlier result
//! instead of the same text again. The tool still ran, and the whole result is still the
//! evidence (the message's full content). Decided as a result joins the transcript, against the
//! transcript as it is then:
//!
//! - a changed result is another digest: its full text;
//! - an earlier result that a compaction removed is not found: the full text comes back, and
//!   this result is the one later repeats refer to;
//! - a capped result's reference names its own `read_tool_result` id (the earlier one's may be
//!   gone from the result store).
//!
//! The digest of each long successful result is kept in its message's host metadata (never
//! sent to the model).

use crate::tools::invoke::Invoked;
use crate::transcript::Transcript;
use crate::turn::tool_calls::message_of;
use mpa_protocol::{Message, Outcome, Role, ToolCall};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Results shorter than this are cheaper to repeat than to refer to.
pub const MIN_CHARS: usize = 512;
/// Host metadata: the digest of a long successful result (tool and text).
pub const DIGEST_KEY: &str = "result_digest";
/// Host metadata: the call id of the earlier result this message refers to.
pub const REFERENCE_KEY: &str = "result_reference";

/// The tool message for a call's result as it joins `transcript`, and its full content for the
/// evidence.
pub fn join(
    transcript: &Transcript,
    call: &ToolCall,
    mut invoked: Invoked,
) -> (Message, Option<String>) {
    let whole = invoked
        .full_content
        .as_deref()
        .unwrap_or(&invoked.output.content);
    let long = whole.len() >= MIN_CHARS && whole.chars().count() >= MIN_CHARS;
    if invoked.output.outcome != Outcome::Succeeded || !long {
        return message_of(call, invoked);
    }
    let digest = digest_of(&call.name, whole);
    let earlier = original(transcript, &digest).map(str::to_string);
    invoked
        .output
        .metadata
        .insert(DIGEST_KEY.into(), Value::String(digest));
    let Some(earlier) = earlier else {
        return message_of(call, invoked);
    };
    let stub = reference(call, &earlier, invoked.result_id.as_deref());
    let full = match invoked.full_content.take() {
        Some(full) => full,
        None => std::mem::take(&mut invoked.output.content),
    };
    invoked.output.content = stub;
    invoked
        .output
        .metadata
        .insert(REFERENCE_KEY.into(), Value::String(earlier));
    invoked.full_content = Some(full);
    message_of(call, invoked)
}

fn digest_of(tool: &str, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(tool.as_bytes());
    h.update([0]);
    h.update(text.as_bytes());
    hex::encode(&h.finalize()[..16])
}

/// The call id of the first result in the live transcript with this digest that is itself the
/// text (not a reference).
fn original<'a>(transcript: &'a Transcript, digest: &str) -> Option<&'a str> {
    transcript
        .messages()
        .iter()
        .filter(|m| m.role == Role::Tool && !m.metadata.contains_key(REFERENCE_KEY))
        .find(|m| m.metadata.get(DIGEST_KEY).and_then(Value::as_str) == Some(digest))
        .and_then(|m| m.tool_call_id.as_deref())
}

/// What the model reads instead of the repeated text.
fn reference(call: &ToolCall, earlier: &str, result_id: Option<&str>) -> String {
    let mut args: String = call.arguments.chars().take(120).collect();
    if call.arguments.chars().count() > 120 {
        args.push('…');
    }
    let mut v = json!({
        "execution_outcome": Outcome::Succeeded.as_str(),
        "unchanged": true,
        "same_as": {"tool_call_id": earlier, "tool": call.name},
        "message": format!(
            "the tool ran again and returned a result byte-identical to the {} result of \
             tool_call_id {earlier} earlier in this conversation; it has not changed, so it is \
             not repeated here — refer to that result",
            call.name
        ),
        "arguments": args,
    });
    if let Some(id) = result_id {
        v["result_id"] = json!(id);
        v["read_more"] = json!(format!(
            "read_tool_result with result_id {id} reads this result from the start"
        ));
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolOutput;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "lookup".into(),
            arguments: r#"{"q":"dune"}"#.into(),
        }
    }

    fn result(text: &str) -> Invoked {
        Invoked::uncapped(ToolOutput::json(&json!({"text": text}), Outcome::Succeeded))
    }

    fn push(t: &mut Transcript, id: &str, text: &str) -> (Message, Option<String>) {
        let joined = join(t, &call(id), result(text));
        t.push_with_full(joined.0.clone(), joined.1.clone());
        joined
    }

    #[test]
    fn the_second_identical_long_result_refers_to_the_first() {
        let long = "x".repeat(600);
        let mut t = Transcript::restored(vec![]);
        let (first, full) = push(&mut t, "c1", &long);
        assert!(first.text().contains(&long) && full.is_none());
        let (second, full) = push(&mut t, "c2", &long);
        let v: Value = serde_json::from_str(&second.text()).unwrap_or_default();
        assert_eq!(v["same_as"]["tool_call_id"], "c1");
        assert!(!second.text().contains(&long));
        assert!(
            full.is_some_and(|f| f.contains(&long)),
            "the evidence keeps it"
        );
        // A third refers to the original, not to the reference.
        let (third, _) = push(&mut t, "c3", &long);
        assert!(third.text().contains("\"c1\""));
        // A changed result is shown in full.
        let (changed, _) = push(&mut t, "c4", &"y".repeat(600));
        assert!(changed.text().contains(&"y".repeat(600)));
    }

    #[test]
    fn after_a_compaction_removed_the_original_the_full_text_comes_back() {
        let long = "x".repeat(600);
        let mut t = Transcript::restored(vec![Message::user("list it")]);
        push(&mut t, "c1", &long);
        assert!(!push(&mut t, "c2", &long).0.text().contains(&long));
        // The compaction summarises everything up to and including the original.
        t.mark_captured(t.len());
        t.compact(2, vec![Message::user("[summary]")]);
        let (again, _) = push(&mut t, "c3", &long);
        assert!(again.text().contains(&long), "shown in full again");
        // ...and it is the one the next repeat refers to.
        let (next, _) = push(&mut t, "c4", &long);
        assert!(next.text().contains("\"c3\""), "{}", next.text());
    }

    #[test]
    fn short_or_failed_results_are_always_shown() {
        let mut t = Transcript::restored(vec![]);
        let short = "x".repeat(MIN_CHARS - 20);
        push(&mut t, "c1", &short);
        assert!(push(&mut t, "c2", &short).0.text().contains(&short));
        let failed = || {
            Invoked::uncapped(ToolOutput::json(
                &json!({"error": "z".repeat(600)}),
                Outcome::Failed,
            ))
        };
        let (m, _) = join(&t, &call("f1"), failed());
        t.push(m);
        assert!(
            join(&t, &call("f2"), failed())
                .0
                .text()
                .contains(&"z".repeat(600))
        );
    }
}
