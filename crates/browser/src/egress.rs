//! A profile's egress: a forward proxy on 127.0.0.1 that its Chromium sends every connection
//! through (`--proxy-server`, loopback included with `<-loopback>`), so the address a page's
//! request reaches is the one the request guard checked. Chromium never resolves a page's host
//! name itself: the proxy asks [`RequestGuard::addresses`] (which resolves and checks every
//! address) and connects to exactly what it answered — a name that resolves to a public
//! address for the check and to a private one a moment later (DNS rebinding) gets nowhere,
//! and neither do sub-resources, scripts' fetches, workers or WebSockets, which the DevTools
//! request interception does not all see.
//!
//! It speaks `CONNECT host:port` (https and wss: a byte tunnel once the address is admitted)
//! and absolute-form plain HTTP (`GET http://host/path`: forwarded one request per upstream
//! connection, so a kept-alive client connection cannot carry a second host's request to the
//! first host's address). A refusal is `403` with the reason, remembered so a navigation it
//! stopped reports the refusal and not a generic network failure.
//!
//! The port is on loopback, where every local account can connect; only connections from
//! sockets of the host's own user (the Chromium it started) are served — the owner of the
//! client socket is asked of the kernel ([`crate::peer`]) — so another account on the machine
//! cannot use a profile's admissions (its private-network permission, its checked addresses)
//! as a relay.

use crate::RequestGuard;
use http_body_util::{Either, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// How long one upstream connect may take before the next checked address is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Refusals kept for the navigation that asks which of its requests were refused.
const KEPT_REFUSALS: usize = 32;

type Body = Either<Incoming, Either<Full<Bytes>, Empty<Bytes>>>;

/// One profile's proxy. Dropping it stops accepting connections.
pub struct Egress {
    port: u16,
    state: Arc<State>,
    accept: tokio::task::JoinHandle<()>,
}

struct State {
    guard: Arc<dyn RequestGuard>,
    /// The profile's current action allows private networks (`allow_private_network=true`).
    allow_private: AtomicBool,
    refusals: Mutex<Refusals>,
}

#[derive(Default)]
struct Refusals {
    seq: u64,
    recent: VecDeque<(u64, String, String)>,
}

impl Egress {
    /// Binds a port on 127.0.0.1 and starts serving it.
    pub async fn start(guard: Arc<dyn RequestGuard>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let state = Arc::new(State {
            guard,
            allow_private: AtomicBool::new(false),
            refusals: Mutex::new(Refusals::default()),
        });
        let accept = tokio::spawn(accept_loop(listener, state.clone()));
        Ok(Self {
            port,
            state,
            accept,
        })
    }

    /// The proxy's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The Chromium switches that send every connection, loopback included, through it.
    pub fn chromium_args(&self) -> [String; 2] {
        [
            format!("--proxy-server=http://127.0.0.1:{}", self.port),
            "--proxy-bypass-list=<-loopback>".into(),
        ]
    }

    /// Sets whether connections to private addresses are let through from now on.
    pub fn allow_private(&self, allow: bool) {
        self.state.allow_private.store(allow, Ordering::Release);
    }

    /// A mark to ask [`Self::refused_since`] about.
    pub fn mark(&self) -> u64 {
        self.state.refusals().seq
    }

    /// The newest refusal after `mark` (of `host` when given): `host: reason`.
    pub fn refused_since(&self, mark: u64, host: Option<&str>) -> Option<String> {
        self.state
            .refusals()
            .recent
            .iter()
            .rev()
            .take_while(|(seq, _, _)| *seq > mark)
            .find(|(_, h, _)| host.is_none_or(|want| want.eq_ignore_ascii_case(h)))
            .map(|(_, h, why)| format!("{h}: {why}"))
    }
}

impl Egress {
    /// Stops accepting connections (the browser is closing; a handle may outlive it).
    pub fn stop(&self) {
        self.accept.abort();
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        self.stop();
    }
}

impl State {
    fn refusals(&self) -> std::sync::MutexGuard<'_, Refusals> {
        self.refusals.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn refuse(&self, host: &str, why: &str) -> Response<Body> {
        tracing::info!(host, reason = why, "browser connection refused");
        let mut r = self.refusals();
        r.seq += 1;
        let seq = r.seq;
        r.recent.push_back((seq, host.to_string(), why.to_string()));
        if r.recent.len() > KEPT_REFUSALS {
            r.recent.pop_front();
        }
        answer(StatusCode::FORBIDDEN, &format!("refused: {why}"))
    }

    /// A connection to the first of the guard's checked addresses of `host:port` that answers.
    async fn connect(&self, host: &str, port: u16) -> Result<TcpStream, Response<Body>> {
        let allow = self.allow_private.load(Ordering::Acquire);
        let addrs = match self.guard.addresses(host, port, allow).await {
            Ok(a) if !a.is_empty() => a,
            Ok(_) => return Err(self.refuse(host, "no address")),
            Err(why) => return Err(self.refuse(host, &why)),
        };
        let mut last = String::new();
        for addr in addrs {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(s)) => return Ok(s),
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "timed out".into(),
            }
        }
        Err(answer(
            StatusCode::BAD_GATEWAY,
            &format!("cannot connect to {host}:{port}: {last}"),
        ))
    }
}

fn answer(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(Either::Right(Either::Left(Full::new(Bytes::from(
        text.to_string(),
    )))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    loop {
        let (sock, peer) = match listener.accept().await {
            Ok(pair) => pair,
            Err(e) => {
                // Out of descriptors and the like: wait for some to be released.
                tracing::warn!("browser egress accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let state = state.clone();
        tokio::spawn(async move {
            let own = sock
                .local_addr()
                .ok()
                .and_then(|local| crate::peer::socket_owner(peer, local))
                .is_some_and(|uid| uid == crate::peer::own_uid());
            if !own {
                tracing::warn!(%peer, "browser egress: a connection from another account was refused");
                return;
            }
            let service = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(handle(&state, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(sock), service)
                .with_upgrades()
                .await;
        });
    }
}

/// `host` and `port` of a request target; an IPv6 literal without its brackets.
fn target(uri: &hyper::Uri, default_port: Option<u16>) -> Option<(String, u16)> {
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().or(default_port)?;
    (!host.is_empty()).then(|| (host.to_string(), port))
}

async fn handle(state: &State, req: Request<Incoming>) -> Response<Body> {
    if req.method() == Method::CONNECT {
        let Some((host, port)) = target(req.uri(), None) else {
            return answer(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
        };
        let mut upstream = match state.connect(&host, port).await {
            Ok(s) => s,
            Err(r) => return r,
        };
        tokio::spawn(async move {
            if let Ok(upgraded) = hyper::upgrade::on(req).await {
                let mut client = TokioIo::new(upgraded);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
        });
        return Response::new(Either::Right(Either::Right(Empty::new())));
    }
    if req.uri().scheme_str() != Some("http") {
        return answer(
            StatusCode::BAD_REQUEST,
            "only CONNECT and absolute http:// requests are proxied",
        );
    }
    let Some((host, port)) = target(req.uri(), Some(80)) else {
        return answer(StatusCode::BAD_REQUEST, "the request names no host");
    };
    let upstream = match state.connect(&host, port).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake::<_, Incoming>(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(e) => return answer(StatusCode::BAD_GATEWAY, &format!("upstream: {e}")),
        };
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let (mut parts, body) = req.into_parts();
    let authority = parts.uri.authority().map(|a| a.as_str().to_string());
    parts.uri = match parts
        .uri
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .parse()
    {
        Ok(u) => u,
        Err(_) => return answer(StatusCode::BAD_REQUEST, "unreadable request target"),
    };
    for hop in ["proxy-connection", "proxy-authorization", "keep-alive"] {
        parts.headers.remove(hop);
    }
    if !parts.headers.contains_key(hyper::header::HOST)
        && let Some(v) = authority.and_then(|a| a.parse().ok())
    {
        parts.headers.insert(hyper::header::HOST, v);
    }
    match sender.send_request(Request::from_parts(parts, body)).await {
        Ok(resp) => resp.map(Either::Left),
        Err(e) => answer(StatusCode::BAD_GATEWAY, &format!("upstream: {e}")),
    }
}
