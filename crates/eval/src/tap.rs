//! The model tap: a loopback pass-through in front of a live model endpoint that records every
//! request body the host sent (what the model received — the oracle's [`Delivery`] evidence in
//! live runs, as the scripted model's own log is in replay) and how long the model took to
//! answer (to tell host overhead from model time).
//!
//! Requests and responses go through unchanged, streamed as they arrive; headers too (the API
//! key reaches the endpoint and is never recorded — only bodies are kept).
//!
//! [`Delivery`]: crate::delivery::Delivery

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Larger request bodies are refused (a request is a conversation, not a file).
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

#[derive(Default)]
struct Log {
    requests: Vec<Value>,
    busy: Duration,
}

struct Shared {
    upstream: String,
    client: reqwest::Client,
    log: Mutex<Log>,
}

impl Shared {
    fn log(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running tap; dropping it stops it.
pub struct ModelTap {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Drop for ModelTap {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Adds the model's time when the response body is done with (finished or dropped).
struct Busy {
    shared: Arc<Shared>,
    started: Instant,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.shared.log().busy += self.started.elapsed();
    }
}

impl ModelTap {
    /// Listens on a free loopback port and forwards to `upstream` (an OpenAI-compatible base
    /// URL such as `https://api.example.com/v1`).
    pub async fn start(upstream: &str) -> std::io::Result<ModelTap> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let client = reqwest::Client::builder()
            .build()
            .map_err(std::io::Error::other)?;
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_string(),
            client,
            log: Mutex::new(Log::default()),
        });
        let router = Router::new().fallback(forward).with_state(shared.clone());
        let stop = CancellationToken::new();
        let until = stop.clone();
        tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async move { until.cancelled().await })
                .await;
            if let Err(e) = served {
                tracing::warn!(error = %e, "model tap stopped");
            }
        });
        Ok(ModelTap { addr, shared, stop })
    }

    /// `http://127.0.0.1:PORT/v1`: the base URL to give the host.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every JSON request body sent, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.log().requests.clone()
    }

    /// The model's time: from forwarding each request to the end of its response.
    pub fn busy(&self) -> Duration {
        self.shared.log().busy
    }
}

/// Hop-by-hop headers and the ones the client recomputes.
fn passes(name: &HeaderName) -> bool {
    ![
        header::HOST,
        header::CONTENT_LENGTH,
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        HeaderName::from_static("keep-alive"),
        HeaderName::from_static("proxy-connection"),
    ]
    .contains(name)
}

fn copy(from: &HeaderMap, to: &mut HeaderMap) {
    for (name, value) in from {
        if passes(name) {
            to.append(name.clone(), value.clone());
        }
    }
}

fn bad_gateway(message: String) -> Response {
    let body = serde_json::json!({"error": {"message": message, "type": "model_tap"}});
    (StatusCode::BAD_GATEWAY, axum::Json(body)).into_response()
}

async fn forward(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_REQUEST_BYTES).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
    };
    let path = parts.uri.path();
    let rest = path.strip_prefix("/v1").unwrap_or(path);
    let mut url = format!("{}{rest}", shared.upstream);
    if let Some(q) = parts.uri.query() {
        url.push('?');
        url.push_str(q);
    }
    if let Ok(json) = serde_json::from_slice::<Value>(&bytes) {
        shared.log().requests.push(json);
    }
    let mut headers = HeaderMap::new();
    copy(&parts.headers, &mut headers);
    let busy = Busy {
        shared: shared.clone(),
        started: Instant::now(),
    };
    let send = || {
        shared
            .client
            .request(parts.method.clone(), &url)
            .headers(headers.clone())
            .body(bytes.clone())
            .send()
    };
    // A kept-alive connection the endpoint closed in the meantime (llama.cpp's server closes
    // one after a failed stream) fails before any answer: once more on a fresh one. A model
    // request has no side effect to repeat.
    let sent = match send().await {
        Err(e) if e.is_connect() || e.is_request() => send().await,
        other => other,
    };
    let upstream = match sent {
        Ok(r) => r,
        Err(e) => return bad_gateway(format!("the model endpoint could not be reached: {e}")),
    };
    let mut response = Response::builder().status(upstream.status());
    if let Some(h) = response.headers_mut() {
        copy(upstream.headers(), h);
    }
    // `busy` rides along with the body, so the model's time ends when the answer does.
    let chunks = futures_util::stream::unfold(Some((upstream, busy)), |state| async move {
        let (mut upstream, busy) = state?;
        match upstream.chunk().await {
            Ok(Some(chunk)) => Some((Ok::<Bytes, reqwest::Error>(chunk), Some((upstream, busy)))),
            Ok(None) => None,
            Err(e) => Some((Err(e), None)),
        }
    });
    response
        .body(Body::from_stream(chunks))
        .unwrap_or_else(|e| bad_gateway(format!("cannot relay the model's answer: {e}")))
}
