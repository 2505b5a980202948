//! The mock server over real sockets, driven by plain blocking HTTP as another process would.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One HTTP/1.1 request with `Connection: close`; returns the raw response text.
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer test-key\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serves_scripted_streams_to_blocking_clients_and_records_requests() {
    // No runtime on this thread at all: the server runs on its own.
    let server = MockModelServer::start_blocking();
    assert!(server.base_url.starts_with("http://127.0.0.1:"));
    assert!(server.base_url.ends_with("/v1"));
    server.push(MockReply::text("hi there"));
    server
        .push(MockReply::status(429, r#"{"error":{"message":"slow"}}"#).header("Retry-After", "7"));

    let resp = http(
        server.addr,
        "POST",
        "/v1/chat/completions",
        r#"{"model":"m","n":1}"#,
    );
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(
        resp.to_ascii_lowercase()
            .contains("content-type: text/event-stream")
    );
    assert!(resp.contains("data: [DONE]"), "{resp}");
    assert!(resp.contains(r#""finish_reason":"stop""#), "{resp}");

    let resp = http(server.addr, "POST", "/v1/chat/completions", "not json");
    assert!(resp.starts_with("HTTP/1.1 429"), "{resp}");
    assert!(
        resp.to_ascii_lowercase().contains("retry-after: 7"),
        "{resp}"
    );

    // Script exhausted, no default: a 500 that says so.
    let resp = http(server.addr, "POST", "/v1/chat/completions", "{}");
    assert!(resp.starts_with("HTTP/1.1 500"), "{resp}");
    assert!(
        resp.contains("no scripted reply left for request #3"),
        "{resp}"
    );

    server.set_default(MockReply::text("default"));
    let resp = http(server.addr, "POST", "/chat/completions", "{}");
    assert!(resp.contains(r#""content":"de""#), "{resp}");

    assert_eq!(
        server.requests(),
        vec![
            json!({"model": "m", "n": 1}),
            Value::String("not json".into()),
            json!({}),
            json!({})
        ]
    );
    let headers = server.request_headers();
    assert_eq!(headers.len(), 4);
    assert!(
        headers[0]
            .iter()
            .any(|(k, v)| k == "authorization" && v == "Bearer test-key")
    );

    let resp = http(server.addr, "GET", "/v1/models", "");
    assert!(resp.contains("mock-model"), "{resp}");
    let resp = http(server.addr, "GET", "/v1/chat/completions", "");
    assert!(resp.starts_with("HTTP/1.1 404"), "{resp}");
    assert_eq!(server.request_count(), 4, "only chat requests are recorded");
}

#[test]
fn drop_after_cuts_the_body_and_the_server_stops_on_drop() {
    let server = MockModelServer::start_blocking();
    server.push(MockReply::text("abcdefghijkl").drop_after(2));
    let resp = http(server.addr, "POST", "/v1/chat/completions", "{}");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert_eq!(resp.matches("data: ").count(), 2, "{resp}");
    assert!(!resp.contains("[DONE]"));
    assert!(!resp.ends_with("0\r\n\r\n"), "no terminating chunk: {resp}");

    let addr = server.addr;
    drop(server);
    // The port is closed (or refuses) once the server is gone.
    let mut refused = false;
    for _ in 0..100 {
        if TcpStream::connect(addr).is_err() {
            refused = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(refused, "server still accepting after drop");
}

#[tokio::test]
async fn wait_for_requests_sees_requests_from_other_clients() {
    let server = MockModelServer::start().await;
    server.set_default(MockReply::text("x"));
    assert!(!server.wait_for_requests(1, Duration::from_millis(50)).await);
    let addr = server.addr;
    let client = std::thread::spawn(move || http(addr, "POST", "/v1/chat/completions", "{}"));
    assert!(server.wait_for_requests(1, Duration::from_secs(20)).await);
    assert!(client.join().unwrap().contains("[DONE]"));
}

#[test]
fn non_streamed_requests_get_one_json_body_and_empty_streams_are_empty() {
    let server = MockModelServer::start_blocking();
    server.push(MockReply::text("whole answer"));
    server.push(MockReply::empty_stream());
    // A 200 of the given content type; its body.
    let post = |stream: bool, content_type: &str| {
        let body = format!(r#"{{"model":"m","stream":{stream}}}"#);
        let resp = http(server.addr, "POST", "/v1/chat/completions", &body);
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        let (head, body) = resp.split_once("\r\n\r\n").unwrap();
        assert!(
            head.to_ascii_lowercase()
                .contains(&format!("content-type: {content_type}")),
            "{resp}"
        );
        body.to_owned()
    };
    let body: Value = serde_json::from_str(&post(false, "application/json")).unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "whole answer");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    let body = post(true, "text/event-stream");
    assert!(!body.contains("data:"), "{body}");
}
