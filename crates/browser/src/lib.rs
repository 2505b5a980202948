//! A real Chromium for the agent (`browse_webpage`, issue 31): one browser process with a
//! profile of its own per (user, session), driven over the DevTools protocol on a pipe.
//!
//! Public API:
//! - [`Browsers`]: the host's browsers by [`SessionKey`]. [`Browsers::session`] starts one on
//!   first use (or answers [`BrowserError::Unavailable`] — no Chromium, a bad path — and nothing
//!   else of the host is affected); [`Browsers::close`] ends a conversation's browser (process
//!   group killed, profile removed); an idle TTL closes a forgotten one; [`Browsers::shutdown`]
//!   closes all.
//! - [`Browser`]: the actions (goto, snapshot with stable element refs, content, screenshot,
//!   cookies, click/fill/select by selector or ref, evaluate, wait, tabs).
//! - [`RequestGuard`]: who decides which URLs a page may request when private networks are not
//!   allowed (the host's public-address check). Every request of a page — navigations,
//!   redirects, sub-resources, scripts' fetches — is paused and asked about; and every
//!   connection the browser opens goes through the profile's egress proxy, which connects only
//!   to the addresses the guard checked ([`RequestGuard::addresses`]; WebSockets and workers
//!   included, DNS rebinding closed).
//!
//! Invariants: a selector names exactly one element; a ref is valid for the document that gave
//! it; a screenshot is a JPEG within [`SCREENSHOT_MAX_BYTES`] and [`SCREENSHOT_MAX_AREA`].

mod cdp;
mod dom;
// Public for the crate's tests (tests/all.rs); not part of the API.
#[doc(hidden)]
pub mod egress;
mod error;
mod jpeg;
mod launch;
// Public for the crate's tests (tests/all.rs); not part of the API.
#[doc(hidden)]
pub mod peer;
mod session;

pub use error::{BrowserError, Result};
pub use jpeg::jpeg_size;
pub use session::{
    Browser, PageInfo, SCREENSHOT_MAX_AREA, SCREENSHOT_MAX_BYTES, Screenshot, TabInfo, Target,
};

use async_trait::async_trait;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

/// Decides whether a page may request `url` when its tab does not allow private networks.
#[async_trait]
pub trait RequestGuard: Send + Sync + 'static {
    /// `Ok` to let the request go; `Err(reason)` to refuse it.
    async fn admit(&self, url: &str) -> std::result::Result<(), String>;

    /// The addresses the browser may connect to for `host:port` (a name or an IP literal),
    /// every one of them checked — public, unless `allow_private` — or `Err(reason)`. The
    /// profile's proxy connects to exactly these, so nothing resolves the name again.
    async fn addresses(
        &self,
        host: &str,
        port: u16,
        allow_private: bool,
    ) -> std::result::Result<Vec<std::net::SocketAddr>, String>;
}

/// How browsers are started.
#[derive(Debug, Clone)]
pub struct BrowserConfig {
    /// The Chromium to run; `None` looks for `chromium` (and the usual other names) on `PATH`.
    pub executable: Option<PathBuf>,
    /// Where profiles live (one temporary directory per session under it).
    pub profiles_root: PathBuf,
    /// A browser unused this long is closed.
    pub idle_ttl: Duration,
    /// More command-line switches (tests map host names with `--host-resolver-rules`).
    pub extra_args: Vec<String>,
}

/// Whose browser: the user's key and the session id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    pub user_key: String,
    pub session_id: String,
}

type Slot = Arc<tokio::sync::Mutex<Option<Arc<Browser>>>>;

struct Shared {
    config: BrowserConfig,
    guard: Arc<dyn RequestGuard>,
    slots: Mutex<HashMap<SessionKey, Slot>>,
    reaper: Mutex<Option<tokio::task::JoinHandle<()>>>,
    shut: std::sync::atomic::AtomicBool,
}

/// The host's browsers. Cheap to clone.
#[derive(Clone)]
pub struct Browsers {
    shared: Arc<Shared>,
}

impl Browsers {
    pub fn new(config: BrowserConfig, guard: Arc<dyn RequestGuard>) -> Self {
        Self {
            shared: Arc::new(Shared {
                config,
                guard,
                slots: Mutex::new(HashMap::new()),
                reaper: Mutex::new(None),
                shut: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<SessionKey, Slot>> {
        self.shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's browser, started on first use (and again after it crashed or was closed).
    pub async fn session(&self, key: &SessionKey) -> Result<Arc<Browser>> {
        if self.shared.shut.load(std::sync::atomic::Ordering::Acquire) {
            return Err(BrowserError::Closed);
        }
        let slot = self.slots().entry(key.clone()).or_default().clone();
        let mut held = slot.lock().await;
        if let Some(b) = held.as_ref()
            && !b.is_closed()
        {
            return Ok(b.clone());
        }
        if let Some(old) = held.take() {
            old.close().await;
        }
        let exe = launch::find_executable(self.shared.config.executable.as_deref())?;
        std::fs::create_dir_all(&self.shared.config.profiles_root).map_err(|e| {
            BrowserError::Unavailable(format!("cannot create the profiles directory: {e}"))
        })?;
        let profile = tempfile::Builder::new()
            .prefix("profile-")
            .tempdir_in(&self.shared.config.profiles_root)
            .map_err(|e| BrowserError::Unavailable(format!("cannot create a profile: {e}")))?;
        let egress = egress::Egress::start(self.shared.guard.clone())
            .await
            .map_err(|e| BrowserError::Unavailable(format!("cannot start its proxy: {e}")))?;
        let browser = Arc::new(
            Browser::start(
                &exe,
                profile,
                &self.shared.config.extra_args,
                self.shared.guard.clone(),
                egress,
            )
            .await?,
        );
        *held = Some(browser.clone());
        drop(held);
        self.start_reaper();
        Ok(browser)
    }

    /// The session's browser when one is running (never starts one).
    pub async fn existing(&self, key: &SessionKey) -> Option<Arc<Browser>> {
        let slot = self.slots().get(key).cloned()?;
        let held = slot.lock().await;
        held.as_ref().filter(|b| !b.is_closed()).cloned()
    }

    /// Closes the session's browser; `true` when one was running.
    pub async fn close(&self, key: &SessionKey) -> bool {
        let slot = self.slots().remove(key);
        let Some(slot) = slot else {
            return false;
        };
        let taken = slot.lock().await.take();
        match taken {
            Some(b) => {
                b.close().await;
                true
            }
            None => false,
        }
    }

    /// The number of running browsers.
    pub fn running(&self) -> usize {
        self.slots()
            .values()
            .filter(|s| s.try_lock().map(|b| b.is_some()).unwrap_or(true))
            .count()
    }

    /// Closes every browser; no new one starts afterwards.
    pub async fn shutdown(&self) {
        self.shared
            .shut
            .store(true, std::sync::atomic::Ordering::Release);
        if let Some(r) = self
            .shared
            .reaper
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            r.abort();
        }
        let keys: Vec<SessionKey> = self.slots().keys().cloned().collect();
        for k in keys {
            self.close(&k).await;
        }
    }

    /// Closes browsers idle longer than the TTL, checking a few times per TTL.
    fn start_reaper(&self) {
        let mut reaper = self
            .shared
            .reaper
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if reaper.is_some() {
            return;
        }
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        let ttl = self.shared.config.idle_ttl;
        let period = (ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(60));
        *reaper = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                let me = Browsers { shared };
                let slots: Vec<(SessionKey, Slot)> = me
                    .slots()
                    .iter()
                    .map(|(k, s)| (k.clone(), s.clone()))
                    .collect();
                for (key, slot) in slots {
                    let idle = match slot.try_lock() {
                        Ok(held) => held.as_ref().is_some_and(|b| b.idle_for() >= ttl),
                        Err(_) => false, // starting or in use
                    };
                    if idle {
                        tracing::info!(session = %key.session_id, "closing an idle browser");
                        me.close(&key).await;
                    }
                }
            }
        }));
    }
}
