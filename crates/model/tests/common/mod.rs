//! Shared helpers for the model client's integration tests.
#![allow(dead_code, reason = "each test binary uses a part of these helpers")]
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_model::{ChatRequest, Completion, FinishReason, ModelClient, ModelConfig, StreamEvent};
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
        max_output_tokens: None,
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
        cache_write_tokens: 0,
        estimated: false,
    }
}

pub const LLAMACPP_PLAN_CALL_ID: &str =
    "call__0_update_plan_cmpl-52caf34a-6de6-41ad-8541-1413f9b37269";

/// What each recorded fixture must assemble to.
pub fn expected_fixture(name: &str) -> Completion {
    match name {
        "openai_text" => Completion {
            content: "Hello! How can I help you today?".into(),
            reasoning: String::new(),
            tool_calls: vec![],
            usage: Some(usage(19, 10, 29, 0)),
            finish_reason: Some(FinishReason::Stop),
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
            finish_reason: Some(FinishReason::ToolCalls),
        },
        "llamacpp_no_index" => Completion {
            content: "Let me check.".into(),
            reasoning: String::new(),
            tool_calls: vec![
                call("call_k2h8Qm", "search_media", r#"{"query":"Interstellar"}"#),
                call("call_p9Zx1", "get_weather", r#"{"location":"Tokyo"}"#),
            ],
            usage: Some(usage(312, 41, 353, 0)),
            finish_reason: Some(FinishReason::ToolCalls),
        },
        "deepseek_reasoning" => Completion {
            content: "1 + 1 = 2.".into(),
            reasoning: "The user asks about 1+1. That is 2.".into(),
            tool_calls: vec![],
            usage: Some(usage(13, 45, 58, 0)),
            finish_reason: Some(FinishReason::Stop),
        },
        "openrouter_crlf" => Completion {
            content: "Bonjour!".into(),
            reasoning: "Brief thought.".into(),
            tool_calls: vec![],
            usage: Some(usage(8, 12, 20, 0)),
            finish_reason: Some(FinishReason::Stop),
        },
        "llamacpp_python_plain" => Completion {
            content: " <<SYS>>\n[INST] <<SYS>>\n\nI would like to know what you are doing. I'm a teacher and I want to get rid of my cat from the living room. Do you have any idea how? It could be done. Just say hi in your class. [/INST] <<SYS".into(),
            finish_reason: Some(FinishReason::Length),
            ..Completion::default()
        },
        "llamacpp_python_cfc_plain" => Completion {
            content: "Welcome to the office.".into(),
            finish_reason: Some(FinishReason::Stop),
            ..Completion::default()
        },
        "llamacpp_python_tools_forced" => Completion {
            tool_calls: vec![call(
                "call__0_get_weather_cmpl-d30aa576-d249-46b0-8de3-805741255c4c",
                "get_weather",
                r#"{"city": "Paris" }"#,
            )],
            finish_reason: Some(FinishReason::ToolCalls),
            ..Completion::default()
        },
        "llamacpp_python_trunc_forced" => Completion {
            tool_calls: vec![call(
                LLAMACPP_PLAN_CALL_ID,
                "update_plan",
                r#"{"objective": "user", "steps": [{"step": "add_planStep", "status": "in_progress"}]}"#,
            )],
            finish_reason: Some(FinishReason::ToolCalls),
            ..Completion::default()
        },
        "llamacpp_python_tool_args_cut" => Completion {
            tool_calls: vec![call(
                "call__0_get_weather_cmpl-be9dc7bc-b037-4ad2-8de5-3fdabcb423c9",
                "get_weather",
                r#"{"city":"#,
            )],
            finish_reason: Some(FinishReason::ToolCalls),
            ..Completion::default()
        },
        other => panic!("no expectation for fixture {other}"),
    }
}
