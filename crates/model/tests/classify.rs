//! Classifying HTTP and stream failures; Retry-After.

use mpa_model::chunk::WireError;
use mpa_model::classify::*;
use mpa_model::error::ModelError;
use std::time::{Duration, UNIX_EPOCH};

#[test]
fn retry_after_seconds_and_dates() {
    let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // 1994-11-06 08:49:37
    assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
    assert_eq!(
        parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now),
        Some(Duration::from_secs(10))
    );
    assert_eq!(
        parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now),
        Some(Duration::ZERO)
    );
    assert_eq!(parse_retry_after("soon", now), None);
}

/// llama-cpp-python 0.3.36's answer to an assistant message with `"content": null` (recorded).
const CONTENT_NULL_500: &str = r#"{"error":{"message":"7 validation errors:\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestSystemMessage', 'role'), 'msg': \"Input should be 'system'\", 'input': 'assistant', 'ctx': {'expected': \"'system'\"}}\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestUserMessage', 'role'), 'msg': \"Input should be 'user'\", 'input': 'assistant', 'ctx': {'expected': \"'user'\"}}\n  {'type': 'string_type', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', 'input': None}\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestToolMessage', 'role'), 'msg': \"Input should be 'tool'\", 'input': 'assistant', 'ctx': {'expected': \"'tool'\"}}\n  {'type': 'missing', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestToolMessage', 'tool_call_id'), 'msg': 'Field required', 'input': {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'call__0_update_plan', 'type': 'function', 'function': {'name': 'update_plan', 'arguments': '{\"objective\": \"user\", \"steps\": []}'}}]}}\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestFunctionMessage', 'role'), 'msg': \"Input should be 'function'\", 'input': 'assistant', 'ctx': {'expected': \"'function'\"}}\n  {'type': 'missing', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestFunctionMessage', 'name'), 'msg': 'Field required', 'input': {'role': 'assistant', 'content': None, 'tool_calls': []}}\n\n  File \"venv/lib/python3.11/site-packages/llama_cpp/server/app.py\", line 376, in create_chat_completion\n    POST /v1/chat/completions","type":"internal_server_error","param":null,"code":null}}"#;

/// The same server's non-streamed answer to an over-context request (recorded).
const OVERFLOW_400: &str = r#"{"error":{"message":"This model's maximum context length is 2048 tokens. However, you requested 4722 tokens (4722 in the messages, None in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;

#[test]
fn http_classification() {
    let e = classify_http(400, None, OVERFLOW_400, None);
    assert!(e.is_context_exceeded(), "{e:?}");
    assert_eq!(
        e.to_string(),
        "model context length exceeded (HTTP 400): This model's maximum context length is 2048 tokens. However, you requested 4722 tokens (4722 in the messages, None in the completion). Please reduce the length of the messages or completion."
    );
    assert!(matches!(
        classify_http(400, None, r#"{"error":"bad"}"#, None),
        ModelError::InvalidRequest {
            status: Some(400),
            ..
        }
    ));
    assert!(matches!(
        classify_http(404, None, r#"{"error":"model 'x' not found"}"#, None),
        ModelError::BadResponse {
            status: Some(404),
            ..
        }
    ));
    let e = classify_http(429, Some(Duration::from_secs(500)), "slow down", None);
    assert_eq!(e.retry_after(), Some(MAX_RETRY_AFTER));
    assert!(matches!(
        classify_http(503, None, "", None),
        ModelError::Server {
            status: Some(503),
            ..
        }
    ));
    assert!(classify_http(408, None, "timeout", None).is_retryable());
}

#[test]
fn every_context_phrasing_is_context_exceeded_at_any_error_status() {
    let bodies = [
        r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","code":"context_length_exceeded"}}"#,
        r#"{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}"#,
        r#"{"error":{"message":"the request exceeds the available context size, try increasing it","type":"invalid_request_error"}}"#,
        r#"{"object":"error","message":"The prompt (total length 25938) is too long to fit into the model (context length 4096). Make sure that `max_model_len` is no smaller than the number of text tokens.","type":"BadRequestError","code":400}"#,
        r#"{"error":{"message":"the input length exceeds the context length"}}"#,
        r#"{"error":{"message":"prompt is too long: 205106 tokens > 200000 maximum","type":"invalid_request_error"}}"#,
        r#"[{"error":{"code":400,"message":"The input token count (314175) exceeds the maximum number of tokens allowed (131072).","status":"INVALID_ARGUMENT"}}]"#,
        r#"{"code":20015,"message":"number of input tokens (204703) has exceeded max_prompt_tokens (202752) limit.","data":null}"#,
        r#"{"error":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 3474 `inputs` tokens and 60 `max_new_tokens`","error_type":"validation"}"#,
        r#"{"error":{"message":"Your request exceeded model token limit: 8192","type":"invalid_request_error"}}"#,
        "Requested tokens (5000) exceed context window of 2048",
    ];
    for body in bodies {
        for status in [400, 413, 422, 500] {
            let e = classify_http(status, None, body, None);
            assert!(e.is_context_exceeded(), "{status} {body}: {e:?}");
            assert!(!e.is_retryable());
            assert_eq!(e.code(), "model_context_exceeded");
        }
    }
    // Output-limit refusals and rate limits on tokens are not about the conversation's size.
    for (status, body) in [
        (
            400,
            r#"{"error":{"message":"max_tokens is too large: 20000. This model supports at most 16384 completion tokens, whereas you provided 20000."}}"#,
        ),
        (
            429,
            r#"{"error":{"message":"Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 50000."}}"#,
        ),
    ] {
        assert!(
            !classify_http(status, None, body, None).is_context_exceeded(),
            "{body}"
        );
    }
}

#[test]
fn validation_500_is_deterministic_and_keeps_the_useful_line() {
    let e = classify_http(500, None, CONTENT_NULL_500, None);
    assert!(
        matches!(
            e,
            ModelError::InvalidRequest {
                status: Some(500),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(!e.is_retryable());
    let text = e.to_string();
    assert!(
        text.starts_with("model request rejected (HTTP 500): 7 validation errors: messages.2.ChatCompletionRequestAssistantMessage.content: Input should be a valid string;"),
        "{text}"
    );
    assert!(
        text.contains("(4 more about a mismatched role omitted)"),
        "{text}"
    );
    assert!(!text.contains("File \""), "traceback dropped: {text}");
    assert!(
        !text.contains("update_plan"),
        "echoed input dropped: {text}"
    );
    assert!(!text.ends_with('…'), "fits the cap: {text}");

    // FastAPI's `detail` list (vLLM, other pydantic servers).
    let e = classify_http(
        422,
        None,
        r#"{"detail":[{"type":"string_type","loc":["body","messages",1,"content"],"msg":"Input should be a valid string","input":null}]}"#,
        None,
    );
    assert_eq!(
        e.to_string(),
        "model request rejected (HTTP 422): 1 validation error: messages.1.content: Input should be a valid string"
    );
    // A plain 500 is still server trouble.
    assert!(
        classify_http(
            500,
            None,
            r#"{"error":{"message":"CUDA out of memory"}}"#,
            None
        )
        .is_retryable()
    );
}

#[test]
fn the_provider_reason_survives_a_long_preamble() {
    let body = format!(
        r#"{{"error":{{"message":"{} This model's maximum context length is 8192 tokens. Key sk-live-0123456789abcdef","type":"invalid_request_error"}}}}"#,
        "x".repeat(350)
    );
    let e = classify_http(400, None, &body, Some("sk-live-0123456789abcdef"));
    assert!(
        e.to_string().contains("maximum context length is 8192"),
        "{e}"
    );
    assert!(!e.to_string().contains("0123456789abcdef"), "{e}");
}

#[test]
fn stream_error_classification() {
    let e = |v: serde_json::Value| classify_stream_error(&WireError::from_value(&v), None);
    assert!(matches!(
        e(serde_json::json!({"message":"Provider returned error","code":502})),
        ModelError::Server {
            status: Some(502),
            ..
        }
    ));
    assert!(matches!(
        e(serde_json::json!({"message":"Rate limit reached","type":"rate_limit_error"})),
        ModelError::RateLimited { .. }
    ));
    assert!(matches!(
        e(serde_json::json!({"message":"weird"})),
        ModelError::BadResponse { .. }
    ));
}
