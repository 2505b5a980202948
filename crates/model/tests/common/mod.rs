//! Shared helpers for the model client's integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use mpa_model::{ChatRequest, Completion, ModelClient, ModelConfig, StreamEvent};
use mpa_protocol::{Message, ToolCall, Usage};
use mpa_test_support::MockModelServer;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Shaped like a real key so the scrubber's pattern rules are exercised too.
pub const KEY: &str = "sk-test-SECRETKEY-0123456789";

pub fn config(server: &MockModelServer) -> ModelConfig {
    ModelConfig {
        base_url: server.base_url.clone(),
        api_key: Some(KEY.to_owned()),
        model: "mock-model".to_owned(),
        temperature: None,
        max_retries: 3,
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(20),
    }
}

pub fn client(server: &MockModelServer) -> ModelClient {
    ModelClient::new(config(server)).unwrap()
}

static HELLO: std::sync::LazyLock<Vec<Message>> =
    std::sync::LazyLock::new(|| vec![Message::user("hello")]);

pub fn hello() -> ChatRequest<'static> {
    ChatRequest::new(&HELLO, &[])
}

/// Runs one call, returning its result and every event it emitted.
pub async fn run(
    client: &ModelClient,
    req: &ChatRequest<'_>,
) -> (mpa_model::Result<Completion>, Vec<StreamEvent>) {
    let cancel = CancellationToken::new();
    let mut events = Vec::new();
    let r = client
        .stream_chat(req, &cancel, &mut |e| events.push(e))
        .await;
    (r, events)
}

pub fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

pub fn usage(input: u64, output: u64, total: u64, cache: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: total,
        cache_read_tokens: cache,
    }
}

/// What each recorded fixture must assemble to.
pub fn expected_fixture(name: &str) -> Completion {
    match name {
        "openai_text" => Completion {
            content: "Hello! How can I help you today?".into(),
            reasoning: String::new(),
            tool_calls: vec![],
            usage: Some(usage(19, 10, 29, 0)),
            finish_reason: Some("stop".into()),
        },
        "openai_tool_calls" => Completion {
            content: String::new(),
            reasoning: String::new(),
            tool_calls: vec![
                call(
                    "call_abc123",
                    "get_weather",
                    r#"{"location": "Paris, France", "unit": "celsius"}"#,
                ),
                call(
                    "call_def456",
                    "search_media",
                    r#"{"query": "Dune", "year": 2021}"#,
                ),
            ],
            usage: Some(usage(82, 47, 129, 64)),
            finish_reason: Some("tool_calls".into()),
        },
        "llamacpp_no_index" => Completion {
            content: "Let me check.".into(),
            reasoning: String::new(),
            tool_calls: vec![
                call("call_k2h8Qm", "search_media", r#"{"query":"Interstellar"}"#),
                call("call_p9Zx1", "get_weather", r#"{"location":"Tokyo"}"#),
            ],
            usage: Some(usage(312, 41, 353, 0)),
            finish_reason: Some("tool_calls".into()),
        },
        "deepseek_reasoning" => Completion {
            content: "1 + 1 = 2.".into(),
            reasoning: "The user asks about 1+1. That is 2.".into(),
            tool_calls: vec![],
            usage: Some(usage(13, 45, 58, 0)),
            finish_reason: Some("stop".into()),
        },
        "openrouter_crlf" => Completion {
            content: "Bonjour!".into(),
            reasoning: "Brief thought.".into(),
            tool_calls: vec![],
            usage: Some(usage(8, 12, 20, 0)),
            finish_reason: Some("stop".into()),
        },
        other => panic!("no expectation for fixture {other}"),
    }
}
