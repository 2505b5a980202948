//! Model errors: secrets scrubbed, length capped, retryability and codes.

use mpa_model::error::*;

#[test]
fn scrub_removes_key_bearer_and_sk_tokens() {
    let s = scrub(
        "key MYSECRETKEY123 rejected; header Authorization: Bearer abc.def-ghi; also sk-proj-ABCDEFGH1234 and risk-free",
        Some("MYSECRETKEY123"),
    );
    assert!(!s.contains("MYSECRETKEY123"), "{s}");
    assert!(!s.contains("abc.def-ghi"), "{s}");
    assert!(!s.contains("ABCDEFGH1234"), "{s}");
    assert!(s.contains("risk-free"), "{s}");
    assert!(s.contains("key [REDACTED:api_key] rejected"), "{s}");
    assert!(s.contains("Bearer [REDACTED:token]"), "{s}");
}

#[test]
fn scrub_caps_length_on_char_boundary() {
    let s = scrub(&"界".repeat(1000), None);
    assert_eq!(s.chars().count(), SNIPPET_CHARS + 1);
    assert!(s.ends_with('…'));
}

#[test]
fn retryability_and_codes() {
    let e = ModelError::Server {
        status: Some(503),
        message: "x".into(),
    };
    assert!(e.is_retryable());
    assert_eq!(e.code(), "model_server_error");
    assert_eq!(e.to_string(), "model server error (HTTP 503): x");
    assert!(!ModelError::Cancelled.is_retryable());
    let e = ModelError::InvalidRequest {
        status: Some(400),
        message: "This model does not support image input".into(),
    };
    assert!(e.is_image_input_rejected());
    assert!(!e.is_retryable());
    assert_eq!(e.code(), "model_invalid_request");
    let e = ModelError::ContextLengthExceeded {
        status: Some(400),
        message: "This model's maximum context length is 2048 tokens.".into(),
    };
    assert!(e.is_context_exceeded() && !e.is_retryable());
    assert_eq!(e.code(), "model_context_exceeded");
    assert_eq!(
        e.to_string(),
        "model context length exceeded (HTTP 400): This model's maximum context length is 2048 tokens."
    );
}
