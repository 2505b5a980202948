//! The scripted model over HTTP, as the host's model client sees it: a summariser request of the
//! host's compaction gets the trajectory's summary and consumes no step, so the replayed
//! conversation goes on where it was.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_eval::scripted::ScriptedModel;
use mpa_eval::trajectory::Trajectory;
use serde_json::{Value, json};

/// The host's summariser instructions stand here for any system message the starter names.
const SUMMARY_PROMPT: &str = "You are the context summariser (test).";

async fn ask(model: &ScriptedModel, body: Value) -> Value {
    reqwest::Client::new()
        .post(format!("{}/chat/completions", model.base_url()))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn message(reply: &Value) -> &Value {
    &reply["choices"][0]["message"]
}

fn turn_request(messages: Value) -> Value {
    json!({"model": "scripted-replay", "messages": messages,
           "tools": [{"type": "function", "function": {"name": "moviepilot_api", "parameters": {}}}]})
}

fn summariser_request() -> Value {
    json!({"model": "scripted-replay", "messages": [
        {"role": "system", "content": SUMMARY_PROMPT},
        {"role": "user", "content": "Conversation excerpt to summarise:\n\n[user] read pages"}]})
}

#[tokio::test]
async fn a_summariser_request_gets_the_summary_and_consumes_no_step() {
    let t = Trajectory::from_json(
        &json!({
            "summary": "pages 1-2 read, target not yet seen",
            "steps": [
                {"calls": [{"tool": "moviepilot_api", "arguments": {"operation_id": "subscription.list", "query": {"page": 1, "count": 20}}}]},
                {"calls": [{"tool": "moviepilot_api", "arguments": {"operation_id": "subscription.list", "query": {"page": 2, "count": 20}}}]}
            ],
            "final": {"status": "completed"}
        })
        .to_string(),
        "t",
    )
    .unwrap();
    let model = ScriptedModel::start(t.script().unwrap(), SUMMARY_PROMPT)
        .await
        .unwrap();
    let user = json!([{"role": "system", "content": "you are the agent"},
                      {"role": "user", "content": "confirm the subscription"}]);

    let first = ask(&model, turn_request(user.clone())).await;
    let call = &message(&first)["tool_calls"][0]["function"];
    assert!(call["arguments"].as_str().unwrap().contains(r#""page":1"#));

    // The host compacts before its second call: the summariser asks first.
    let summary = ask(&model, summariser_request()).await;
    assert_eq!(
        message(&summary)["content"],
        "pages 1-2 read, target not yet seen"
    );
    assert!(message(&summary).get("tool_calls").is_none());
    assert_eq!(summary["choices"][0]["finish_reason"], "stop");

    // The conversation goes on with step 2, not step 3 or the final answer.
    let second = ask(&model, turn_request(user.clone())).await;
    let call = &message(&second)["tool_calls"][0]["function"];
    assert!(call["arguments"].as_str().unwrap().contains(r#""page":2"#));
    let last = ask(&model, turn_request(user)).await;
    assert_eq!(message(&last)["content"], r#"{"status":"completed"}"#);

    assert_eq!(model.summariser_requests(), 1);
    assert_eq!(model.requests().len(), 4);
}

#[tokio::test]
async fn a_turn_request_that_merely_mentions_the_summariser_is_a_step() {
    let t = Trajectory::from_json(r#"{"final": {"status": "blocked"}}"#, "t").unwrap();
    let model = ScriptedModel::start(t.script().unwrap(), SUMMARY_PROMPT)
        .await
        .unwrap();
    // The summariser's words in a user message (not the system message) are no summariser call.
    let reply = ask(
        &model,
        turn_request(json!([{"role": "system", "content": "you are the agent"},
                            {"role": "user", "content": SUMMARY_PROMPT}])),
    )
    .await;
    assert_eq!(message(&reply)["content"], r#"{"status":"blocked"}"#);
    assert_eq!(model.summariser_requests(), 0);
}
