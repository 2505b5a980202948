//! The server: configuration, the accept loop that serves each connection itself (so a fault
//! can close one without a response), and the handle tests hold. Requests go to `handler`.

use crate::auth;
use crate::error::{EvalError, Result};
use crate::faults::{Fault, FaultBook};
use crate::handler;
use crate::ledger::{Attempt, ToolEvent, WorldLedger};
use crate::recorded::{AnswerStyle, OpenApiServing};
use crate::state::{ConfigSection, DuplicateSubscription, Restrictions, StateFile, WorldState};
use crate::world::World;
use axum::Router;
use axum::body::Body;
use hyper_util::rt::TokioIo;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// MoviePilot's `ACCESS_TOKEN_EXPIRE_MINUTES` default: 8 days.
const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(8 * 24 * 60 * 60);

/// How the fake runs.
#[derive(Clone)]
pub struct FakeConfig {
    /// Where to listen; port 0 picks a free one.
    pub listen: SocketAddr,
    /// MoviePilot's `SECRET_KEY` (HS256).
    pub secret_key: String,
    /// Lifetime of the tokens the login endpoint issues.
    pub token_ttl: Duration,
    pub faults: Vec<Fault>,
    pub restrictions: Restrictions,
    pub duplicate_subscription: DuplicateSubscription,
    /// The OpenAPI document served (and, for a given one, routed by).
    pub openapi: OpenApiServing,
    /// How replies are shaped.
    pub answers: AnswerStyle,
}

impl fmt::Debug for FakeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeConfig")
            .field("listen", &self.listen)
            .field("secret_key", &"<redacted>")
            .field("token_ttl", &self.token_ttl)
            .field("faults", &self.faults)
            .field("restrictions", &self.restrictions)
            .field("duplicate_subscription", &self.duplicate_subscription)
            .field("answers", &self.answers)
            .finish_non_exhaustive()
    }
}

impl FakeConfig {
    /// Loopback on a free port, no faults, MoviePilot's defaults otherwise.
    pub fn new(secret_key: impl Into<String>) -> FakeConfig {
        FakeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            secret_key: secret_key.into(),
            token_ttl: DEFAULT_TOKEN_TTL,
            faults: Vec::new(),
            restrictions: Restrictions::default(),
            duplicate_subscription: DuplicateSubscription::default(),
            openapi: OpenApiServing::default(),
            answers: AnswerStyle::default(),
        }
    }

    /// Serving as the recorded real MoviePilot v2: this OpenAPI document (its bytes), routing
    /// by it, and its answer shapes.
    pub fn recorded_v2(secret_key: impl Into<String>, openapi: Vec<u8>) -> Result<FakeConfig> {
        let serving = OpenApiServing::document(openapi)
            .map_err(|reason| EvalError::InvalidOpenApi { reason })?;
        Ok(FakeConfig {
            openapi: serving,
            answers: AnswerStyle::RecordedV2,
            ..FakeConfig::new(secret_key)
        })
    }

    /// From a state file's `config` section; the secret is required there.
    pub fn from_section(section: &ConfigSection, listen: SocketAddr, origin: &str) -> Result<Self> {
        let secret = section
            .secret_key
            .clone()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| EvalError::MissingSecret {
                origin: origin.to_string(),
            })?;
        Ok(FakeConfig {
            listen,
            secret_key: secret,
            token_ttl: section.token_ttl_minutes.map_or(DEFAULT_TOKEN_TTL, |m| {
                Duration::from_secs(m.saturating_mul(60))
            }),
            faults: section.faults.clone(),
            restrictions: section.restrictions.clone(),
            duplicate_subscription: section.duplicate_subscription,
            openapi: OpenApiServing::default(),
            answers: AnswerStyle::default(),
        })
    }
}

/// Reads a state file into the fake's configuration (listening on `listen`) and its world.
pub fn load_state_file(path: &Path, listen: SocketAddr) -> Result<(FakeConfig, WorldState)> {
    let file = StateFile::load(path)?;
    let config = FakeConfig::from_section(&file.config, listen, &path.display().to_string())?;
    Ok((config, file.state))
}

/// Runs the fake from a state file until `shutdown` resolves (for
/// `mpagent dev fake-moviepilot --listen ADDR --state FILE`).
pub async fn serve(
    listen: SocketAddr,
    state_file: &Path,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let (config, state) = load_state_file(state_file, listen)?;
    let handle = FakeMoviePilot::start(config, state).await?;
    tracing::info!(url = %handle.url(), "fake MoviePilot listening");
    shutdown.await;
    handle.shutdown().await;
    Ok(())
}

pub(crate) struct Inner {
    pub world: World,
    pub initial: WorldState,
    pub ledger: Vec<Attempt>,
    /// Host tool receipts (commands, browser), in the same world ledger.
    pub tool_events: Vec<ToolEvent>,
    pub faults: FaultBook,
    /// A reply was dropped: the run now holds an unknown outcome.
    pub unknown_returned: bool,
}

/// The fake's wall clock: the real one, moved forward by what a test asked for, so a token can
/// expire without the test sleeping.
#[derive(Default)]
pub(crate) struct Clock {
    ahead_secs: AtomicI64,
}

impl Clock {
    /// Seconds since the epoch, as the fake sees them.
    pub(crate) fn now(&self) -> i64 {
        let real = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        real.saturating_add(self.ahead_secs.load(Ordering::SeqCst))
    }

    fn advance(&self, by: Duration) {
        let secs = i64::try_from(by.as_secs()).unwrap_or(i64::MAX);
        self.ahead_secs.fetch_add(secs, Ordering::SeqCst);
    }
}

pub(crate) struct Shared {
    pub secret_key: String,
    pub token_ttl: Duration,
    pub clock: Clock,
    pub openapi: OpenApiServing,
    pub answers: AnswerStyle,
    /// Reads of the OpenAPI document (not in the ledger: they are no REST call).
    pub openapi_reads: AtomicU64,
    pub inner: Mutex<Inner>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic under the lock leaves plain data behind; keep serving it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The fake MoviePilot server.
pub struct FakeMoviePilot;

impl FakeMoviePilot {
    /// Validates `state`, binds `config.listen` and serves until the handle shuts it down.
    pub async fn start(config: FakeConfig, mut state: WorldState) -> Result<FakeHandle> {
        state.validate("state")?;
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| EvalError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| EvalError::Bind {
            addr: config.listen,
            source,
        })?;
        let shared = Arc::new(Shared {
            secret_key: config.secret_key,
            token_ttl: config.token_ttl,
            clock: Clock::default(),
            openapi: config.openapi,
            answers: config.answers,
            openapi_reads: AtomicU64::new(0),
            inner: Mutex::new(Inner {
                world: World {
                    state: state.clone(),
                    restrictions: config.restrictions,
                    duplicate_subscription: config.duplicate_subscription,
                },
                initial: state,
                ledger: Vec::new(),
                tool_events: Vec::new(),
                faults: FaultBook::new(config.faults),
                unknown_returned: false,
            }),
        });
        let shutdown = CancellationToken::new();
        let router = Router::new()
            .fallback(handler::handle)
            .with_state(shared.clone());
        let task = tokio::spawn(accept_loop(listener, router, shutdown.clone()));
        Ok(FakeHandle {
            addr,
            shared,
            shutdown,
            task: Some(task),
        })
    }
}

/// Controls a running fake. Dropping it stops the server too.
pub struct FakeHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl FakeHandle {
    /// `http://127.0.0.1:PORT`, the `MOVIEPILOT_URL` to give the agent.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many times the OpenAPI document was asked for.
    pub fn openapi_reads(&self) -> u64 {
        self.shared.openapi_reads.load(Ordering::SeqCst)
    }

    /// Every attempt so far, in arrival order (a copy).
    pub fn ledger(&self) -> Vec<Attempt> {
        self.shared.lock().ledger.clone()
    }

    /// The whole world ledger: API attempts and host tool receipts (copies).
    pub fn world_ledger(&self) -> WorldLedger {
        let inner = self.shared.lock();
        WorldLedger {
            attempts: inner.ledger.clone(),
            tool_events: inner.tool_events.clone(),
        }
    }

    /// A handle that writes host tool receipts into this world's ledger.
    pub fn recorder(&self) -> ToolRecorder {
        ToolRecorder {
            shared: self.shared.clone(),
        }
    }

    /// The world now (a copy).
    pub fn snapshot(&self) -> WorldState {
        self.shared.lock().world.state.clone()
    }

    /// The world as it started (a copy).
    pub fn initial_snapshot(&self) -> WorldState {
        self.shared.lock().initial.clone()
    }

    pub fn faults(&self) -> Vec<Fault> {
        self.shared.lock().faults.faults()
    }

    /// Replaces the faults; their counters start again from zero.
    pub fn set_faults(&self, faults: Vec<Fault>) {
        self.shared.lock().faults = FaultBook::new(faults);
    }

    pub fn add_fault(&self, fault: Fault) {
        self.shared.lock().faults.push(fault);
    }

    /// A token for the named state user, exactly as the login endpoint would issue it.
    pub fn token_for(&self, user_name: &str) -> Option<String> {
        let inner = self.shared.lock();
        let user = inner
            .world
            .state
            .users
            .iter()
            .find(|u| u.name == user_name)?;
        Some(auth::issue_token(
            user,
            &self.shared.secret_key,
            self.shared.token_ttl,
            self.shared.clock.now(),
        ))
    }

    /// Moves the fake's clock forward by `by`: the tokens it issued and the ones it checks age
    /// at once (an expiry test needs no sleep).
    pub fn advance_clock(&self, by: Duration) {
        self.shared.clock.advance(by);
    }

    /// Stops accepting, closes every connection (stalled calls included) and waits for them.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            // The loop only ends by cancellation; a join error means it panicked, and there
            // is nothing left to stop.
            let _ = task.await;
        }
    }
}

impl Drop for FakeHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Writes host tool receipts into a world's ledger (held by the evaluation tool wrappers).
#[derive(Clone)]
pub struct ToolRecorder {
    shared: Arc<Shared>,
}

impl fmt::Debug for ToolRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolRecorder").finish_non_exhaustive()
    }
}

impl ToolRecorder {
    /// Appends `event`, numbering it; returns its sequence.
    pub fn record(&self, mut event: ToolEvent) -> u64 {
        let mut inner = self.shared.lock();
        event.sequence = inner.tool_events.len() as u64 + 1;
        event.after_attempts = inner.ledger.len() as u64;
        let seq = event.sequence;
        inner.tool_events.push(event);
        seq
    }

    /// The tool events so far (copies).
    pub fn events(&self) -> Vec<ToolEvent> {
        self.shared.lock().tool_events.clone()
    }
}

async fn accept_loop(listener: TcpListener, router: Router, shutdown: CancellationToken) {
    let tracker = TaskTracker::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tracker.spawn(serve_connection(stream, router.clone(), shutdown.child_token()));
                }
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "fake MoviePilot: accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
    tracker.close();
    tracker.wait().await;
}

/// Cancelling it closes the connection at once, without writing anything.
#[derive(Clone)]
pub(crate) struct ConnectionKill(pub(crate) CancellationToken);

async fn serve_connection(stream: TcpStream, router: Router, kill: CancellationToken) {
    let conn_kill = ConnectionKill(kill.clone());
    let service =
        hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(conn_kill.clone());
            router.clone().oneshot(req.map(Body::new))
        });
    let conn =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        // Errors here are the client's (resets, malformed requests): nothing to do.
        _ = conn => {}
        // Dropping the connection future closes the socket with no response written.
        _ = kill.cancelled() => {}
    }
}
