//! How turns end against models that misbehave the way local servers do (issue 16): an answer cut
//! by the output limit is partial, cut-off tool arguments are never executed, an empty answer gets
//! one continuation and then fails — and is never saved or resent — and a context overflow says
//! what the user can do. Driven by the mock model server over the real wire format.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::{TestHost, run_turn};
use mpa_core::Agent;
use mpa_protocol::{Actor, Event, Outcome, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};

struct Env {
    _dir: tempfile::TempDir,
    agent: Agent,
    actor: Actor,
}

async fn env(mock: &MockModelServer) -> Env {
    let h = TestHost::builder(mock, "gemma-3-270m")
        .model(|m| m.max_retries = 2)
        .build()
        .await;
    Env {
        _dir: h.dir,
        agent: h.agent,
        actor: h.actor,
    }
}

impl Env {
    async fn turn(&self, session: &str, text: &str) -> (TurnStatus, String, Vec<Event>) {
        let t = run_turn(&self.agent, &self.actor, session, text).await;
        (t.status, t.final_text, t.events)
    }

    async fn transcript(&self, session: &str) -> Vec<mpa_protocol::Message> {
        self.agent
            .chat_for(&self.actor, session)
            .await
            .unwrap()
            .agent_messages
    }
}

fn error_of(events: &[Event]) -> Option<(String, String)> {
    events.iter().find_map(|e| match e {
        Event::Error { code, message, .. } => Some((code.clone(), message.clone())),
        _ => None,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_cut_by_the_output_limit_is_partial_and_says_so() {
    let mock = MockModelServer::start().await;
    let e = env(&mock).await;
    mock.push(MockReply::text("The three films you asked about are").finish_reason("length"));
    let (status, text, events) = e.turn("s", "list them").await;
    assert_eq!(status, TurnStatus::Partial);
    assert_eq!(text, "The three films you asked about are");
    let (code, message) = error_of(&events).unwrap();
    assert_eq!(code, "output_truncated");
    assert!(message.contains("LLM_MAX_OUTPUT_TOKENS"), "{message}");
    let msgs = e.transcript("s").await;
    assert_eq!(msgs.last().unwrap().metadata["truncated"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn cut_off_tool_arguments_are_answered_and_never_executed() {
    let mock = MockModelServer::start().await;
    let e = env(&mock).await;
    // llama.cpp reports "tool_calls" even when the arguments break off.
    mock.push(MockReply::raw_sse(vec![
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
            {"index": 0, "id": "c_cut", "type": "function",
             "function": {"name": "test_sleep", "arguments": "{\"ms\": 100"}},
            {"index": 1, "id": "c_ok", "type": "function",
             "function": {"name": "test_echo", "arguments": "{\"text\": \"whole\"}"}}]},
            "finish_reason": null}]})
        .to_string(),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}).to_string(),
        "[DONE]".into(),
    ]));
    mock.push(MockReply::text("One call was cut off; the other ran."));
    let (status, _, events) = e.turn("s", "go").await;
    assert_eq!(status, TurnStatus::Completed);
    let finished: Vec<(String, Outcome)> = events
        .iter()
        .filter_map(|ev| match ev {
            Event::ToolFinished {
                tool_id, outcome, ..
            } => Some((tool_id.clone(), *outcome)),
            _ => None,
        })
        .collect();
    assert!(finished.contains(&("c_cut".into(), Outcome::Failed)));
    assert!(finished.contains(&("c_ok".into(), Outcome::Succeeded)));
    let reqs = mock.requests();
    let msgs = reqs[1]["messages"].as_array().unwrap();
    let cut = msgs.iter().find(|m| m["tool_call_id"] == "c_cut").unwrap();
    let body: Value = serde_json::from_str(cut["content"].as_str().unwrap()).unwrap();
    assert_eq!(body["error"], "arguments_cut_off");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("arguments were cut off by the output limit; not executed")
    );
    // Results stay in call order, each paired with its call.
    let ids: Vec<&str> = msgs
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c_cut", "c_ok"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_answer_gets_one_continuation_then_fails_and_is_never_resent() {
    let mock = MockModelServer::start().await;
    let e = env(&mock).await;
    mock.push(MockReply::text(""));
    mock.push(MockReply::text(""));
    let (status, _, events) = e.turn("s", "hello?").await;
    assert_eq!(status, TurnStatus::Failed);
    assert_eq!(error_of(&events).unwrap().0, "model_empty_answer");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2, "one continuation, no more");
    let second = reqs[1]["messages"].as_array().unwrap();
    assert!(
        second.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("your last answer was empty")
    );
    // The next request carries no empty assistant message (and no continuation note).
    mock.push(MockReply::text("Here I am."));
    let (status, text, _) = e.turn("s", "again").await;
    assert_eq!(
        (status, text.as_str()),
        (TurnStatus::Completed, "Here I am.")
    );
    let third = mock.requests()[2]["messages"].as_array().unwrap().clone();
    assert!(
        third
            .iter()
            .filter(|m| m["role"] == "assistant")
            .all(|m| !m["content"].as_str().unwrap_or_default().is_empty()),
        "{third:?}"
    );
    assert!(third.iter().all(|m| {
        !m["content"]
            .as_str()
            .unwrap_or_default()
            .contains("last answer was empty")
    }));
    // One continuation rescues an answer.
    mock.push(MockReply::text(""));
    mock.push(MockReply::text("Sorry, here it is."));
    let (status, text, _) = e.turn("s", "once more").await;
    assert_eq!(
        (status, text.as_str()),
        (TurnStatus::Completed, "Sorry, here it is.")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_context_overflow_is_classified_sent_once_and_says_what_to_do() {
    let mock = MockModelServer::start().await;
    let e = env(&mock).await;
    mock.push(MockReply::status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 2048 tokens. However, you requested 3000 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
    ));
    let (status, _, events) = e.turn("s", "a long question").await;
    assert_eq!(status, TurnStatus::Failed);
    let (code, message) = error_of(&events).unwrap();
    assert_eq!(code, "model_context_exceeded");
    assert!(
        message.contains("maximum context length is 2048"),
        "{message}"
    );
    assert!(message.contains("start a new session"), "{message}");
    assert_eq!(mock.requests().len(), 1, "never retried");
    // The user's message stays in the chat.
    let msgs = e.transcript("s").await;
    assert_eq!(msgs[0].text(), "a long question");
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_is_estimated_and_marked_when_the_server_reports_none() {
    let mock = MockModelServer::start().await;
    let e = env(&mock).await;
    mock.push(MockReply::text("fine").without_usage());
    let (_, _, events) = e.turn("s", "how are you").await;
    let usage = events
        .iter()
        .find_map(|ev| match ev {
            Event::Usage { usage } => Some(*usage),
            _ => None,
        })
        .unwrap();
    assert!(usage.estimated);
    assert!(usage.input_tokens > 0 && usage.output_tokens > 0);
}
