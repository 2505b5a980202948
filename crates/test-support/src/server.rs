//! The mock OpenAI-compatible server: axum on `127.0.0.1:0`, on its own thread and runtime.
//!
//! Its own runtime keeps it answering whatever the test does with its thread: a blocking
//! `std::process::Command::output()` on a current-thread test runtime would otherwise starve it
//! while the spawned `mpagent` waits for the model.

use crate::reply::{Body, Cut, MockReply};
use axum::body::Body as HttpBody;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// Computes a reply from the request body (see [`MockModelServer::set_responder`]).
pub type Responder = Arc<dyn Fn(&Value) -> MockReply + Send + Sync>;

#[derive(Default)]
struct Recorded {
    queue: VecDeque<MockReply>,
    default: Option<MockReply>,
    responder: Option<Responder>,
    requests: Vec<Value>,
    /// False: bodies are counted but not kept (benchmarks with multi-megabyte requests).
    forget_bodies: bool,
    headers: Vec<Vec<(String, String)>>,
}

struct Shared {
    recorded: Mutex<Recorded>,
    /// Number of chat requests received, for [`MockModelServer::wait_for_requests`].
    count: watch::Sender<usize>,
    /// Streamed replies the client hung up on before their end, for
    /// [`MockModelServer::wait_for_hangups`].
    hangups: watch::Sender<usize>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Recorded> {
        // A panicking test thread must not hide every later request from the others.
        self.recorded.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running mock model server. Dropping it stops the server and cuts open connections.
pub struct MockModelServer {
    /// `http://127.0.0.1:PORT/v1`: what `LLM_BASE_URL` should be.
    pub base_url: String,
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for MockModelServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockModelServer")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl MockModelServer {
    /// Starts the server on an ephemeral port.
    ///
    /// # Panics
    /// When no thread, runtime or socket can be had: the test cannot run anyway.
    pub async fn start() -> MockModelServer {
        let (server, ready) = Self::spawn();
        let addr = match ready.await {
            Ok(Ok(addr)) => addr,
            Ok(Err(e)) => panic!("mock model server failed to start: {e}"),
            Err(_) => panic!("mock model server thread died while starting"),
        };
        server.with_addr(addr)
    }

    /// [`MockModelServer::start`] for synchronous tests (must not be called inside a runtime).
    pub fn start_blocking() -> MockModelServer {
        let (server, ready) = Self::spawn();
        let addr = match ready.blocking_recv() {
            Ok(Ok(addr)) => addr,
            Ok(Err(e)) => panic!("mock model server failed to start: {e}"),
            Err(_) => panic!("mock model server thread died while starting"),
        };
        server.with_addr(addr)
    }

    fn with_addr(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self.base_url = format!("http://{addr}/v1");
        self
    }

    fn spawn() -> (Self, oneshot::Receiver<Result<SocketAddr, String>>) {
        let (count, _) = watch::channel(0usize);
        let shared = Arc::new(Shared {
            recorded: Mutex::new(Recorded::default()),
            count,
            hangups: watch::Sender::new(0),
        });
        let (ready_tx, ready_rx) = oneshot::channel();
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let thread_shared = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("mock-model-server".to_owned())
            .spawn(move || serve_on_own_runtime(thread_shared, ready_tx, shutdown_rx));
        if let Err(e) = spawned {
            panic!("mock model server: cannot spawn its thread: {e}");
        }
        let server = MockModelServer {
            base_url: String::new(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            shared,
            shutdown: Some(shutdown_tx),
        };
        (server, ready_rx)
    }

    /// Queues a reply; each request takes the oldest queued one.
    pub fn push(&self, reply: MockReply) {
        self.shared.lock().queue.push_back(reply);
    }

    /// The reply served when the queue is empty. Without one, such a request gets a 500 whose
    /// body says the script ran out.
    pub fn set_default(&self, reply: MockReply) {
        self.shared.lock().default = Some(reply);
    }

    /// Answers every request the queue does not, from its body (a scripted conversation that
    /// reacts to what the host sent: summariser calls, tool results).
    pub fn set_responder(&self, f: impl Fn(&Value) -> MockReply + Send + Sync + 'static) {
        self.shared.lock().responder = Some(Arc::new(f));
    }

    /// Forgets the recorded requests (long scripted conversations).
    pub fn clear_requests(&self) {
        let mut rec = self.shared.lock();
        rec.requests.clear();
        rec.headers.clear();
    }

    /// Every chat request body received, in order (a body that is not JSON is kept as a string).
    pub fn requests(&self) -> Vec<Value> {
        self.shared.lock().requests.clone()
    }

    /// The headers of every chat request, names lower-case, in order.
    pub fn request_headers(&self) -> Vec<Vec<(String, String)>> {
        self.shared.lock().headers.clone()
    }

    /// Stops keeping request bodies (each later one is recorded as `null`, headers as empty) while
    /// still counting requests: for benchmarks whose requests are megabytes each.
    pub fn forget_request_bodies(&self) {
        self.shared.lock().forget_bodies = true;
    }

    /// Number of chat requests received so far.
    pub fn request_count(&self) -> usize {
        *self.shared.count.borrow()
    }

    /// Streamed replies whose client hung up before the reply ended (a cancelled model call).
    pub fn hangups(&self) -> usize {
        *self.shared.hangups.borrow()
    }

    /// Waits until the clients of at least `n` streamed replies hung up before those replies
    /// ended; false on timeout.
    pub async fn wait_for_hangups(&self, n: usize, timeout: Duration) -> bool {
        let mut rx = self.shared.hangups.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|c| *c >= n))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Waits until at least `n` chat requests have arrived; false on timeout.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        let mut rx = self.shared.count.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|c| *c >= n))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

impl Drop for MockModelServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

fn serve_on_own_runtime(
    shared: Arc<Shared>,
    ready: oneshot::Sender<Result<SocketAddr, String>>,
    shutdown: oneshot::Receiver<()>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(format!("runtime: {e}")));
            return;
        }
    };
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send(Err(format!("bind 127.0.0.1:0: {e}")));
                return;
            }
        };
        match listener.local_addr() {
            Ok(addr) => {
                let _ = ready.send(Ok(addr));
            }
            Err(e) => {
                let _ = ready.send(Err(format!("local_addr: {e}")));
                return;
            }
        }
        // No body limit: the host benchmarks send requests of many megabytes.
        let app = axum::Router::new()
            .fallback(handle)
            .layer(axum::extract::DefaultBodyLimit::disable())
            .with_state(shared);
        tokio::select! {
            _ = axum::serve(listener, app) => {}
            _ = shutdown => {}
        }
    });
    // Dropping the runtime here cancels every connection task, stalled streams included.
    drop(rt);
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().trim_end_matches('/');
    if method == Method::GET && path.ends_with("/models") {
        return json_response(
            StatusCode::OK,
            r#"{"object":"list","data":[{"id":"mock-model","object":"model","owned_by":"mock"}]}"#,
        );
    }
    if method != Method::POST || !path.ends_with("/chat/completions") {
        return json_response(
            StatusCode::NOT_FOUND,
            r#"{"error":{"message":"mock model server: only POST …/chat/completions is served","type":"not_found"}}"#,
        );
    }
    let request: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let header_list: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    // A request that asks for no stream gets one JSON body, as from a server. (No `stream` field
    // at all still streams: the tests that post raw bodies rely on it.)
    let streamed = request.get("stream").and_then(Value::as_bool) != Some(false);
    let (reply, n) = {
        let mut rec = shared.lock();
        let responder = rec.responder.clone();
        let reply = rec
            .queue
            .pop_front()
            .or_else(|| responder.map(|f| f(&request)))
            .or_else(|| rec.default.clone());
        if rec.forget_bodies {
            rec.requests.push(Value::Null);
            rec.headers.push(Vec::new());
        } else {
            rec.requests.push(request);
            rec.headers.push(header_list);
        }
        let n = rec.requests.len();
        (reply, n)
    };
    shared.count.send_replace(n);
    match reply {
        Some(MockReply {
            body: crate::reply::Body::Forward { base_url },
            ..
        }) => forward(&base_url, body).await,
        Some(reply) => respond(reply, streamed, &shared),
        None => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &serde_json::json!({"error": {
                "message": format!("mock model server: no scripted reply left for request #{n}"),
                "type": "mock_script_exhausted"}})
            .to_string(),
        ),
    }
}

/// Posts the body to the real server and relays its answer as it streams.
async fn forward(base_url: &str, body: Bytes) -> Response {
    let url = format!("{base_url}/chat/completions");
    let sent = reqwest::Client::builder().no_proxy().build().map(|c| {
        c.post(&url)
            .header("content-type", "application/json")
            .body(body)
            .send()
    });
    let upstream = match sent {
        Ok(fut) => fut.await,
        Err(e) => Err(e),
    };
    match upstream {
        Ok(up) => {
            let status = StatusCode::from_u16(up.status().as_u16())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let content_type = up
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok());
            let mut resp = Response::new(HttpBody::from_stream(up.bytes_stream()));
            *resp.status_mut() = status;
            if let Some(ct) = content_type {
                resp.headers_mut()
                    .insert(axum::http::header::CONTENT_TYPE, ct);
            }
            resp
        }
        Err(e) => json_response(
            StatusCode::BAD_GATEWAY,
            &serde_json::json!({"error": {
                "message": format!("mock model server: forwarding to {url} failed: {e}"),
                "type": "mock_forward_failed"}})
            .to_string(),
        ),
    }
}

fn json_response(status: StatusCode, body: &str) -> Response {
    let mut resp = Response::new(HttpBody::from(body.to_owned()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn respond(reply: MockReply, streamed: bool, shared: &Arc<Shared>) -> Response {
    let json = (!streamed).then(|| reply.json_body()).flatten();
    let mut resp = match &reply.body {
        Body::Script { .. } if let Some(json) = &json => json_response(StatusCode::OK, json),
        Body::Forward { .. } => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            r#"{"error":{"message":"mock model server: a forwarded reply is relayed, not played","type":"mock_internal"}}"#,
        ),
        Body::Status { code, body } => {
            let status = StatusCode::from_u16(*code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let is_json = serde_json::from_str::<Value>(body).is_ok();
            let mut resp = Response::new(HttpBody::from(body.clone()));
            *resp.status_mut() = status;
            let ct = if is_json {
                "application/json"
            } else {
                "text/plain; charset=utf-8"
            };
            resp.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static(ct),
            );
            resp
        }
        Body::Script { .. } | Body::RawSse(_) | Body::RawBytes(_) => {
            let play = Playback {
                frames: reply.frames().into_iter().map(Bytes::from).collect(),
                sent: 0,
                delay: reply.chunk_delay,
                cut: reply.cut,
                finished: false,
                hangup: Hangup {
                    shared: Arc::clone(shared),
                    ended: false,
                },
            };
            let stream = futures_util::stream::unfold(play, Playback::next);
            let mut resp = Response::new(HttpBody::from_stream(stream));
            resp.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            resp.headers_mut().insert(
                axum::http::header::CACHE_CONTROL,
                HeaderValue::from_static("no-cache"),
            );
            resp
        }
    };
    for (k, v) in &reply.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            resp.headers_mut().insert(name, value);
        }
    }
    resp
}

struct Playback {
    frames: VecDeque<Bytes>,
    sent: usize,
    delay: Option<Duration>,
    cut: Option<Cut>,
    finished: bool,
    hangup: Hangup,
}

/// Counts a reply dropped before its end: hyper drops the body when the client hangs up.
struct Hangup {
    shared: Arc<Shared>,
    ended: bool,
}

impl Drop for Hangup {
    fn drop(&mut self) {
        if !self.ended {
            self.shared.hangups.send_modify(|n| *n += 1);
        }
    }
}

impl Playback {
    async fn next(mut self) -> Option<(Result<Bytes, std::io::Error>, Self)> {
        if self.finished {
            self.hangup.ended = true;
            return None;
        }
        match self.cut {
            Some(Cut::Stall(n)) if self.sent >= n => {
                // Until the client hangs up (hyper then drops this stream) or the server stops.
                std::future::pending::<()>().await;
            }
            Some(Cut::Drop(n)) if self.sent >= n => {
                self.finished = true;
                // hyper discards frames still buffered when a body fails; pausing first lets it
                // flush what was "sent", so the client really sees those bytes before the cut.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let err = std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "mock model server: connection dropped on cue",
                );
                return Some((Err(err), self));
            }
            _ => {}
        }
        let Some(frame) = self.frames.pop_front() else {
            self.hangup.ended = true;
            return None;
        };
        if self.sent > 0
            && let Some(d) = self.delay
        {
            tokio::time::sleep(d).await;
        }
        self.sent += 1;
        Some((Ok(frame), self))
    }
}

/// The text of the last user message of a recorded chat request (empty when there is none): what
/// a scripted responder usually answers to.
pub fn last_user_text(req: &Value) -> String {
    req["messages"]
        .as_array()
        .and_then(|ms| ms.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}
