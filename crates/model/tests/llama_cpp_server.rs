//! The client against a real llama.cpp server (llama-cpp-python 0.3.36, Gemma 3 270M Q4_K_M, both
//! from PyPI; `.ci/run` installs them). Skips with a notice when they are not installed, fails
//! under `MPA_REQUIRE_ALL_TESTS=1`.
//!
//! Regressions of issue 16: with `"content": null` in the history this server answered HTTP 500
//! to every tool turn; an over-context request came back as "network error: empty response body",
//! retried three times.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_model::{
    ChatRequest, Completion, FinishReason, ModelClient, ModelConfig, ModelError, StreamEvent,
    ToolChoice,
};
use mpa_protocol::{Message, Outcome, ToolCall, ToolSpec};
use mpa_test_support::{LlamaCppOptions, LlamaCppServer};
use serde_json::json;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn client(server: &LlamaCppServer) -> ModelClient {
    ModelClient::new(ModelConfig {
        base_url: server.base_url.clone(),
        model: server.model_id.clone(),
        temperature: Some(0.0),
        // Small: the 270M model rambles, and a test need not wait for it.
        max_output_tokens: Some(48),
        max_retries: 3,
        idle_timeout: Duration::from_secs(300),
        ..ModelConfig::default()
    })
    .unwrap()
}

fn weather_tool() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "get_weather".into(),
        description: "Get the current weather of a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"]}),
    }]
}

async fn ask(
    client: &ModelClient,
    req: &ChatRequest<'_>,
) -> (mpa_model::Result<Completion>, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let r = client
        .stream_chat(req, &CancellationToken::new(), &mut |e| events.push(e))
        .await;
    (r, events)
}

fn start() -> Option<LlamaCppServer> {
    LlamaCppServer::start(&LlamaCppOptions::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_turn_with_a_forced_call_and_its_result_is_accepted() {
    let Some(server) = tokio::task::spawn_blocking(start).await.unwrap() else {
        return;
    };
    let client = client(&server);
    let tools = weather_tool();

    // 1. The tool call, forced (without a tool choice this server drops the tools).
    let mut messages = vec![
        Message::system("You are a weather assistant. Use the tools."),
        Message::user("What is the weather in Paris?"),
    ];
    let req = ChatRequest::new(&messages, &tools)
        .with_tool_choice(ToolChoice::Function("get_weather".into()));
    let (result, _) = ask(&client, &req).await;
    let first = result.unwrap_or_else(|e| panic!("{e}\n{}", server.log_tail()));
    assert_eq!(first.tool_calls.len(), 1, "{first:?}");
    assert_eq!(first.tool_calls[0].name, "get_weather");
    assert!(
        matches!(
            first.finish_reason,
            Some(FinishReason::ToolCalls | FinishReason::Length)
        ),
        "{first:?}"
    );

    // 2. The history now holds an assistant message that only calls a tool, and the result:
    //    what this server answered with HTTP 500 while `content` went out as null.
    let call = ToolCall {
        id: first.tool_calls[0].id.clone(),
        name: "get_weather".into(),
        arguments: r#"{"city": "Paris"}"#.into(),
    };
    messages.push(Message::assistant("", vec![call.clone()]));
    messages.push(Message::tool(
        &call.id,
        "get_weather",
        "Paris: 18 °C, sunny",
        Outcome::Succeeded,
    ));
    for choice in [ToolChoice::Function("get_weather".into()), ToolChoice::Auto] {
        let req = ChatRequest::new(&messages, &tools).with_tool_choice(choice.clone());
        let (result, _) = ask(&client, &req).await;
        let answer = result.unwrap_or_else(|e| panic!("{choice:?}: {e}\n{}", server.log_tail()));
        assert!(
            !answer.tool_calls.is_empty() || !answer.content.trim().is_empty(),
            "{choice:?}: neither a tool call nor text: {answer:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_context_request_reports_model_context_exceeded_with_the_servers_reason() {
    let Some(server) = tokio::task::spawn_blocking(start).await.unwrap() else {
        return;
    };
    let client = client(&server);
    // Far beyond n_ctx = 2048 tokens.
    let messages = vec![
        Message::system("You are helpful."),
        Message::user("The quick brown fox jumps over the lazy dog. ".repeat(600)),
    ];
    let (result, events) = ask(&client, &ChatRequest::new(&messages, &[])).await;
    let err = result.unwrap_err();
    assert!(
        matches!(err, ModelError::ContextLengthExceeded { .. }),
        "{err:?}\n{}",
        server.log_tail()
    );
    assert_eq!(err.code(), "model_context_exceeded");
    assert!(!err.is_retryable());
    let text = err.to_string();
    assert!(text.contains("maximum context length is 2048"), "{text}");
    assert!(!text.contains("network"), "{text}");
    assert!(events.is_empty());

    // The server is fine afterwards: a short request still gets an answer.
    let short = [Message::user("Say hello.")];
    let (result, _) = ask(&client, &ChatRequest::new(&short, &[])).await;
    result.unwrap_or_else(|e| panic!("{e}\n{}", server.log_tail()));
}
