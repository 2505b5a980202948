//! Regression (issue 11, item 7): bad input used to get axum's plain-text rejections ("Failed to
//! deserialize the JSON body…"). Every error of every route is the JSON envelope
//! `{"error": {"code", "message", "type"}}` with a stable code, and changes nothing.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// A password-like value sent in the wrong places: no answer may echo it.
const SECRET: &str = "hunter2-secret-value";
const MAX_BODY: usize = 64 * 1024;

struct Case {
    method: Method,
    path: &'static str,
    content_type: Option<&'static str>,
    body: Option<String>,
    token: bool,
    status: StatusCode,
    code: &'static str,
}

fn case(
    method: Method,
    path: &'static str,
    content_type: Option<&'static str>,
    body: Option<&str>,
    status: u16,
    code: &'static str,
) -> Case {
    Case {
        method,
        path,
        content_type,
        body: body.map(str::to_owned),
        token: true,
        status: StatusCode::from_u16(status).unwrap(),
        code,
    }
}

const JSON: Option<&str> = Some("application/json");

fn cases() -> Vec<Case> {
    use Method as M;
    let mut v = Vec::new();
    // Every JSON route: syntax, wrong type, missing field, wrong or missing content type (too big:
    // below, over a raw socket, since the answer comes before the body is read).
    for (path, valid) in [
        ("/api/v1/login", r#"{"username": "alice", "password": "x"}"#),
        ("/api/v1/agent/stream", r#"{"text": "hello"}"#),
        (
            "/v1/chat/completions",
            r#"{"messages": [{"role": "user", "content": "hi"}]}"#,
        ),
    ] {
        v.push(case(
            M::POST,
            path,
            JSON,
            Some(r#"{"text": "#),
            400,
            "invalid_json",
        ));
        v.push(case(
            M::POST,
            path,
            JSON,
            Some(&format!("{valid} trailing")),
            400,
            "invalid_json",
        ));
        v.push(case(
            M::POST,
            path,
            Some("text/plain"),
            Some("{}"),
            415,
            "unsupported_media_type",
        ));
        v.push(case(
            M::POST,
            path,
            None,
            Some("{}"),
            415,
            "unsupported_media_type",
        ));
        v.push(case(
            M::POST,
            path,
            Some("application/x-www-form-urlencoded"),
            Some(&format!("username=a&password={SECRET}")),
            415,
            "unsupported_media_type",
        ));
    }
    let wrong_type = [
        (
            "/api/v1/login",
            format!(r#"{{"username": "alice", "password": ["{SECRET}"]}}"#),
        ),
        (
            "/api/v1/login",
            format!(r#"{{"username": 7, "password": "{SECRET}"}}"#),
        ),
        (
            "/api/v1/agent/stream",
            format!(r#"{{"text": "{SECRET}", "images": "{SECRET}"}}"#),
        ),
        (
            "/api/v1/agent/stream",
            format!(r#"{{"text": 12, "session_id": "{SECRET}"}}"#),
        ),
        (
            "/v1/chat/completions",
            format!(r#"{{"messages": "{SECRET}"}}"#),
        ),
        (
            "/v1/chat/completions",
            format!(r#"{{"messages": [], "stream": "{SECRET}"}}"#),
        ),
    ];
    for (path, body) in &wrong_type {
        v.push(case(M::POST, path, JSON, Some(body), 422, "invalid_body"));
    }
    v.push(case(
        M::POST,
        "/api/v1/login",
        JSON,
        Some(r#"{"username": "alice"}"#),
        422,
        "invalid_body",
    ));
    v.push(case(
        M::POST,
        "/api/v1/agent/stream",
        JSON,
        Some("{}"),
        422,
        "invalid_body",
    ));
    // Well-formed but refused by the handler.
    v.push(case(
        M::POST,
        "/api/v1/agent/stream",
        JSON,
        Some(r#"{"text": "  "}"#),
        400,
        "bad_request",
    ));
    v.push(case(
        M::POST,
        "/api/v1/agent/stream",
        JSON,
        Some(r#"{"text": "hi", "session_id": "../../etc"}"#),
        400,
        "invalid_session_id",
    ));
    v.push(case(
        M::POST,
        "/v1/chat/completions",
        JSON,
        Some(r#"{"messages": []}"#),
        400,
        "bad_request",
    ));
    // Queries and paths.
    v.push(case(
        M::GET,
        "/api/v1/agent/sessions?page=abc",
        None,
        None,
        400,
        "invalid_query",
    ));
    v.push(case(
        M::GET,
        "/api/v1/agent/sessions?count=-1",
        None,
        None,
        400,
        "invalid_query",
    ));
    v.push(case(
        M::GET,
        "/api/v1/agent/sessions?all=maybe",
        None,
        None,
        400,
        "invalid_query",
    ));
    v.push(case(
        M::GET,
        "/api/v1/agent/sessions/%FF%FE",
        None,
        None,
        400,
        "invalid_path",
    ));
    v.push(case(
        M::DELETE,
        "/api/v1/agent/sessions/%FF%FE",
        None,
        None,
        400,
        "invalid_path",
    ));
    v.push(case(
        M::POST,
        "/api/v1/agent/sessions/%FF%FE/stop",
        None,
        None,
        400,
        "invalid_path",
    ));
    v.push(case(
        M::GET,
        "/api/v1/agent/sessions/missing",
        None,
        None,
        404,
        "session_not_found",
    ));
    v.push(case(
        M::DELETE,
        "/api/v1/agent/sessions/missing",
        None,
        None,
        404,
        "session_not_found",
    ));
    v.push(case(
        M::POST,
        "/api/v1/agent/sessions/missing/stop",
        None,
        None,
        404,
        "session_not_found",
    ));
    // Unknown routes and wrong methods.
    v.push(case(M::GET, "/nope", None, None, 404, "not_found"));
    v.push(case(
        M::POST,
        "/api/v1/agent/nope",
        JSON,
        Some("{}"),
        404,
        "not_found",
    ));
    v.push(case(
        M::GET,
        "/assets/missing.js",
        None,
        None,
        404,
        "not_found",
    ));
    for (method, path) in [
        (M::GET, "/api/v1/login"),
        (M::GET, "/api/v1/logout"),
        (M::DELETE, "/api/v1/me"),
        (M::GET, "/api/v1/agent/stream"),
        (M::PUT, "/api/v1/agent/sessions"),
        (M::PUT, "/api/v1/agent/sessions/s1"),
        (M::GET, "/api/v1/agent/sessions/s1/stop"),
        (M::GET, "/v1/chat/completions"),
        (M::POST, "/v1/models"),
        (M::POST, "/healthz"),
        (M::POST, "/"),
        (M::DELETE, "/assets/app.js"),
    ] {
        v.push(case(method, path, None, None, 405, "method_not_allowed"));
    }
    // No credentials.
    for (method, path) in [
        (M::GET, "/api/v1/me"),
        (M::POST, "/api/v1/logout"),
        (M::GET, "/api/v1/agent/sessions"),
        (M::GET, "/v1/models"),
    ] {
        let mut c = case(method, path, None, None, 401, "unauthorized");
        c.token = false;
        v.push(c);
    }
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_gets_a_json_envelope_on_every_route() {
    let env = Env::start_with(|cfg| cfg.max_body = MAX_BODY).await;
    let token = env.user("alice", "password-alice", false).await;
    let tokens_before = rows(&env, "auth_tokens");
    for c in cases() {
        let what = format!("{} {} ({:?})", c.method, c.path, c.content_type);
        let mut req = env.http.request(c.method.clone(), env.url(c.path));
        if c.token {
            req = req.bearer_auth(&token);
        }
        if let Some(ct) = c.content_type {
            req = req.header("content-type", ct);
        }
        if let Some(body) = c.body.clone() {
            req = req.body(body);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), c.status, "{what}");
        let ct = r.headers()["content-type"].to_str().unwrap().to_owned();
        assert_eq!(ct, "application/json", "{what}");
        if c.status == StatusCode::METHOD_NOT_ALLOWED {
            assert!(r.headers().contains_key("allow"), "{what}");
        }
        let text = r.text().await.unwrap();
        assert!(!text.contains(SECRET), "{what} echoed the value: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["code"], c.code, "{what}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            !message.is_empty() && !message.starts_with("Failed to"),
            "{what}: {v}"
        );
        assert_eq!(v["error"]["type"], "invalid_request_error", "{what}: {v}");
    }
    // Too big: answered from the Content-Length alone, before the body is sent.
    for path in [
        "/api/v1/login",
        "/api/v1/agent/stream",
        "/v1/chat/completions",
    ] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert_envelope(
            &raw_exchange(&env, head.as_bytes()).await,
            413,
            "payload_too_large",
        );
    }
    // Nothing changed: no chat, no model call, no new token.
    assert_eq!(rows(&env, "chats"), 0);
    assert_eq!(env.mock.requests().len(), 0);
    assert_eq!(rows(&env, "auth_tokens"), tokens_before);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shape_errors_name_the_field_and_what_was_expected() {
    let env = Env::start().await;
    let r = env
        .http
        .post(env.url("/api/v1/login"))
        .json(&serde_json::json!({"username": "alice", "password": 12345678}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["error"],
        serde_json::json!({
            "code": "invalid_body",
            "message": "field `password`: wrong type or value, expected a string",
            "type": "invalid_request_error",
        })
    );
    let r = env
        .http
        .post(env.url("/api/v1/login"))
        .json(&serde_json::json!({"password": "x"}))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["message"], "missing field `username`");
    env.shutdown().await;
}
