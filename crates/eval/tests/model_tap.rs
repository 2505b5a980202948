//! The model tap in front of an endpoint that closes a connection before answering (as
//! llama.cpp's server does with a kept-alive connection after a failed stream): the request is
//! sent once more on a fresh connection, recorded once, and a second close is a 502 naming the
//! tap, not a hang or a loop.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_eval::tap::ModelTap;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ANSWER: &str = r#"{"choices":[{"message":{"role":"assistant","content":"ok"}}]}"#;

/// Reads one HTTP request (head and a `content-length` body).
async fn read_request(conn: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = conn.read(&mut chunk).await.unwrap();
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return;
            }
        }
    }
}

/// An endpoint whose first `closes` connections read the request and close unanswered; later
/// ones answer. Returns its base URL and the number of connections it took.
async fn endpoint(closes: usize) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let taken = Arc::new(AtomicUsize::new(0));
    let counter = taken.clone();
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            let n = counter.fetch_add(1, Ordering::SeqCst);
            read_request(&mut conn).await;
            if n < closes {
                drop(conn);
                continue;
            }
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{ANSWER}",
                ANSWER.len()
            );
            conn.write_all(reply.as_bytes()).await.unwrap();
            conn.shutdown().await.unwrap();
        }
    });
    (url, taken)
}

async fn ask(tap: &ModelTap) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/chat/completions", tap.base_url()))
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test]
async fn a_connection_closed_before_any_answer_is_tried_once_more() {
    let (url, taken) = endpoint(1).await;
    let tap = ModelTap::start(&url).await.unwrap();
    let (status, body) = ask(&tap).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "ok");
    assert_eq!(taken.load(Ordering::SeqCst), 2, "one more connection");
    assert_eq!(
        tap.requests().len(),
        1,
        "recorded once: the model received it once"
    );
}

#[tokio::test]
async fn a_second_close_is_a_bad_gateway_from_the_tap() {
    let (url, taken) = endpoint(usize::MAX).await;
    let tap = ModelTap::start(&url).await.unwrap();
    let (status, body) = ask(&tap).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["type"], "model_tap");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not be reached"),
        "{body}"
    );
    assert_eq!(taken.load(Ordering::SeqCst), 2, "sent twice, no more");
}
