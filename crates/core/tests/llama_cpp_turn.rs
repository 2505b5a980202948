//! A whole tool-using turn of the host against a real llama.cpp server (issue 16: before the fix
//! this server answered HTTP 500 to every request that followed a tool call). The mock model
//! server scripts the first answer — a call of `test_echo`, which a 270M model would not choose
//! reliably — and relays every later request, byte for byte, to llama-cpp-python's server, so the
//! request the host builds after a tool result is answered by the real server.
//!
//! Skips with a notice when the server is not installed; fails under `MPA_REQUIRE_ALL_TESTS=1`.

use crate::common::host::TestHost;
use mpa_protocol::{Event, Outcome, Role, TurnStatus};
use mpa_test_support::{LlamaCppOptions, LlamaCppServer, MockModelServer, MockReply};
use serde_json::{Value, json};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_using_turn_completes_against_a_real_llama_cpp_server() {
    let opts = LlamaCppOptions {
        // The host's system prompt and tool schemas need more than the 2,048 of the default.
        n_ctx: 8192,
        // Plain chatml: this server's function-calling format refuses a streamed `auto` tool
        // choice and, answered unstreamed, a 270M model calls tools forever; under chatml it
        // reads the tool result and answers in text, which is what this test needs to see.
        chat_format: Some("chatml".to_owned()),
        ..LlamaCppOptions::default()
    };
    let Some(llama) = tokio::task::spawn_blocking(move || LlamaCppServer::start(&opts))
        .await
        .unwrap()
    else {
        return;
    };
    let mock = MockModelServer::start().await;
    mock.push(MockReply::tool_calls(&[(
        "call_weather",
        "test_echo",
        json!({"text": "Paris: 18 °C, sunny"}),
    )]));
    mock.set_default(MockReply::forward_to(&llama.base_url));

    let model_id = llama.model_id.clone();
    let host = TestHost::builder(&mock, &model_id)
        .model(|m| {
            m.temperature = Some(0.0);
            // The 270M model rambles; a short answer is enough to show the turn ends well.
            m.max_output_tokens = Some(48);
            m.max_retries = 1;
            m.idle_timeout = Duration::from_secs(300);
        })
        // A model that keeps calling tools still ends: a handful of calls, then the limit.
        .config(|c| c.max_iterations = 4)
        .build()
        .await;
    let (agent, actor) = (&host.agent, &host.actor);

    let mut rx = agent
        .submit(
            actor,
            "llama-tool-turn",
            "test",
            "What is the weather in Paris? Use test_echo, then answer in one sentence.".into(),
            vec![],
        )
        .await
        .unwrap();
    let mut events = Vec::new();
    let (status, final_text) = loop {
        match rx.recv().await.expect("the turn ended without TurnEnded") {
            Event::TurnEnded {
                status, final_text, ..
            } => break (status, final_text),
            ev => events.push(ev),
        }
    };
    let errors: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::Error { .. }))
        .collect();
    assert!(
        errors.is_empty(),
        "the turn reported errors: {errors:?}\n{}",
        llama.log_tail()
    );
    // Completed, or partial when the 48-token limit cut the answer: the server answered the
    // request that carries the tool result, instead of HTTP 500.
    assert!(
        matches!(status, TurnStatus::Completed | TurnStatus::Partial),
        "{status:?}: {final_text:?}\n{}",
        llama.log_tail()
    );

    let requests = mock.requests();
    assert!(requests.len() >= 2, "{requests:?}");
    // The first relayed request: the assistant message that only calls a tool goes out with
    // `content: ""` (null made this server fail), followed by the tool's result.
    let second = &requests[1];
    let messages = second["messages"].as_array().unwrap();
    let call_idx = messages
        .iter()
        .position(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .expect("the tool call is in the relayed request");
    assert_eq!(messages[call_idx]["content"], Value::String(String::new()));
    assert_eq!(messages[call_idx + 1]["role"], "tool");
    assert_eq!(messages[call_idx + 1]["tool_call_id"], "call_weather");

    // The chat keeps the call, its succeeded result and the real server's answer.
    let chat = agent.chat_for(actor, "llama-tool-turn").await.unwrap();
    let tool_result = chat
        .agent_messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .expect("the tool result is saved");
    assert_eq!(tool_result.outcome, Some(Outcome::Succeeded));
    let last = chat.agent_messages.last().unwrap();
    assert_eq!(last.role, Role::Assistant);
    assert!(
        !final_text.trim().is_empty() || !last.tool_calls.is_empty(),
        "no answer from the real server: {final_text:?}"
    );
}
