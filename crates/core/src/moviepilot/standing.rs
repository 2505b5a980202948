//! Accounts that follow MoviePilot (issue 25). With `MPA_AUTH=moviepilot` an agent session never
//! outlives the user's standing in MoviePilot: MoviePilot itself does not look at `is_active`
//! for most routes (a signed token is enough), so the host asks — before every re-mint, and at
//! least every [`CHECK_EVERY`] while the user is active (a request, a tool call) — with one read
//! of the user's own record ([`mpa_gateway::GatewayClient::account_standing`]), which MoviePilot
//! answers only after loading the user from its database.
//!
//! A disabled or deleted user's agent tokens are revoked at once, their running turns stopped,
//! and a request with one of those tokens is answered `moviepilot_account_disabled` (for the
//! life of the process; after a restart it is an unknown token). A user's own MoviePilot token
//! that MoviePilot refuses (with no secret key to mint another) ends the session the same way,
//! answered `moviepilot_sign_in_again`. MoviePilot being unreachable locks nobody out: the
//! check is tried again at the next interval.

use mpa_gateway::{AccountStanding, BearerToken, GatewayClient};
use mpa_protocol::UserId;
use mpa_store::Store;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How long a check stands while the user is active.
pub const CHECK_EVERY: Duration = Duration::from_secs(10 * 60);

/// Seconds since the epoch; injected so a test can move time without sleeping.
pub trait Clock: Send + Sync {
    fn now(&self) -> i64;
}

/// The system clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        mpa_gateway::now_epoch()
    }
}

/// Why an agent session ended with the user's MoviePilot account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Disabled or deleted in MoviePilot.
    Disabled,
    /// MoviePilot refused the user's own token and the host cannot mint another.
    SignInExpired,
}

impl Ended {
    pub fn code(self) -> &'static str {
        match self {
            Ended::Disabled => "moviepilot_account_disabled",
            Ended::SignInExpired => "moviepilot_sign_in_again",
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Ended::Disabled => {
                "this MoviePilot account is disabled or no longer exists; its agent sessions \
                 have ended / 该 MoviePilot 账户已停用或已删除，其会话已结束"
            }
            Ended::SignInExpired => {
                "MoviePilot no longer accepts this sign-in; sign in again / MoviePilot 登录已失效，请重新登录"
            }
        }
    }
}

type OnEnd = Box<dyn Fn(&UserId) + Send + Sync>;

/// The standing checks of one host (shared by the accounts and the identity resolver).
pub struct Standing {
    client: GatewayClient,
    store: Store,
    secret_key: Option<String>,
    clock: Arc<dyn Clock>,
    every: Duration,
    /// When each user was last found standing (or last tried).
    checked: Mutex<HashMap<UserId, i64>>,
    /// Token hashes revoked because their account ended, and why.
    revoked: Mutex<HashMap<String, Ended>>,
    /// Stops the user's running turns (set once the agent exists).
    on_end: OnceLock<OnEnd>,
}

impl Standing {
    pub fn new(
        client: GatewayClient,
        store: Store,
        secret_key: Option<String>,
        clock: Arc<dyn Clock>,
    ) -> Standing {
        Standing {
            client,
            store,
            secret_key,
            clock,
            every: CHECK_EVERY,
            checked: Mutex::default(),
            revoked: Mutex::default(),
            on_end: OnceLock::new(),
        }
    }

    /// What to do with a user's running turns when their account ends (set once).
    pub fn on_end(&self, f: impl Fn(&UserId) + Send + Sync + 'static) {
        let _ = self.on_end.set(Box::new(f));
    }

    /// Whether the host can mint tokens (then a re-mint is checked first).
    pub fn mints(&self) -> bool {
        self.secret_key.is_some()
    }

    /// Records that `user` was just found standing (a successful sign-in is such a check).
    pub fn mark_checked(&self, user: &UserId) {
        crate::sync::lock(&self.checked).insert(user.clone(), self.clock.now());
    }

    fn due(&self, user: &UserId) -> bool {
        let every = i64::try_from(self.every.as_secs()).unwrap_or(i64::MAX);
        crate::sync::lock(&self.checked)
            .get(user)
            .is_none_or(|at| self.clock.now().saturating_sub(*at) >= every)
    }

    /// Why a revoked token no longer works, if it was revoked here.
    pub fn revoked(&self, token_hash: &str) -> Option<Ended> {
        crate::sync::lock(&self.revoked).get(token_hash).copied()
    }

    /// Checks `user` when the last check is older than [`CHECK_EVERY`], or now with `force`
    /// (before a re-mint). `Err` when the account has ended; its sessions are ended by then.
    pub async fn check(&self, user: &UserId, force: bool) -> Result<(), Ended> {
        if !force && !self.due(user) {
            return Ok(());
        }
        let Ok(Some(link)) = self.store.moviepilot_link(user).await else {
            // Not a MoviePilot account (or the store is unreadable: the call that needs the
            // account fails on its own).
            return Ok(());
        };
        let token = match &self.secret_key {
            // The least a token can be: the user themself, no superuser rights.
            Some(key) => mpa_gateway::mint_token(
                key,
                &link.user_id,
                &link.user_name,
                false,
                1,
                super::identity::MINTED_TOKEN_TTL,
            )
            .ok(),
            None => self
                .store
                .moviepilot_token(user)
                .await
                .ok()
                .flatten()
                .map(BearerToken::new),
        };
        let Some(token) = token else {
            return Ok(());
        };
        self.mark_checked(user);
        match self.client.account_standing(&token).await {
            Ok(AccountStanding::Active) => Ok(()),
            Ok(AccountStanding::Disabled | AccountStanding::Deleted) => {
                tracing::warn!(user = %user.0, "MoviePilot account disabled or deleted; agent sessions ended");
                self.end(user, Ended::Disabled).await;
                Err(Ended::Disabled)
            }
            Ok(AccountStanding::TokenRejected) if self.secret_key.is_none() => {
                self.end(user, Ended::SignInExpired).await;
                Err(Ended::SignInExpired)
            }
            Ok(AccountStanding::TokenRejected) => {
                tracing::error!(
                    "MoviePilot refused a token minted with MOVIEPILOT_SECRET_KEY; the key is not \
                     this MoviePilot's SECRET_KEY"
                );
                Ok(())
            }
            Err(e) => {
                tracing::warn!(user = %user.0, error = %e, "MoviePilot account check not possible; tried again later");
                Ok(())
            }
        }
    }

    /// Ends `user`'s agent sessions: tokens revoked (remembered, so the next request is told
    /// why), the MoviePilot token forgotten, running turns stopped.
    pub async fn end(&self, user: &UserId, why: Ended) {
        match self.store.take_user_tokens(user).await {
            Ok(hashes) => {
                let mut revoked = crate::sync::lock(&self.revoked);
                for h in hashes {
                    revoked.insert(h, why);
                }
            }
            Err(e) => tracing::error!(user = %user.0, error = %e, "agent tokens not revoked"),
        }
        if let Err(e) = self.store.set_moviepilot_token(user, None).await {
            tracing::error!(user = %user.0, error = %e, "MoviePilot token not forgotten");
        }
        crate::sync::lock(&self.checked).remove(user);
        if let Some(stop) = self.on_end.get() {
            stop(user);
        }
    }
}
