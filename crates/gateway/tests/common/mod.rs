//! A small MoviePilot stand-in for the gateway's tests: a real axum server on 127.0.0.1:0 that
//! records every request line, header and body, and answers with a configurable responder; plus
//! raw TCP servers that misbehave (drop the connection, stall) after reading a request.
#![allow(dead_code, reason = "each test binary uses a part of these helpers")]
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use mpa_gateway::{BearerToken, CallContext, GatewayClient, GatewayConfig};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the server saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    /// Path and query exactly as sent in the request line.
    pub target: String,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn request_line(&self) -> String {
        format!("{} {}", self.method, self.target)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

pub type Responder = Arc<dyn Fn(&Seen) -> Response + Send + Sync>;

#[derive(Clone)]
struct AppState {
    log: Arc<Mutex<Vec<Seen>>>,
    respond: Responder,
}

pub struct TestServer {
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<Seen>>>,
}

impl TestServer {
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }

    pub fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

async fn record(
    State(state): State<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let seen = Seen {
        method: method.to_string(),
        target: uri
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_default(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
        body: body.to_vec(),
    };
    let response = (state.respond)(&seen);
    state.log.lock().unwrap().push(seen);
    response
}

/// A server answering every request with `respond`.
pub async fn serve(respond: Responder) -> TestServer {
    let log = Arc::new(Mutex::new(Vec::new()));
    let app = axum::Router::new().fallback(record).with_state(AppState {
        log: log.clone(),
        respond,
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    TestServer { addr, log }
}

/// A server answering `{"success":true,"message":"","data":{}}` to everything.
pub async fn ok_server() -> TestServer {
    serve(Arc::new(|_| {
        axum::Json(serde_json::json!({"success": true, "message": "", "data": {}})).into_response()
    }))
    .await
}

pub fn status_response(status: u16, body: serde_json::Value) -> Response {
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

/// Reads one request head (up to the blank line) from a raw socket.
async fn read_head(sock: &mut tokio::net::TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A server that reads each request and closes the connection without answering — the
/// lost-receipt case. Returns its address and how many requests it read.
pub async fn dropping_server() -> (SocketAddr, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(Mutex::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            read_head(&mut sock).await;
            *c.lock().unwrap() += 1;
            drop(sock);
        }
    });
    (addr, count)
}

/// A server that reads each request, sends a partial answer head, and then stalls forever.
pub async fn stalling_server(partial: &'static [u8]) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                read_head(&mut sock).await;
                let _ = sock.write_all(partial).await;
                tokio::time::sleep(Duration::from_secs(3600)).await;
                drop(sock);
            });
        }
    });
    addr
}

/// An address nothing listens on (bound, then released).
/// An address on which nothing answers (a connect is refused), for as long as it lives: a
/// socket bound to the port that never listens. A dropped listener's port could go straight to
/// the next `bind(0)` — a server another test (or this one) starts a moment later — and then the
/// "dead" address answers.
pub struct DeadAddr {
    addr: SocketAddr,
    _reserved: tokio::net::TcpSocket,
}

impl std::fmt::Display for DeadAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.addr.fmt(f)
    }
}

pub async fn dead_addr() -> DeadAddr {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    DeadAddr {
        addr: socket.local_addr().unwrap(),
        _reserved: socket,
    }
}

pub const TOKEN: &str =
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI3In0.c2VjcmV0LXNpZ25hdHVyZS1kby1ub3QtbGVhaw";

pub fn ctx() -> CallContext {
    CallContext {
        token: BearerToken::new(TOKEN),
        session_id: Some("sess-1".into()),
        channel: Some("telegram".into()),
        source: Some("web agent".into()),
    }
}

pub fn client(base_url: &str) -> GatewayClient {
    GatewayClient::new(GatewayConfig::new(base_url)).unwrap()
}

pub fn client_with_timeout(base_url: &str, timeout: Duration) -> GatewayClient {
    let mut config = GatewayConfig::new(base_url);
    config.timeout = timeout;
    config.long_timeout = timeout;
    GatewayClient::new(config).unwrap()
}

/// Percent-encoding as the tests expect it, written independently of the crate: every byte
/// outside RFC 3986's unreserved set becomes `%XX`.
pub fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A path segment as the URL library writes it (WHATWG's path-segment set for http URLs),
/// written independently of the crate: controls, space, `"#<>?`{}%/\\` and non-ASCII become `%XX`.
pub fn encode_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b <= 0x20 || b >= 0x7f || b"\"#<>?`{}%/\\".contains(&b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
    out
}
