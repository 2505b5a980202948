//! The HTTP host of moviepilot-agent (axum): accounts and bearer auth, the SSE chat stream, the
//! session endpoints, an OpenAI-compatible endpoint and the embedded web page.
//!
//! Public API:
//! - [`ServerConfig`]: listen address, `MPA_ADMIN_TOKEN`, token lifetime, advertised model name,
//!   and the limits against slow and lying clients (body size, header and body read timeouts,
//!   connections per address).
//! - [`Host::bind`] binds the listener ([`Host::local_addr`] tells the port when 0 was asked);
//!   [`Host::run`] serves until the given shutdown future resolves, then stops accepting, stops
//!   every running turn through [`mpa_core::Agent::shutdown`] (snapshots written) and returns
//!   within [`SHUTDOWN_BUDGET`].
//! - [`router`]: the routes, for embedding.
//!
//! Routes: `GET /healthz`; `POST /api/v1/login`, `POST /api/v1/logout`, `GET /api/v1/me`;
//! `POST /api/v1/agent/stream` (SSE: `start`, `delta`, `tool`, `error`, `heartbeat`, `done`, and
//! `interaction-protected` for a confirmed secret read);
//! `GET /api/v1/agent/sessions?page&count[&all]`, `GET|DELETE /api/v1/agent/sessions/{id}`,
//! `POST /api/v1/agent/sessions/{id}/stop`; `POST /v1/chat/completions`, `GET /v1/models`;
//! `POST /api/v1/agent/render` (markdown to safe HTML, [`markdown`]); `/` and `/assets/*` (the
//! page, compressed and cacheable, [`web`]).
//!
//! Every error, in every route — handler errors, rejected bodies, queries and paths, unknown
//! routes and methods, responses of layers — is the JSON envelope of [`ApiError`] with a stable
//! `code` (see [`extract`] and [`error::envelope_errors`]).
//!
//! Slow and lying clients (hyper's and tower-http's own limits, no timers of ours): a header
//! read timeout that also closes idle keep-alive connections, a body read timeout (408
//! `request_timeout`), a `Content-Length` over the limit answered 413 before the body is read,
//! and a cap on connections per client address (429 `too_many_connections`). Connections are
//! served by hyper's HTTP/1 server directly (`serve.rs`), since axum's `serve` cannot set the
//! header timeout.
//!
//! Invariants: session ids from clients only locate — the core derives the server-side id from
//! the caller's user id and the client's id ([`mpa_core::Agent::resolve_session`]), so the same
//! client id names a different session for every user and another user's id is exactly a missing
//! one on every route (a new session on the stream and the OpenAI endpoint, 404 elsewhere);
//! responses carry the client's id. Only a login admin's explicit continuation from the web page
//! (`user_id`, see [`chat`]) reaches another user's chat; a client hanging up never stops a turn;
//! tokens are stored as SHA-256 hashes and no token, password or request body is ever logged.

pub mod attach;
pub mod auth;
pub mod chat;
pub mod error;
pub mod extract;
pub mod markdown;
pub mod mcp;
pub mod openai;
mod serve;
pub mod settings;
pub mod sse;
pub mod state;
pub mod web;

pub use error::{ApiError, Result, ServerError};
pub use state::{AppState, ServerConfig};

use axum::Router;
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post, put};
use mpa_core::Agent;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Longest time from the shutdown signal to [`Host::run`] returning.
pub const SHUTDOWN_BUDGET: Duration = Duration::from_secs(9);

/// Largest accepted request body by default ([`ServerConfig::max_body`]).
pub const MAX_BODY: usize = 32 * 1024 * 1024;

/// All routes over `state`.
pub fn router(state: AppState) -> Router {
    let limited = Router::new()
        .route("/", get(web::index))
        .route("/assets/{name}", get(web::asset))
        .route("/healthz", get(chat::healthz))
        .route("/api/v1/login", post(auth::login))
        .route("/api/v1/logout", post(auth::logout))
        .route("/api/v1/me", get(auth::me))
        .route("/api/v1/agent/stream", post(chat::stream))
        .route("/api/v1/agent/render", post(web::render))
        .route("/api/v1/agent/file/{id}", get(attach::file))
        .route("/api/v1/agent/sessions", get(chat::list_sessions))
        .route(
            "/api/v1/agent/sessions/{id}",
            get(chat::session_detail)
                .delete(chat::delete_session)
                .patch(chat::rename_session),
        )
        .route(
            "/api/v1/agent/sessions/{id}/display",
            put(chat::save_display),
        )
        .route("/api/v1/agent/sessions/{id}/stop", post(chat::stop_session))
        .route("/api/v1/agent/commands", get(settings::list_commands))
        .route("/api/v1/agent/memory", get(settings::memory))
        .route("/api/v1/agent/memory/{store}", post(settings::memory_edit))
        .route(
            "/api/v1/agent/memory/proposals/{id}/{decision}",
            post(settings::proposal),
        )
        .route("/api/v1/agent/skills", get(settings::skills))
        .route("/api/v1/agent/skills/{name}", get(settings::skill))
        .route(
            "/api/v1/agent/skills/{name}/{action}",
            post(settings::skill_action),
        )
        .route(
            "/api/v1/agent/personas",
            get(settings::personas).post(settings::create_persona),
        )
        .route("/api/v1/agent/personas/{id}", put(settings::edit_persona))
        .route("/v1/chat/completions", post(openai::completions))
        .route("/v1/models", get(openai::models))
        .merge(mcp::routes(&state))
        // The body limit is tower-http's: it refuses a too-large Content-Length with 413 before
        // reading a byte (axum's own limit would wait for the body), and caps bodies without one.
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            state.cfg.max_body,
        ));
    // Uploads count the file's own bytes (32 MiB of file, whatever the framing), see `attach`.
    let uploads = Router::new().route("/api/v1/agent/upload", post(attach::upload));
    limited
        .merge(uploads)
        .fallback(error::no_route)
        .method_not_allowed_fallback(error::wrong_method)
        .layer(axum::extract::DefaultBodyLimit::disable())
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            state.cfg.body_read_timeout,
        ))
        .layer(axum::middleware::from_fn(error::envelope_errors))
        .layer(axum::middleware::from_fn(error::localise))
        .layer(axum::middleware::from_fn(request_log))
        .with_state(state)
}

/// Gives every request an id (`x-request-id`, echoed back) and logs method, path, status and
/// latency under it. Headers, queries and bodies are never logged: they carry tokens and passwords.
async fn request_log(req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|s| {
            !s.is_empty()
                && s.len() <= 64
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
        .map_or_else(
            || uuid::Uuid::new_v4().simple().to_string()[..16].to_string(),
            str::to_owned,
        );
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let span = tracing::info_span!("request", id = %id, method = %method, path = %path);
    let started = Instant::now();
    let mut resp = next.run(req).instrument(span.clone()).await;
    span.in_scope(|| {
        tracing::info!(
            status = resp.status().as_u16(),
            ms = started.elapsed().as_millis() as u64,
            "response"
        );
    });
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}

/// A bound, not yet serving, host.
pub struct Host {
    listener: tokio::net::TcpListener,
    state: AppState,
}

impl Host {
    pub async fn bind(agent: Agent, cfg: ServerConfig) -> Result<Host> {
        let listener = tokio::net::TcpListener::bind(cfg.listen)
            .await
            .map_err(|source| ServerError::Bind {
                addr: cfg.listen,
                source,
            })?;
        let state = AppState {
            agent,
            cfg: Arc::new(cfg),
            shutting_down: CancellationToken::new(),
        };
        Ok(Host { listener, state })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener.local_addr().map_err(ServerError::Serve)
    }

    /// Serves until `shutdown` resolves, then shuts down gracefully (see the crate docs).
    pub async fn run<F>(self, shutdown: F) -> Result<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let state = self.state.clone();
        let stop_accepting = CancellationToken::new();
        let app = router(self.state.clone());
        let mut server = tokio::spawn(serve::serve(
            self.listener,
            app,
            Arc::clone(&self.state.cfg),
            stop_accepting.clone(),
        ));
        tokio::select! {
            () = shutdown => {}
            r = &mut server => {
                return match r {
                    Ok(r) => r.map_err(ServerError::Serve),
                    Err(e) => Err(ServerError::Serve(std::io::Error::other(e.to_string()))),
                };
            }
        }
        let started = Instant::now();
        tracing::info!("shutdown: refusing new turns, stopping running ones");
        state.shutting_down.cancel();
        stop_accepting.cancel();
        // Stopping a turn ends its SSE stream, which lets its connection close.
        let agent_budget = SHUTDOWN_BUDGET - Duration::from_secs(2);
        if tokio::time::timeout(agent_budget, state.agent.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("shutdown: sessions did not finish in time");
        }
        let rest = SHUTDOWN_BUDGET.saturating_sub(started.elapsed());
        match tokio::time::timeout(rest, &mut server).await {
            Ok(_) => {}
            Err(_) => {
                tracing::warn!("shutdown: open connections dropped");
                server.abort();
            }
        }
        tracing::info!(
            ms = started.elapsed().as_millis() as u64,
            "shutdown complete"
        );
        Ok(())
    }
}
