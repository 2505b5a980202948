//! What the gateway knows of the user's MoviePilot: its routes reconciled with the catalogue
//! ([`Reconciliation`]), or — when it serves no usable OpenAPI — the catalogue alone. Shared by
//! every clone of a [`GatewayClient`](crate::GatewayClient); [`GatewayClient::send`] checks each
//! call against the current knowledge without any I/O, and [`ServerView::current`] re-reads the
//! document when it is due: never read, marked stale (a sign-in, a 404/405 from a route the
//! table said exists), or older than [`RECHECK_AFTER`] (a server upgraded in place). A document
//! with the same fingerprint keeps the table that was built for it, so the reconciliation runs
//! once per server version.
//!
//! [`GatewayClient::send`]: crate::GatewayClient::send

use crate::catalogue::{Operation, catalogue};
use crate::reconcile::{LiveRefusal, Reconciliation};
use crate::request::PreparedRequest;
use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// How long a reconciled table (or a server without an OpenAPI) is trusted before the
/// document is read again.
pub const RECHECK_AFTER: Duration = Duration::from_secs(10 * 60);
/// How soon an unreachable server is asked again.
pub const RETRY_UNREACHABLE_AFTER: Duration = Duration::from_secs(30);

/// Why only the catalogue is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoOpenApi {
    /// MoviePilot could not be reached (or did not answer in time).
    Unreachable(String),
    /// MoviePilot answered, but not with a usable OpenAPI document.
    NotServed(String),
}

impl std::fmt::Display for NoOpenApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoOpenApi::Unreachable(r) => write!(f, "MoviePilot could not be reached ({r})"),
            NoOpenApi::NotServed(r) => write!(f, "MoviePilot serves no usable OpenAPI ({r})"),
        }
    }
}

/// The gateway's current view of the server.
#[derive(Debug, Clone)]
pub enum ServerKnowledge {
    /// Not read yet: calls are checked against the catalogue alone.
    Unchecked,
    /// The server's routes, reconciled with the catalogue.
    Reconciled(Arc<Reconciliation>),
    /// No usable OpenAPI: the catalogue alone.
    CatalogueOnly(NoOpenApi),
}

impl ServerKnowledge {
    pub fn reconciliation(&self) -> Option<&Arc<Reconciliation>> {
        match self {
            ServerKnowledge::Reconciled(r) => Some(r),
            ServerKnowledge::Unchecked | ServerKnowledge::CatalogueOnly(_) => None,
        }
    }

    /// How the server is named in messages.
    pub fn label(&self) -> String {
        match self {
            ServerKnowledge::Reconciled(r) => r.label().to_owned(),
            ServerKnowledge::Unchecked | ServerKnowledge::CatalogueOnly(_) => {
                "this MoviePilot".to_owned()
            }
        }
    }

    /// Whether `id` may be offered and called (every catalogue operation without a table).
    pub fn offers(&self, id: &str) -> bool {
        match self {
            ServerKnowledge::Reconciled(r) => r.is_available(id),
            ServerKnowledge::Unchecked | ServerKnowledge::CatalogueOnly(_) => {
                catalogue().get(id).is_some()
            }
        }
    }

    /// The request as it goes to this server (see [`Reconciliation::adapt`]); unchanged
    /// without a table.
    pub fn adapt<'r>(
        &self,
        request: &'r PreparedRequest,
    ) -> Result<Cow<'r, PreparedRequest>, LiveRefusal> {
        let ServerKnowledge::Reconciled(r) = self else {
            return Ok(Cow::Borrowed(request));
        };
        let op: &Operation =
            catalogue()
                .get(request.operation_id())
                .ok_or_else(|| LiveRefusal::Unavailable {
                    operation_id: request.operation_id(),
                    server: r.label().to_owned(),
                    status: "absent",
                    reason: "it is not a catalogue operation".to_owned(),
                })?;
        r.adapt(op, request).map(Cow::Owned)
    }
}

type Listener = Arc<dyn Fn(&ServerKnowledge) + Send + Sync>;

#[derive(Clone)]
struct Snapshot {
    knowledge: Arc<ServerKnowledge>,
    checked_at: Option<Instant>,
    stale: bool,
}

/// The shared, refreshable knowledge of one server.
pub struct ServerView {
    state: RwLock<Snapshot>,
    /// One refresh at a time; the others wait and take its result.
    refreshing: tokio::sync::Mutex<()>,
    listeners: Mutex<Vec<Listener>>,
}

impl std::fmt::Debug for ServerView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerView")
            .field("knowledge", &self.knowledge())
            .finish_non_exhaustive()
    }
}

impl Default for ServerView {
    fn default() -> Self {
        ServerView {
            state: RwLock::new(Snapshot {
                knowledge: Arc::new(ServerKnowledge::Unchecked),
                checked_at: None,
                stale: false,
            }),
            refreshing: tokio::sync::Mutex::new(()),
            listeners: Mutex::new(Vec::new()),
        }
    }
}

impl ServerView {
    fn snapshot(&self) -> Snapshot {
        self.state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The knowledge now, without any I/O.
    pub fn knowledge(&self) -> Arc<ServerKnowledge> {
        self.snapshot().knowledge
    }

    /// Read the document again before the next call (a sign-in; a route the table said
    /// exists answered 404/405).
    pub fn mark_stale(&self) {
        self.state
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .stale = true;
    }

    /// Called with the new knowledge whenever it changes (a new document, or a change between
    /// a table and the catalogue alone).
    pub fn on_change(&self, listener: impl Fn(&ServerKnowledge) + Send + Sync + 'static) {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::new(listener));
    }

    fn due(s: &Snapshot, now: Instant) -> bool {
        let Some(at) = s.checked_at else {
            return true;
        };
        let age = now.saturating_duration_since(at);
        s.stale
            || match &*s.knowledge {
                ServerKnowledge::Unchecked => true,
                ServerKnowledge::CatalogueOnly(NoOpenApi::Unreachable(_)) => {
                    age >= RETRY_UNREACHABLE_AFTER
                }
                ServerKnowledge::Reconciled(_)
                | ServerKnowledge::CatalogueOnly(NoOpenApi::NotServed(_)) => age >= RECHECK_AFTER,
            }
    }

    /// The knowledge, read again first when it is due.
    pub async fn current(&self, client: &crate::GatewayClient) -> Arc<ServerKnowledge> {
        let s = self.snapshot();
        if !Self::due(&s, Instant::now()) {
            return s.knowledge;
        }
        self.refresh(client).await
    }

    /// Reads the server's OpenAPI now and reconciles it (unless its fingerprint is the one the
    /// current table was built for).
    pub async fn refresh(&self, client: &crate::GatewayClient) -> Arc<ServerKnowledge> {
        let asked = Instant::now();
        let _one = self.refreshing.lock().await;
        let before = self.snapshot();
        // Someone else refreshed while this call waited.
        if before.checked_at.is_some_and(|at| at >= asked) && !before.stale {
            return before.knowledge;
        }
        let fetched = client.fetch_openapi().await;
        let next: Arc<ServerKnowledge> = match (fetched, &*before.knowledge) {
            (Ok(api), ServerKnowledge::Reconciled(r)) if r.fingerprint() == api.fingerprint => {
                before.knowledge.clone()
            }
            (Ok(api), _) => Arc::new(ServerKnowledge::Reconciled(Arc::new(Reconciliation::new(
                catalogue(),
                api,
            )))),
            // A server that is down now keeps the table it had: its routes did not change.
            (Err(NoOpenApi::Unreachable(_)), ServerKnowledge::Reconciled(_)) => {
                before.knowledge.clone()
            }
            (Err(why), _) => Arc::new(ServerKnowledge::CatalogueOnly(why)),
        };
        let changed = !Arc::ptr_eq(&next, &before.knowledge) && differs(&before.knowledge, &next);
        {
            let mut s = self.state.write().unwrap_or_else(PoisonError::into_inner);
            s.knowledge = next.clone();
            s.checked_at = Some(Instant::now());
            s.stale = false;
        }
        if changed {
            log_change(&next);
            let listeners = self
                .listeners
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            for l in listeners {
                l(&next);
            }
        }
        next
    }
}

/// Whether two pieces of knowledge differ in what they offer or say (the same table, or the
/// same kind of fallback with the same reason, is no change).
fn differs(a: &ServerKnowledge, b: &ServerKnowledge) -> bool {
    match (a, b) {
        (ServerKnowledge::Reconciled(x), ServerKnowledge::Reconciled(y)) => {
            x.fingerprint() != y.fingerprint()
        }
        (ServerKnowledge::CatalogueOnly(x), ServerKnowledge::CatalogueOnly(y)) => {
            std::mem::discriminant(x) != std::mem::discriminant(y)
        }
        (ServerKnowledge::Unchecked, ServerKnowledge::Unchecked) => false,
        _ => true,
    }
}

/// Said once per change, not per call.
fn log_change(k: &ServerKnowledge) {
    match k {
        ServerKnowledge::Reconciled(r) => tracing::info!(
            server = %r.label(),
            operations = %r.counts(),
            "MoviePilot routes read from its OpenAPI; operations it does not serve are not offered"
        ),
        ServerKnowledge::CatalogueOnly(why) => tracing::warn!(
            reason = %why,
            "MoviePilot's OpenAPI is not available; using the operation catalogue alone"
        ),
        ServerKnowledge::Unchecked => {}
    }
}
