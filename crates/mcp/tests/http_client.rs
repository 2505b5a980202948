//! The streamable HTTP client's byte limits, against a raw HTTP server on 127.0.0.1 that
//! misbehaves the way no real MCP server should (the protocol itself is tested against the
//! official Python SDK's server in mpa-core's tests/mcp.rs): an answer larger than the limit is
//! refused at the byte layer, before any parsing, with words that say so.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_mcp::{ClientOptions, McpError, Server, ServerConfig};
use serde_json::json;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A server answering every request with `head` and then `body` (a chunk `repeat` times), then
/// keeping the connection open without a word more.
async fn raw_server(head: &'static str, body: &'static [u8], repeat: usize) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                // The request's head and (small) body arrive together on loopback.
                let _ = sock.read(&mut buf).await;
                if sock.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for _ in 0..repeat {
                    if sock.write_all(body).await.is_err() {
                        return;
                    }
                }
                std::future::pending::<()>().await;
            });
        }
    });
    format!("http://127.0.0.1:{port}/mcp")
}

fn server(url: &str) -> Server {
    let cfg =
        ServerConfig::from_json(json!({"name": "raw", "transport": "streamable_http", "url": url}))
            .unwrap();
    Server::new(cfg, ClientOptions::default(), Arc::new(|| {}))
}

fn unavailable_reason(e: McpError) -> String {
    match e {
        McpError::Unavailable { reason, .. } => reason,
        other => panic!("expected unavailable, got {other}"),
    }
}

#[tokio::test]
async fn a_json_answer_declared_larger_than_the_limit_is_refused_unread() {
    // 17 MiB declared, nothing sent: the refusal cannot have come from reading it.
    let url = raw_server(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 17825792\r\n\r\n",
        b"",
        0,
    )
    .await;
    let reason = unavailable_reason(server(&url).list_tools().await.unwrap_err());
    assert!(reason.contains("exceeded the maximum size"), "{reason}");
}

#[tokio::test]
async fn an_endless_sse_event_is_cut_off_at_the_limit() {
    // One `data:` line that does not end: 17 MiB without a line break, the connection kept open.
    let url = raw_server(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: ",
        &[b'x'; 64 * 1024],
        272,
    )
    .await;
    // Without the limit the client would wait on the open stream until the connect timeout;
    // with it the stream ends at 16 MiB and the handshake fails at once.
    let reason = unavailable_reason(server(&url).list_tools().await.unwrap_err());
    assert!(
        !reason.contains("did not complete the handshake within"),
        "{reason}"
    );
    assert!(reason.contains("the MCP handshake failed"), "{reason}");
}

#[tokio::test]
async fn a_server_that_is_not_there_is_unavailable() {
    // A bound socket that never listens: connects are refused, and no server started meanwhile
    // can take the port (a dropped listener's port could be handed straight to one).
    let reserved = tokio::net::TcpSocket::new_v4().unwrap();
    reserved.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let url = format!("http://{}/mcp", reserved.local_addr().unwrap());
    let err = server(&url).list_tools().await.unwrap_err();
    assert_eq!(err.code(), "mcp_server_unavailable", "{err}");
}
