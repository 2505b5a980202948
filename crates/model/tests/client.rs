//! The client against the mock server: streaming, dialects, error classes, retries, cancellation
//! and what goes on the wire.

use crate::common;

use common::{KEY, call, client, config, hello, run, usage};
use mpa_model::{
    ChatRequest, FinishReason, ModelClient, ModelConfig, ModelError, NetworkFailure, StreamEvent,
};
use mpa_protocol::{ContentPart, ImageUrl, Message, Outcome, ToolCall, ToolSpec};
use mpa_test_support::{DEFAULT_REASONING, Dialect, MockModelServer, MockReply};
use serde_json::json;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn assert_secret_free(e: &ModelError) {
    for text in [e.to_string(), format!("{e:?}")] {
        assert!(!text.contains("SECRETKEY"), "key leaked: {text}");
        assert!(!text.contains(KEY), "key leaked: {text}");
    }
}

#[tokio::test]
async fn streams_text_as_events_and_assembles_it() {
    let server = MockModelServer::start().await;
    server.push(MockReply::text("Hello there, 世界! How are you?"));
    let (result, events) = run(&client(&server), &hello()).await;
    let completion = result.unwrap();
    assert_eq!(completion.content, "Hello there, 世界! How are you?");
    assert!(completion.tool_calls.is_empty());
    assert_eq!(completion.usage, Some(usage(10, 5, 15, 0)));
    assert_eq!(completion.finish_reason, Some(FinishReason::Stop));
    assert!(
        events.len() > 1,
        "text should arrive in several events: {events:?}"
    );
    let streamed: String = events
        .iter()
        .map(|e| match e {
            StreamEvent::Content(t) => t.as_str(),
            StreamEvent::Reasoning(_) => panic!("no reasoning expected"),
        })
        .collect();
    assert_eq!(streamed, completion.content);

    let body = &server.requests()[0];
    assert_eq!(body["model"], "mock-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert!(body.get("tools").is_none(), "no tools → no tools field");
    assert!(body.get("temperature").is_none());
    let headers = &server.request_headers()[0];
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(
        header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(header("accept"), Some("text/event-stream"));
    assert_eq!(header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn each_dialect_assembles_text_reasoning_and_tool_calls() {
    let server = MockModelServer::start().await;
    let client = client(&server);
    let calls = [
        (
            "call_1",
            "search_media",
            json!({"query": "Dune", "limit": 5}),
        ),
        (
            "call_2",
            "get_weather",
            json!({"city": "東京", "days": [1, 2]}),
        ),
    ];
    for dialect in [Dialect::OpenAi, Dialect::NoIndex, Dialect::Reasoning] {
        server.push(MockReply::text_and_tool_calls("Checking both.", &calls).dialect(dialect));
        let (result, events) = run(&client, &hello()).await;
        let completion = result.unwrap_or_else(|e| panic!("{dialect:?}: {e}"));
        assert_eq!(completion.content, "Checking both.", "{dialect:?}");
        assert_eq!(
            completion.tool_calls,
            calls
                .iter()
                .map(|(id, name, args)| call(id, name, &args.to_string()))
                .collect::<Vec<ToolCall>>(),
            "{dialect:?}"
        );
        assert_eq!(completion.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(completion.usage, Some(usage(10, 5, 15, 0)), "{dialect:?}");
        let expected_reasoning = if dialect == Dialect::Reasoning {
            DEFAULT_REASONING
        } else {
            ""
        };
        assert_eq!(completion.reasoning, expected_reasoning, "{dialect:?}");
        let reasoning_events = events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Reasoning(_)))
            .count();
        assert_eq!(reasoning_events > 0, dialect == Dialect::Reasoning);
    }
}

#[tokio::test]
async fn auth_failure_is_classified_not_retried_and_never_shows_the_key() {
    let server = MockModelServer::start().await;
    server.push(MockReply::status(
        401,
        &format!(
            r#"{{"error":{{"message":"Incorrect API key provided: {KEY}. Authorization: Bearer {KEY}","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
        ),
    ));
    let client = client(&server);
    let (result, _) = run(&client, &hello()).await;
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::Auth {
                status: Some(401),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.code(), "model_auth");
    assert!(!err.is_retryable());
    assert!(
        err.to_string().contains("Incorrect API key provided"),
        "{err}"
    );
    assert_secret_free(&err);
    assert_eq!(server.request_count(), 1);
    assert!(!format!("{client:?}").contains("SECRETKEY"));
    assert!(!format!("{:?}", config(&server)).contains("SECRETKEY"));
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_retried_then_succeeds() {
    let server = MockModelServer::start().await;
    server.push(
        MockReply::status(
            429,
            r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
        )
        .header("Retry-After", "1"),
    );
    server.push(MockReply::text("after the wait"));
    let (result, _) = run(&client(&server), &hello()).await;
    assert_eq!(result.unwrap().content, "after the wait");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_and_give_up_after_max_retries() {
    let server = MockModelServer::start().await;
    server.push(MockReply::status(500, "upstream exploded"));
    server.push(MockReply::text("recovered"));
    let (result, _) = run(&client(&server), &hello()).await;
    assert_eq!(result.unwrap().content, "recovered");
    assert_eq!(server.request_count(), 2);

    let server = MockModelServer::start().await;
    server.set_default(MockReply::status(
        503,
        r#"{"error":{"message":"overloaded"}}"#,
    ));
    let client = ModelClient::new(ModelConfig {
        max_retries: 1,
        ..config(&server)
    })
    .unwrap();
    let (result, _) = run(&client, &hello()).await;
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::Server {
                status: Some(503),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "model server error (HTTP 503): overloaded");
    assert_eq!(server.request_count(), 2, "one try plus max_retries = 1");
}

#[tokio::test]
async fn stream_dropped_after_first_byte_is_a_network_error_without_retry() {
    let server = MockModelServer::start().await;
    server.push(MockReply::text("a fairly long answer that never completes").drop_after(2));
    server.set_default(MockReply::text("a retry would get this"));
    let (result, events) = run(&client(&server), &hello()).await;
    let err = result.unwrap_err();
    assert!(matches!(err, ModelError::Network { .. }), "{err:?}");
    assert!(
        err.to_string().contains("stream ended before completion"),
        "{err}"
    );
    assert_eq!(server.request_count(), 1, "no retry once bytes arrived");
    assert!(!events.is_empty(), "the text before the drop was streamed");
    assert_secret_free(&err);
}

#[tokio::test]
async fn stream_closed_cleanly_without_done_or_finish_is_a_network_error() {
    let server = MockModelServer::start().await;
    server.push(MockReply::raw_sse(vec![
        r#"{"choices":[{"index":0,"delta":{"content":"partial"}}]}"#.into(),
    ]));
    let (result, _) = run(&client(&server), &hello()).await;
    let err = result.unwrap_err();
    assert!(matches!(err, ModelError::Network { .. }), "{err:?}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn cancelling_a_stalled_stream_returns_cancelled() {
    let server = MockModelServer::start().await;
    // Chunk 1 is the role, chunk 2 the first text; then the server hangs.
    server.push(MockReply::text("one two three four").stall_after(2));
    let client = client(&server);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let mut events = Vec::new();
    let result = client
        .stream_chat(&hello(), &cancel, &mut |e| {
            events.push(e);
            trigger.cancel();
        })
        .await;
    assert_eq!(result.unwrap_err(), ModelError::Cancelled);
    assert_eq!(events.len(), 1);

    // Cancelled from another task while waiting on a silent server.
    server.push(MockReply::text("never").stall_after(0));
    let cancel = CancellationToken::new();
    let canceller = {
        let cancel = cancel.clone();
        let server_requests = server.request_count();
        let waiter = std::sync::Arc::new(server);
        let w = waiter.clone();
        tokio::spawn(async move {
            assert!(
                w.wait_for_requests(server_requests + 1, Duration::from_secs(20))
                    .await
            );
            cancel.cancel();
            w
        })
    };
    let result = client.stream_chat(&hello(), &cancel, &mut |_| {}).await;
    assert_eq!(result.unwrap_err(), ModelError::Cancelled);
    let server = canceller.await.unwrap();
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn cancel_during_retry_backoff_returns_cancelled() {
    let server = MockModelServer::start().await;
    server.set_default(MockReply::status(429, "slow down").header("Retry-After", "30"));
    let client = client(&server);
    let cancel = CancellationToken::new();
    let server = std::sync::Arc::new(server);
    let task = {
        let cancel = cancel.clone();
        let server = server.clone();
        tokio::spawn(async move {
            assert!(server.wait_for_requests(1, Duration::from_secs(20)).await);
            cancel.cancel();
        })
    };
    let result = client.stream_chat(&hello(), &cancel, &mut |_| {}).await;
    assert_eq!(result.unwrap_err(), ModelError::Cancelled);
    task.await.unwrap();
    assert_eq!(server.request_count(), 1);

    let already = CancellationToken::new();
    already.cancel();
    let result = client.stream_chat(&hello(), &already, &mut |_| {}).await;
    assert_eq!(result.unwrap_err(), ModelError::Cancelled);
    assert_eq!(server.request_count(), 1, "a cancelled call sends nothing");
}

#[tokio::test]
async fn silence_longer_than_idle_timeout_is_a_network_error() {
    let server = MockModelServer::start().await;
    server.push(MockReply::text("hello world").stall_after(2));
    let client = ModelClient::new(ModelConfig {
        idle_timeout: Duration::from_millis(300),
        ..config(&server)
    })
    .unwrap();
    let (result, _) = run(&client, &hello()).await;
    let err = result.unwrap_err();
    assert!(matches!(err, ModelError::Network { .. }), "{err:?}");
    assert!(err.to_string().contains("stalled"), "{err}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn context_length_400_is_classified_and_not_retried() {
    let server = MockModelServer::start().await;
    server.push(MockReply::status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
    ));
    let (result, _) = run(&client(&server), &hello()).await;
    let err = result.unwrap_err();
    assert!(err.is_context_exceeded(), "{err:?}");
    assert_eq!(err.code(), "model_context_exceeded");
    assert!(err.to_string().contains("maximum context length is 128000"));
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn other_4xx_is_a_bad_response_and_not_retried() {
    let server = MockModelServer::start().await;
    server.push(MockReply::status(
        404,
        r#"{"error":"model 'nope' not found"}"#,
    ));
    let (result, _) = run(&client(&server), &hello()).await;
    let err = result.unwrap_err();
    assert_eq!(
        err,
        ModelError::BadResponse {
            status: Some(404),
            message: "model 'nope' not found".into()
        }
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn unknown_fields_missing_usage_and_missing_done_are_tolerated() {
    let server = MockModelServer::start().await;
    server.push(MockReply::raw_sse(vec![
        r#"{"id":"x","object":"chat.completion.chunk","brand_new_field":{"a":[1,2]},"choices":[{"delta":{"role":"assistant","content":null,"audio":null},"finish_reason":null,"mystery":1}]}"#.into(),
        r#"{"choices":[{"delta":{"content":"Hi","tool_calls":null}}],"usage":null}"#.into(),
        r#"{"choices":[{"delta":{"content":" there"}}]}"#.into(),
        r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#.into(),
    ]));
    let (result, _) = run(&client(&server), &hello()).await;
    let completion = result.unwrap();
    assert_eq!(completion.content, "Hi there");
    assert_eq!(completion.usage, None);
    assert_eq!(completion.finish_reason, Some(FinishReason::Stop));

    server.push(MockReply::text("no usage here").without_usage());
    let (result, _) = run(&client(&server), &hello()).await;
    assert_eq!(result.unwrap().usage, None);
}

#[tokio::test]
async fn error_chunk_inside_a_stream_is_classified_without_retry() {
    let server = MockModelServer::start().await;
    server.push(MockReply::raw_sse(vec![
        r#"{"choices":[{"delta":{"content":"Start"}}]}"#.into(),
        r#"{"error":{"message":"Rate limit exceeded: free-models-per-min","code":429}}"#.into(),
    ]));
    server.set_default(MockReply::text("a retry would get this"));
    let (result, _) = run(&client(&server), &hello()).await;
    let err = result.unwrap_err();
    assert!(matches!(err, ModelError::RateLimited { .. }), "{err:?}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn non_streamed_json_answer_is_accepted() {
    let server = MockModelServer::start().await;
    server.push(MockReply::status(
        200,
        r#"{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Plain answer","tool_calls":[{"id":"call_9","type":"function","function":{"name":"lookup","arguments":"{\"k\":1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#,
    ));
    let (result, events) = run(&client(&server), &hello()).await;
    let completion = result.unwrap();
    assert_eq!(completion.content, "Plain answer");
    assert_eq!(
        completion.tool_calls,
        vec![call("call_9", "lookup", r#"{"k":1}"#)]
    );
    assert_eq!(completion.usage, Some(usage(3, 4, 7, 0)));
    assert_eq!(events, vec![StreamEvent::Content("Plain answer".into())]);
}

#[tokio::test]
async fn connection_refused_is_a_retried_network_error() {
    // A port that was just free: nothing listens there.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let client = ModelClient::new(ModelConfig {
        base_url: format!("http://127.0.0.1:{port}/v1/"),
        api_key: Some(KEY.into()),
        model: "m".into(),
        max_retries: 1,
        ..ModelConfig::default()
    })
    .unwrap();
    let (result, _) = run(&client, &hello()).await;
    let err = result.unwrap_err();
    assert!(matches!(err, ModelError::Network { .. }), "{err:?}");
    assert!(err.is_retryable());
    assert!(
        err.to_string()
            .contains("could not connect to http://127.0.0.1:"),
        "{err}"
    );
    assert_secret_free(&err);
}

/// Regression: core told "nothing answers at LLM_BASE_URL" from other network failures by the
/// wording of the message; the client now says which failure it was.
#[tokio::test]
async fn unreachable_model_was_detected_by_message_prefix() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let refused = ModelClient::new(ModelConfig {
        base_url: format!("http://127.0.0.1:{port}/v1/"),
        model: "m".into(),
        max_retries: 0,
        ..ModelConfig::default()
    })
    .unwrap();
    let err = run(&refused, &hello()).await.0.unwrap_err();
    assert!(err.is_unreachable(), "{err:?}");
    assert!(matches!(
        err,
        ModelError::Network {
            failure: NetworkFailure::Unreachable,
            ..
        }
    ));

    // A name that does not resolve (`.invalid` never does, RFC 6761) is unreachable too.
    let unresolved = ModelClient::new(ModelConfig {
        base_url: "http://mpa-model.invalid/v1/".into(),
        model: "m".into(),
        max_retries: 0,
        ..ModelConfig::default()
    })
    .unwrap();
    let err = run(&unresolved, &hello()).await.0.unwrap_err();
    assert!(err.is_unreachable(), "{err:?}");

    // A server that answers and then breaks off is there: not unreachable.
    let server = MockModelServer::start().await;
    server.push(MockReply::text("a fairly long answer that never completes").drop_after(2));
    let err = run(&client(&server), &hello()).await.0.unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::Network {
                failure: NetworkFailure::Interrupted,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!err.is_unreachable());
}

#[tokio::test]
async fn request_body_carries_images_tool_calls_and_no_host_fields() {
    let server = MockModelServer::start().await;
    server.push(MockReply::text("ok"));
    let client = ModelClient::new(ModelConfig {
        temperature: Some(0.3),
        ..config(&server)
    })
    .unwrap();
    let mut tool_result =
        Message::tool("call_1", "view_poster", "poster shown", Outcome::Succeeded);
    tool_result
        .metadata
        .insert("moviepilot_task_plan".into(), json!({"steps": []}));
    let messages = vec![
        Message::system("You are helpful."),
        Message::user_parts(vec![
            ContentPart::Text {
                text: "What film is this?".into(),
            },
            ContentPart::ImageUrl {
                image_url: ImageUrl::new("data:image/png;base64,iVBORw0KGgo="),
            },
        ]),
        Message::assistant("", vec![call("call_1", "view_poster", r#"{"id":7}"#)]),
        tool_result,
    ];
    let tools = vec![ToolSpec {
        name: "view_poster".into(),
        description: "Show a poster".into(),
        parameters: json!({"type": "object", "properties": {"id": {"type": "integer"}}}),
    }];
    let req = ChatRequest::new(&messages, &tools);
    let (result, _) = run(&client, &req).await;
    result.unwrap();
    let body = &server.requests()[0];
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": [
                {"type": "text", "text": "What film is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
            ]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "view_poster", "arguments": "{\"id\":7}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "poster shown"}
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "view_poster", "description": "Show a poster",
            "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}}}}])
    );
    assert_eq!(body["tool_choice"], json!("auto"));
    assert_eq!(body["temperature"], json!(0.3));
    assert_eq!(
        body["max_tokens"],
        json!(4096),
        "unknown model: the default limit"
    );
}

#[tokio::test]
async fn empty_model_name_is_a_config_error() {
    let server = MockModelServer::start().await;
    let client = ModelClient::new(ModelConfig {
        model: String::new(),
        ..config(&server)
    })
    .unwrap();
    let (result, _) = run(&client, &hello()).await;
    assert!(matches!(result.unwrap_err(), ModelError::Config { .. }));
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn an_html_page_instead_of_a_stream_is_a_clear_bad_response() {
    let server = MockModelServer::start().await;
    server.push(
        MockReply::raw_bytes(vec![b"<html><body>MoviePilot login</body></html>".to_vec()])
            .header("Content-Type", "text/html; charset=utf-8"),
    );
    let (result, _) = run(&client(&server), &hello()).await;
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::BadResponse {
                status: Some(200),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("HTML page"), "{err}");
    assert_eq!(server.request_count(), 1);
}
