//! Regressions of issue 12, item 5 (slow and lying clients), over raw sockets: half-open
//! connections stayed open for over 75 s, a claimed 100 GB body just waited, and one address
//! could hold any number of connections. Each test asserts the exact answer (or the close) and
//! that nothing changed.
#![expect(clippy::expect_used, reason = "a test's panic is its failure report")]

use crate::common;

use common::*;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Short limits, so the tests wait seconds, not minutes (the defaults are 30 s).
async fn env() -> Env {
    env_with_header_timeout(Duration::from_secs(1)).await
}

async fn env_with_header_timeout(header_read_timeout: Duration) -> Env {
    Env::start_with(|cfg| {
        cfg.header_read_timeout = header_read_timeout;
        cfg.body_read_timeout = Duration::from_secs(1);
        cfg.max_connections_per_ip = 3;
        cfg.max_body = 64 * 1024;
    })
    .await
}

/// Reads until the server closes the connection; what it sent before closing.
async fn until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut out))
        .await
        .expect("the server never closed the connection")
        .unwrap_or(0);
    out
}

fn unchanged(env: &Env) {
    assert_eq!(rows(env, "chats"), 0);
    assert_eq!(env.mock.requests().len(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn half_sent_headers_and_idle_keep_alive_connections_are_closed_by_the_header_timeout() {
    let env = env().await;
    // Headers that never end.
    let mut s = TcpStream::connect(addr(&env)).await.unwrap();
    s.write_all(b"POST /api/v1/login HTTP/1.1\r\nHost: x\r\nContent-Le")
        .await
        .unwrap();
    assert_eq!(until_closed(&mut s).await, b"", "closed without an answer");
    // A connection that never sends anything.
    let mut s = TcpStream::connect(addr(&env)).await.unwrap();
    assert_eq!(until_closed(&mut s).await, b"");
    // A keep-alive connection: one answered request, then silence.
    let s = TcpStream::connect(addr(&env)).await.unwrap();
    let mut r = BufReader::new(s);
    r.get_mut()
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (status, _, body) = read_response(&mut r).await.unwrap();
    assert_eq!(status, 200);
    assert!(body.starts_with(r#"{"status":"ok","#), "{body}");
    assert_eq!(
        until_closed(r.get_mut()).await,
        b"",
        "idle keep-alive closed"
    );
    unchanged(&env);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_that_stops_arriving_gets_408_request_timeout() {
    let env = env().await;
    let token = env.user("alice", "alice-password", false).await;
    let head = format!(
        "POST /api/v1/agent/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"text\": \"hel"
    );
    assert_envelope(
        &raw_exchange(&env, head.as_bytes()).await,
        408,
        "request_timeout",
    );
    unchanged(&env);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claimed_huge_body_gets_413_before_any_of_it_is_sent() {
    let env = env().await;
    let token = env.user("alice", "alice-password", false).await;
    for expect in ["", "Expect: 100-continue\r\n"] {
        // Not one byte of the body is sent: the answer must come anyway.
        let head = format!(
            "POST /api/v1/agent/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\n{expect}Content-Length: 100000000000\r\n\r\n"
        );
        assert_envelope(
            &raw_exchange(&env, head.as_bytes()).await,
            413,
            "payload_too_large",
        );
    }
    // The same on a route that needs no login.
    let head = b"POST /api/v1/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                 Content-Length: 100000000000\r\n\r\n";
    assert_envelope(&raw_exchange(&env, head).await, 413, "payload_too_large");
    unchanged(&env);
    assert_eq!(rows(&env, "auth_tokens"), 1, "only the test's own login");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_beyond_the_per_address_limit_get_429_and_are_closed() {
    // Held connections must not idle out while the test runs.
    let env = env_with_header_timeout(WAIT).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let s = TcpStream::connect(addr(&env)).await.unwrap();
        let mut r = BufReader::new(s);
        r.get_mut()
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(read_response(&mut r).await.unwrap().0, 200);
        held.push(r);
    }
    let mut r = BufReader::new(TcpStream::connect(addr(&env)).await.unwrap());
    r.get_mut()
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (status, headers, body) = read_response(&mut r).await.unwrap();
    assert_eq!(status, 429, "{body}");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["connection"], "close");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "too_many_connections");
    assert_eq!(until_closed(r.get_mut()).await, b"");
    // Another address is not affected.
    let other = client_from("127.0.0.2");
    let resp = other.get(env.url("/healthz")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    // Closing one frees its place.
    drop(held.pop());
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut r = BufReader::new(TcpStream::connect(addr(&env)).await.unwrap());
        r.get_mut()
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        if read_response(&mut r).await.unwrap().0 == 200 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the place never came free"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    unchanged(&env);
    env.shutdown().await;
}
