//! The host facade: [`Host::open`] builds everything a front end needs from one [`HostConfig`] —
//! the main store, the agent with every capability (each configures itself from the
//! [`HostConfig`], see [`crate::capability::standard`]) — so `server` and `cli` never assemble
//! the runtime themselves and depend on `core` alone.

use crate::agent::{Agent, AgentBuilder};
use crate::capability::{MoviePilot, Recall, RegistryOptions};
use crate::config::AgentConfig;
use crate::error::{CoreError, Result};
use crate::moviepilot::identity::{AccountResolver, IdentityResolver, Unconfigured};
use crate::moviepilot::standing::{Clock, Standing, SystemClock};
use crate::moviepilot::{AuthMode, MoviePilotAccess, MoviePilotConfig};
use mpa_protocol::{Actor, Durability};
use mpa_store::Store;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything the host is built from (parsed from flags and environment by the binary; no
/// library crate reads the environment).
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// `--data-dir` / `MPA_DATA_DIR`: the main store, memory, skills and evidence live here.
    pub data_dir: PathBuf,
    pub agent: AgentConfig,
    /// Where terminal commands start.
    pub workdir: PathBuf,
    /// A Python virtualenv put on terminals' PATH.
    pub venv_path: Option<PathBuf>,
    /// Register the diagnostic `test_*` tools (`MPA_ENABLE_TEST_TOOLS`).
    pub diagnostic_tools: bool,
    /// The MoviePilot gateway (`MOVIEPILOT_URL`, `MOVIEPILOT_SECRET_KEY`, `MPA_AUTH`).
    pub moviepilot: Option<MoviePilotHostConfig>,
    /// A conversation's terminals close after this long without use (`MPA_TERMINAL_IDLE_TTL`;
    /// `None` = only when the conversation is deleted or the host stops).
    pub terminal_idle_ttl: Option<std::time::Duration>,
    /// How hard the main store and the evidence history sync: `Durable` always, except for a
    /// data directory deleted after use (the evaluation harness's runs).
    pub durability: Durability,
    /// The browser (`browse_webpage`): which Chromium, how long an unused one stays open.
    pub browser: BrowserHostConfig,
    /// Where `search_web` searches (`SEARXNG_URL`, `BRAVE_SEARCH_API_KEY`).
    pub search: crate::tools::search_web::SearchConfig,
    /// How long one `execute_code` cell may run before its kernel is stopped (300 s).
    pub code_cell_timeout: Duration,
    /// Connections to the external MCP servers admins configure (timeouts, reconnect backoff).
    pub mcp: mpa_mcp::ClientOptions,
}

/// How the conversations' browsers start (`MPA_BROWSER_PATH`, `MPA_BROWSER_IDLE_TTL`).
#[derive(Debug, Clone)]
pub struct BrowserHostConfig {
    /// The Chromium to run; `None` looks for `chromium` on `PATH`. A path that does not work
    /// leaves the tool answering `browser_unavailable`, nothing else.
    pub executable: Option<PathBuf>,
    pub idle_ttl: Duration,
    /// Extra Chromium switches (tests map host names to the loopback fixture).
    pub extra_args: Vec<String>,
    /// `recognize_captcha`'s OCR service (`MPA_CAPTCHA_OCR_URL`); `None`: the tool says so.
    pub ocr_url: Option<String>,
}

impl Default for BrowserHostConfig {
    fn default() -> Self {
        Self {
            executable: None,
            idle_ttl: Duration::from_secs(30 * 60),
            extra_args: Vec::new(),
            ocr_url: None,
        }
    }
}

/// The gateway's settings, and optionally who calls are made as (the evaluation harness and
/// tests give a fixed table; otherwise the account store's records decide).
#[derive(Clone)]
pub struct MoviePilotHostConfig {
    pub config: MoviePilotConfig,
    pub identity: Option<Arc<dyn IdentityResolver>>,
    /// The clock of the account-standing checks (`None`: the system's; tests move their own).
    pub account_clock: Option<Arc<dyn Clock>>,
}

impl std::fmt::Debug for MoviePilotHostConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MoviePilotHostConfig")
            .field("config", &self.config)
            .field("identity", &self.identity.as_ref().map(|_| "custom"))
            .finish()
    }
}

impl HostConfig {
    pub fn new(data_dir: impl Into<PathBuf>, agent: AgentConfig) -> Self {
        let data_dir = data_dir.into();
        Self {
            workdir: data_dir.clone(),
            data_dir,
            agent,
            venv_path: None,
            diagnostic_tools: false,
            moviepilot: None,
            terminal_idle_ttl: Some(mpa_exec::DEFAULT_IDLE_SCOPE_TTL),
            durability: Durability::Durable,
            browser: BrowserHostConfig::default(),
            search: Default::default(),
            code_cell_timeout: Duration::from_secs(300),
            mcp: mpa_mcp::ClientOptions::default(),
        }
    }
}

/// Wall-clock time of each step of [`Host::open`], in order (a handful of clock reads; the
/// evaluation report lists them so the host's own overhead can be told apart).
pub type OpenPhases = Vec<(&'static str, Duration)>;

struct PhaseClock {
    last: Instant,
    phases: OpenPhases,
}

impl PhaseClock {
    fn start() -> Self {
        PhaseClock {
            last: Instant::now(),
            phases: Vec::with_capacity(8),
        }
    }

    fn mark(&mut self, phase: &'static str) {
        let now = Instant::now();
        self.phases.push((phase, now.duration_since(self.last)));
        self.last = now;
    }
}

/// A built host.
#[derive(Clone)]
pub struct Host {
    agent: Agent,
    data_dir: PathBuf,
    open_phases: Arc<OpenPhases>,
    /// Held (shared) for the life of the process: a cold-start recovery runs only when no other
    /// host process has the data directory open, so it never touches another process's writes.
    _running: Arc<std::fs::File>,
}

/// Cold start of the write ledger (spec runtime.md §6.8): `running` rows left by a process that
/// died become `unknown` — but only when this is the only host on the data directory.
async fn claim_data_dir(data_dir: &std::path::Path, store: &Store) -> Result<std::fs::File> {
    let path = data_dir.join("agent.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| CoreError::Config(format!("cannot open {}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => {
            let n = store.ledger_recover_running().await?;
            if n > 0 {
                tracing::warn!(
                    rows = n,
                    "writes interrupted by an earlier stop are now recorded as unknown"
                );
            }
            file.unlock()
                .map_err(|e| CoreError::Config(format!("cannot unlock {}: {e}", path.display())))?;
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            tracing::info!("another host uses this data directory; ledger recovery left to it");
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(CoreError::Config(format!(
                "cannot lock {}: {e}",
                path.display()
            )));
        }
    }
    let shared = file
        .try_clone()
        .map_err(|e| CoreError::Config(e.to_string()))?;
    tokio::task::spawn_blocking(move || shared.lock_shared().map(|()| shared))
        .await
        .map_err(|e| CoreError::Config(e.to_string()))?
        .map_err(|e| CoreError::Config(format!("cannot lock {}: {e}", path.display())))
}

impl Host {
    /// Opens the main store under the data directory (recovering the write ledger after a crash)
    /// and builds every hub and the agent.
    pub async fn open(cfg: HostConfig) -> Result<Host> {
        Self::open_with_tools(cfg, |_| {}).await
    }

    /// [`Host::open`] with a last say over the tool registry before the agent is built (the
    /// evaluation harness wraps `execute_command` in its scenario's rules this way).
    pub async fn open_with_tools(
        cfg: HostConfig,
        adjust: impl FnOnce(&mut crate::tools::ToolRegistry) + Send + 'static,
    ) -> Result<Host> {
        Self::open_with(cfg, |b| b.adjust(adjust)).await
    }

    /// [`Host::open`] with the host's own additions to the agent (capabilities, tools, gates,
    /// contributors), after the standard ones.
    pub async fn open_with(
        cfg: HostConfig,
        extend: impl FnOnce(AgentBuilder) -> AgentBuilder,
    ) -> Result<Host> {
        let mut clock = PhaseClock::start();
        let store = Store::open_in_with(&cfg.data_dir, cfg.durability)?;
        clock.mark("store_open");
        let running = claim_data_dir(&cfg.data_dir, &store).await?;
        clock.mark("data_dir_claim");
        let builder = Agent::builder(cfg.agent.clone(), store)
            .host(cfg.clone())
            .options(RegistryOptions {
                diagnostic_tools: cfg.diagnostic_tools,
            });
        let agent = extend(builder).build()?;
        clock.mark("capabilities");
        for c in agent.services().caps.iter() {
            c.start().await;
        }
        if let Some(hub) = crate::mcp::hub_of(&agent) {
            // The configured MCP servers' last listed tools join the registry's dynamic layer
            // (none is started); the registry exists only once the agent is built.
            hub.load(agent.services().tools.clone()).await?;
        }
        clock.mark("capabilities_start");
        if let (Some(mp), Some(gateway)) =
            (&cfg.moviepilot, agent.services().caps.get::<MoviePilot>())
            && mp.config.auth == AuthMode::MoviePilot
        {
            // Logins are checked by MoviePilot itself from now on.
            agent
                .accounts()
                .sign_in_with_moviepilot(gateway.access().client.clone());
            if let Some(standing) = gateway.standing() {
                standing.on_end(agent.turn_stopper());
                agent
                    .accounts()
                    .follow_moviepilot_standing(Arc::clone(standing));
            }
        }
        clock.mark("agent");
        Ok(Host {
            agent,
            data_dir: cfg.data_dir,
            open_phases: Arc::new(clock.phases),
            _running: Arc::new(running),
        })
    }

    /// The external MCP servers (admins' configuration, `mpagent mcp`).
    pub fn mcp(&self) -> Option<crate::mcp::McpHub> {
        crate::mcp::hub_of(&self.agent)
    }

    /// How long each step of [`Host::open`] took.
    pub fn open_phases(&self) -> &[(&'static str, Duration)] {
        &self.open_phases
    }

    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    pub fn accounts(&self) -> &crate::Accounts {
        self.agent.accounts()
    }

    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    /// Checks `MOVIEPILOT_SECRET_KEY` against the configured MoviePilot (one minted token, one
    /// cheap read): `None` without a MoviePilot.
    pub async fn check_moviepilot_key(
        &self,
        key: &str,
    ) -> Option<crate::moviepilot::doctor::KeyCheck> {
        let access = self.agent.services().caps.get::<MoviePilot>()?.access();
        let knowledge = access.client.server_knowledge().await;
        Some(crate::moviepilot::doctor::verify_key(&access.client, key, &knowledge).await)
    }

    /// The evidence history (for `mpagent history …`).
    pub fn history(&self) -> Result<&mpa_history::History> {
        self.agent
            .services()
            .caps
            .get::<Recall>()
            .map(Recall::history)
            .ok_or_else(|| CoreError::EvidenceUnavailable("history is not enabled".into()))
    }

    /// The local user `name`, created on first use (local CLI use is trusted: whoever can run the
    /// binary owns the data directory). `admin` grants admin rights for this invocation only.
    pub async fn local_actor(&self, name: &str, admin: bool) -> Result<Actor> {
        let mut actor = self.agent.accounts().ensure_local(name).await?.actor();
        actor.is_admin |= admin;
        Ok(actor)
    }
}

/// The gateway access, and — with MoviePilot sign-in — the account-standing checks its identity
/// resolver and the accounts share.
pub(crate) fn moviepilot_access(
    mp: &MoviePilotHostConfig,
    store: &Store,
) -> Result<(MoviePilotAccess, Option<Arc<Standing>>)> {
    let client =
        mpa_gateway::GatewayClient::new(mpa_gateway::GatewayConfig::new(mp.config.url.clone()))
            .map_err(|e| CoreError::Config(e.to_string()))?;
    let standing = (mp.config.auth == AuthMode::MoviePilot).then(|| {
        Arc::new(Standing::new(
            client.clone(),
            store.clone(),
            mp.config.secret_key.clone(),
            mp.account_clock
                .clone()
                .unwrap_or_else(|| Arc::new(SystemClock)),
        ))
    });
    let identity: Arc<dyn IdentityResolver> = match &mp.identity {
        Some(custom) => Arc::clone(custom),
        None if mp.config.secret_key.is_none() && mp.config.auth == AuthMode::Local => {
            Arc::new(Unconfigured)
        }
        None => Arc::new(AccountResolver {
            store: store.clone(),
            secret_key: mp.config.secret_key.clone(),
            mode: mp.config.auth,
            standing: standing.clone(),
        }),
    };
    Ok((MoviePilotAccess { client, identity }, standing))
}
