//! How local model servers (llama.cpp, Ollama, vLLM) really behave, against the mock: requests
//! every server accepts, honest endings, errors a user can act on, output limits that fit.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common;

use common::{KEY, call, client, config, hello, run};
use mpa_model::{
    ArgumentsStatus, ChatRequest, FinishReason, ModelClient, ModelConfig, StreamEvent, ToolChoice,
};
use mpa_protocol::{Message, Outcome, ToolSpec};
use mpa_test_support::{
    LLAMACPP_CONTENT_NULL_500, LLAMACPP_OVERFLOW_400, MockModelServer, MockReply,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn with(server: &MockModelServer, f: impl FnOnce(&mut ModelConfig)) -> ModelClient {
    let mut cfg = config(server);
    f(&mut cfg);
    ModelClient::new(cfg).unwrap()
}

fn plan_tool() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "update_plan".into(),
        description: "Update the task plan".into(),
        parameters: json!({"type": "object", "properties": {"objective": {"type": "string"}}}),
    }]
}

/// A history with an assistant message that only calls a tool, and the tool's result.
fn tool_history() -> Vec<Message> {
    vec![
        Message::system("You are helpful."),
        Message::user("plan it"),
        Message::assistant(
            "",
            vec![call("call_1", "update_plan", r#"{"objective":"user"}"#)],
        ),
        Message::tool("call_1", "update_plan", "plan updated", Outcome::Succeeded),
    ]
}

#[tokio::test]
async fn tool_history_goes_out_with_string_content_auto_choice_and_a_limit() {
    let server = MockModelServer::start().await;
    server.push(MockReply::text("done"));
    let (messages, tools) = (tool_history(), plan_tool());
    let (result, _) = run(&client(&server), &ChatRequest::new(&messages, &tools)).await;
    result.unwrap();
    let body = &server.requests()[0];
    let assistant = &body["messages"][2];
    assert_eq!(assistant["content"], json!(""), "never null: {assistant}");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
    assert_eq!(body["messages"][3]["tool_call_id"], "call_1");
    assert_eq!(body["tool_choice"], json!("auto"));
    assert_eq!(body["max_tokens"], json!(4096));
    assert!(body.get("max_completion_tokens").is_none());
}

#[tokio::test]
async fn a_forced_tool_choice_names_the_function() {
    let server = MockModelServer::start().await;
    server.push(MockReply::fixture("llamacpp_python_tools_forced"));
    let messages = [Message::user("weather in Paris?")];
    let tools = plan_tool();
    let req = ChatRequest::new(&messages, &tools)
        .with_tool_choice(ToolChoice::Function("update_plan".into()));
    let (result, _) = run(&client(&server), &req).await;
    let completion = result.unwrap();
    assert_eq!(completion.tool_calls.len(), 1);
    assert_eq!(
        server.requests()[0]["tool_choice"],
        json!({"type": "function", "function": {"name": "update_plan"}})
    );
}

#[tokio::test]
async fn output_limits_come_from_config_then_catalogue_then_the_default() {
    let server = MockModelServer::start().await;
    server.set_default(MockReply::text("ok"));
    let cases: &[(&str, Option<u32>, &str, Value)] = &[
        ("mock-model", None, "max_tokens", json!(4096)),
        ("gpt-4o", None, "max_tokens", json!(16_384)),
        ("deepseek-chat", Some(1000), "max_tokens", json!(1000)),
        ("o3-mini", None, "max_completion_tokens", json!(100_000)),
    ];
    for (i, (model, configured, field, want)) in cases.iter().enumerate() {
        let client = with(&server, |c| {
            c.model = (*model).into();
            c.max_output_tokens = *configured;
        });
        assert_eq!(
            mpa_model::effective_max_output_tokens(client.config()),
            want.as_u64().map(|n| n as u32)
        );
        run(&client, &hello()).await.0.unwrap();
        let body = &server.requests()[i];
        assert_eq!(body[field], *want, "{model}: {body}");
    }
    // 0: no limit at all, the server decides.
    let client = with(&server, |c| c.max_output_tokens = Some(0));
    assert_eq!(
        mpa_model::effective_max_output_tokens(client.config()),
        None
    );
    run(&client, &hello()).await.0.unwrap();
    let body = server.requests().pop().unwrap();
    assert!(body.get("max_tokens").is_none() && body.get("max_completion_tokens").is_none());
}

#[tokio::test]
async fn an_empty_200_stream_is_asked_again_unstreamed_and_reports_the_overflow() {
    let server = MockModelServer::start().await;
    server.push(MockReply::empty_stream());
    server.push(MockReply::status(400, LLAMACPP_OVERFLOW_400));
    server.set_default(MockReply::text("a third request would get this"));
    let (result, events) = run(&client(&server), &hello()).await;
    let err = result.unwrap_err();
    assert!(err.is_context_exceeded(), "{err:?}");
    assert_eq!(err.code(), "model_context_exceeded");
    assert!(!err.is_retryable());
    assert!(
        err.to_string()
            .contains("This model's maximum context length is 2048 tokens"),
        "{err}"
    );
    assert!(!err.to_string().contains("network"), "{err}");
    assert!(events.is_empty());
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one streamed, one not, no retries");
    assert_eq!(requests[0]["stream"], json!(true));
    assert_eq!(requests[1]["stream"], json!(false));
    assert!(requests[1].get("stream_options").is_none());
    let accept = |i: usize| {
        server.request_headers()[i]
            .iter()
            .find(|(k, _)| k == "accept")
            .map(|(_, v)| v.clone())
    };
    assert_eq!(accept(1).as_deref(), Some("application/json"));
    // Everything else about the request is the same.
    let strip = |mut v: Value| {
        let o = v.as_object_mut().unwrap();
        o.remove("stream");
        o.remove("stream_options");
        v
    };
    assert_eq!(strip(requests[0].clone()), strip(requests[1].clone()));
}

#[tokio::test]
async fn the_unstreamed_retry_can_also_just_answer() {
    let server = MockModelServer::start().await;
    server.push(MockReply::raw_bytes(vec![b": keep-alive\n\n".to_vec()]));
    server.push(MockReply::text_and_tool_calls(
        "Checking.",
        &[("call_7", "update_plan", json!({"objective": "x"}))],
    ));
    let (result, events) = run(&client(&server), &hello()).await;
    let completion = result.unwrap();
    assert_eq!(completion.content, "Checking.");
    assert_eq!(
        completion.tool_calls,
        vec![call("call_7", "update_plan", r#"{"objective":"x"}"#)]
    );
    assert_eq!(completion.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(events, vec![StreamEvent::Content("Checking.".into())]);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn nothing_streamed_nor_unstreamed_is_a_clear_error_sent_twice_only() {
    let server = MockModelServer::start().await;
    server.push(MockReply::empty_stream());
    server.push(MockReply::status(200, ""));
    server.set_default(MockReply::text("a third request would get this"));
    let (result, _) = run(&client(&server), &hello()).await;
    let err = result.unwrap_err();
    assert!(
        err.to_string().contains("HTTP 200 with nothing in it"),
        "{err}"
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_validation_500_is_sent_once_and_says_what_was_wrong() {
    let server = MockModelServer::start().await;
    server.push(MockReply::status(500, LLAMACPP_CONTENT_NULL_500));
    server.set_default(MockReply::text("a retry would get this"));
    let (result, _) = run(&client(&server), &hello()).await;
    let err = result.unwrap_err();
    assert_eq!(err.code(), "model_invalid_request");
    assert!(!err.is_retryable());
    let text = err.to_string();
    assert!(
        text.contains(
            "ChatCompletionRequestAssistantMessage.content: Input should be a valid string"
        ),
        "{text}"
    );
    assert!(!text.contains("venv/lib"), "{text}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn deterministic_4xx_are_sent_once() {
    for status in [400, 404, 413, 422] {
        let server = MockModelServer::start().await;
        server.push(MockReply::status(
            status,
            r#"{"error":{"message":"messages.0.role: unknown role 'robot'"}}"#,
        ));
        server.set_default(MockReply::text("a retry would get this"));
        let (result, _) = run(&client(&server), &hello()).await;
        let err = result.unwrap_err();
        assert!(!err.is_retryable(), "{status}: {err:?}");
        assert!(err.to_string().contains("unknown role 'robot'"), "{err}");
        assert_eq!(server.request_count(), 1, "{status}");
    }
}

#[tokio::test]
async fn context_errors_of_streamed_servers_are_never_retried() {
    // llama.cpp's llama-server refuses with 400 before streaming; some proxies send it in-stream.
    let server = MockModelServer::start().await;
    server.push(MockReply::status(
        400,
        r#"{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}"#,
    ));
    server.push(MockReply::raw_sse(vec![
        r#"{"error":{"message":"the input length exceeds the context length","code":500}}"#.into(),
    ]));
    server.set_default(MockReply::text("a retry would get this"));
    let client = client(&server);
    for _ in 0..2 {
        let (result, _) = run(&client, &hello()).await;
        let err = result.unwrap_err();
        assert!(err.is_context_exceeded(), "{err:?}");
    }
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_refused_output_limit_is_refitted_once() {
    // vLLM counts the requested completion against its window.
    let server = MockModelServer::start().await;
    server.push(MockReply::status(
        400,
        r#"{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9096 tokens (5000 in the messages, 4096 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
    ));
    server.push(MockReply::text("fits now"));
    let (result, _) = run(&client(&server), &hello()).await;
    assert_eq!(result.unwrap().content, "fits now");
    let requests = server.requests();
    assert_eq!(requests[0]["max_tokens"], json!(4096));
    assert_eq!(requests[1]["max_tokens"], json!(3192));

    // OpenAI's reasoning models want the other name; a second refusal is final.
    let server = MockModelServer::start().await;
    server.set_default(MockReply::status(
        400,
        r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#,
    ));
    let (result, _) = run(&client(&server), &hello()).await;
    assert_eq!(result.unwrap_err().code(), "model_invalid_request");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1]["max_completion_tokens"], json!(4096));
    assert!(requests[1].get("max_tokens").is_none());
}

#[tokio::test]
async fn an_answer_cut_by_the_output_limit_says_so() {
    let server = MockModelServer::start().await;
    server.push(MockReply::text("The films are: Dune, Arri").finish_reason("length"));
    let (result, _) = run(&client(&server), &hello()).await;
    let completion = result.unwrap();
    assert_eq!(completion.finish_reason, Some(FinishReason::Length));
    assert!(completion.is_truncated());
    assert!(!completion.is_empty_answer());
}

#[tokio::test]
async fn cut_off_tool_arguments_are_flagged_although_finish_says_tool_calls() {
    let server = MockModelServer::start().await;
    server.push(MockReply::fixture("llamacpp_python_tool_args_cut"));
    server.push(MockReply::fixture("llamacpp_python_trunc_forced"));
    let client = client(&server);
    let (result, _) = run(&client, &hello()).await;
    let cut = result.unwrap();
    assert_eq!(cut.finish_reason, Some(FinishReason::ToolCalls));
    assert!(cut.has_cut_off_tool_calls());
    assert!(cut.is_truncated());
    assert_eq!(
        cut.tool_call_statuses().map(|(_, s)| s).collect::<Vec<_>>(),
        vec![ArgumentsStatus::CutOff]
    );
    let (result, _) = run(&client, &hello()).await;
    let whole = result.unwrap();
    assert!(!whole.is_truncated());
    assert_eq!(
        whole
            .tool_call_statuses()
            .map(|(_, s)| s)
            .collect::<Vec<_>>(),
        vec![ArgumentsStatus::Complete]
    );
}

#[tokio::test]
async fn an_empty_answer_is_recognisable() {
    let server = MockModelServer::start().await;
    server.push(MockReply::text("").reasoning("thinking only"));
    let (result, _) = run(&client(&server), &hello()).await;
    let completion = result.unwrap();
    assert!(completion.is_empty_answer());
    assert_eq!(completion.finish_reason, Some(FinishReason::Stop));
}

#[tokio::test]
async fn complete_chat_asks_for_one_json_answer() {
    let server = MockModelServer::start().await;
    server.push(MockReply::text("whole").usage(7, 2));
    let client = client(&server);
    let mut events = Vec::new();
    let completion = client
        .complete_chat(&hello(), &CancellationToken::new(), &mut |e| events.push(e))
        .await
        .unwrap();
    assert_eq!(completion.content, "whole");
    assert_eq!(completion.usage.unwrap().total_tokens, 9);
    assert_eq!(events, vec![StreamEvent::Content("whole".into())]);
    let body = &server.requests()[0];
    assert_eq!(body["stream"], json!(false));
    assert!(body.get("stream_options").is_none());
    let auth = server.request_headers()[0]
        .iter()
        .any(|(k, v)| k == "authorization" && v == &format!("Bearer {KEY}"));
    assert!(auth);
}

#[tokio::test]
async fn complete_chat_still_reads_a_stream_from_a_server_that_ignores_stream_false() {
    let server = MockModelServer::start().await;
    server.push(MockReply::fixture("llamacpp_python_cfc_plain"));
    let completion = client(&server)
        .complete_chat(&hello(), &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(completion.content, "Welcome to the office.");
    assert_eq!(server.requests()[0]["stream"], json!(false));
}
