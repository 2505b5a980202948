//! JSON request bodies: shape and syntax errors name the field and never echo the value; content types.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use axum::http::{HeaderMap, StatusCode, header};
use mpa_server::error::ApiError;
use mpa_server::extract::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[expect(dead_code, reason = "only deserialised")]
struct Login {
    username: String,
    password: String,
    #[serde(default)]
    count: Option<u32>,
}

fn err(body: &str) -> ApiError {
    parse::<Login>(body.as_bytes()).unwrap_err()
}

#[test]
fn shape_errors_name_the_field_and_never_echo_the_value() {
    let e = err(r#"{"username": "a", "password": "hunter2", "count": "hunter2"}"#);
    assert_eq!(
        (e.status, e.code),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_body")
    );
    assert_eq!(
        e.message,
        "field `count`: wrong type or value, expected u32"
    );
    let e = err(r#"{"username": "a", "password": 12345678}"#);
    assert_eq!(
        e.message,
        "field `password`: wrong type or value, expected a string"
    );
    assert!(!e.message.contains("12345678"));
    let e = err(r#"{"username": "a"}"#);
    assert_eq!(e.message, "missing field `password`");
    let e = err(r#"["hunter2"]"#);
    assert!(!e.message.contains("hunter2"), "{}", e.message);
}

#[test]
fn syntax_errors_and_trailing_bytes_are_invalid_json() {
    for body in [
        r#"{"username": "a", "#,
        "",
        r#"{"username": "a", "password": "b"} x"#,
        "not json",
    ] {
        let e = err(body);
        assert_eq!(
            (e.status, e.code),
            (StatusCode::BAD_REQUEST, "invalid_json"),
            "{body}"
        );
    }
}

#[test]
fn json_content_types() {
    let mut h = HeaderMap::new();
    assert!(!declares_json(&h));
    for (ct, ok) in [
        ("application/json", true),
        ("application/json; charset=utf-8", true),
        ("Application/JSON", true),
        ("application/merge-patch+json", true),
        ("text/json", false),
        ("text/plain", false),
        ("application/x-www-form-urlencoded", false),
    ] {
        h.insert(header::CONTENT_TYPE, ct.parse().unwrap());
        assert_eq!(declares_json(&h), ok, "{ct}");
    }
}
