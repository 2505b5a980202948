//! Accounts: users, passwords, login tokens and the login itself — the one door `server` and
//! `mpagent user` go through, so the rules below hold for every front end.
//!
//! Public API ([`Accounts`], built from the agent's [`Store`]; one per process, clones share
//! state): [`Accounts::create`], [`Accounts::list`], [`Accounts::find`], [`Accounts::rename`],
//! [`Accounts::set_password`] (revoking the user's tokens unless [`Tokens::Keep`]),
//! [`Accounts::delete`], [`Accounts::revoke_tokens`], [`Accounts::link_moviepilot`] /
//! [`Accounts::moviepilot_link`] for administration; [`Accounts::login`]
//! (returns an [`IssuedToken`]), [`Accounts::authenticate`] and [`Accounts::logout`] for bearer
//! tokens.
//!
//! Login under attack ([`limiter`]): an attempt is reserved before its password is checked, so
//! parallel guesses count at once; limits hold per `(name, address)` and, higher, per address;
//! failures for one name from everywhere only slow that name down, so nobody elsewhere can lock
//! its owner out. Argon2 runs under a semaphore of [`AccountsConfig::hash_permits`] (about the
//! number of cores, at most 4), each permit with its own reused 19 MiB of work memory: unbounded
//! parallel logins once took the host from 12 MB to 1.96 GB RSS. A login that gets no permit
//! within [`AccountsConfig::hash_wait`] is answered [`CoreError::LoginBusy`] and not counted.
//!
//! Signing in with MoviePilot (`MPA_AUTH=moviepilot`, [`Accounts::sign_in_with_moviepilot`]):
//! [`Accounts::login`] checks the name and password at MoviePilot's own login endpoint instead
//! of a local hash, behind the same limiter and the same permits (so a flood of logins cannot
//! flood MoviePilot either). The account is MoviePilot's user id — found again after a rename —
//! with MoviePilot's superuser flag as its admin flag; the user's MoviePilot token is kept in the
//! store for that user's gateway calls and never logged. A wrong password and an unknown user
//! are the same [`CoreError::InvalidCredentials`].
//!
//! Invariants: passwords are hashed here with argon2id ([`password`]) and never stored or
//! returned; a token is a random 256-bit secret handed out once, of which only its SHA-256 is
//! stored; an unknown user costs a login as much time as a wrong password, so names cannot be
//! probed by timing; [`Account`] carries no hash.

pub mod limiter;
pub mod password;

use crate::error::{CoreError, Result};
use crate::moviepilot::standing::Standing;
use chrono::{DateTime, Utc};
use limiter::{LoginLimiter, LoginLimits};
use mpa_gateway::{GatewayClient, GatewayError};
use mpa_protocol::{Actor, UserId};
use mpa_store::{Store, User};
use sha2::{Digest, Sha256};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::Semaphore;

/// A user account as front ends see it (no password hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub id: UserId,
    pub name: String,
    pub is_admin: bool,
    /// Whether the account can log in (an account without a password chats only locally).
    pub has_password: bool,
    pub created_at: DateTime<Utc>,
}

impl Account {
    /// The caller identity of this account.
    pub fn actor(&self) -> Actor {
        Actor {
            user_id: self.id.clone(),
            user_name: self.name.clone(),
            is_admin: self.is_admin,
        }
    }
}

impl From<User> for Account {
    fn from(u: User) -> Self {
        Account {
            has_password: u.password_hash.is_some(),
            id: u.id,
            name: u.name,
            is_admin: u.is_admin,
            created_at: u.created_at,
        }
    }
}

/// What a successful login hands out. `token` is shown to the client once and never stored.
#[derive(Debug, Clone)]
pub struct IssuedToken {
    pub token: String,
    pub expires_at: DateTime<Utc>,
    pub account: Account,
}

/// What happens to a user's login tokens when the password changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tokens {
    /// Every token issued so far stops working (the default: a password change is often the
    /// answer to a leak).
    Revoke,
    /// Existing sessions stay logged in.
    Keep,
}

/// How logins are limited (the defaults suit one host; tests and benchmarks adjust them).
#[derive(Debug, Clone)]
pub struct AccountsConfig {
    pub limits: LoginLimits,
    /// Password checks that may run at once.
    pub hash_permits: usize,
    /// Longest wait for a check slot before answering "busy".
    pub hash_wait: Duration,
}

impl Default for AccountsConfig {
    fn default() -> Self {
        Self {
            limits: LoginLimits::default(),
            // Each permit keeps 19 MiB of argon2 memory: a few suffice for a household host.
            hash_permits: std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4)),
            hash_wait: Duration::from_secs(2),
        }
    }
}

/// The accounts facade (see the module docs).
#[derive(Clone)]
pub struct Accounts {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    limiter: Arc<LoginLimiter>,
    hashing: Arc<Semaphore>,
    /// Argon2 work memory, one per permit at most (taken with a permit, given back after).
    memory: Arc<Mutex<Vec<password::Memory>>>,
    hash_wait: Duration,
    /// Set when logins are checked by MoviePilot (`MPA_AUTH=moviepilot`).
    moviepilot: OnceLock<GatewayClient>,
    /// With MoviePilot sign-in: the users' standing there (see `moviepilot::standing`).
    standing: OnceLock<Arc<Standing>>,
}

/// What is stored for a token: its SHA-256, so a leaked database grants no session.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::Rng::fill(&mut rand::rng(), &mut bytes);
    hex::encode(bytes)
}

/// A hash to verify against when the user does not exist, so a missing account costs as much time
/// as a wrong password.
fn dummy_hash(memory: &mut password::Memory) -> Option<&'static str> {
    static H: OnceLock<Option<String>> = OnceLock::new();
    H.get_or_init(|| password::hash(&new_token(), memory).ok())
        .as_deref()
}

fn checked_password(password: &str) -> Result<&str> {
    if password.chars().count() < password::MIN_PASSWORD_CHARS {
        return Err(CoreError::WeakPassword {
            min_chars: password::MIN_PASSWORD_CHARS,
        });
    }
    Ok(password)
}

/// The limiter key of a login name: a name no account can have shares one key (it is refused
/// without a check, and a megabyte of "name" must not become a megabyte of table).
fn limiter_name(name: &str) -> Option<&str> {
    mpa_store::users::valid_name(name).then_some(name)
}

/// A MoviePilot user id as given by an administrator: a decimal number.
fn moviepilot_user_id(id: &str) -> Result<&str> {
    let id = id.trim();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CoreError::Config(format!(
            "a MoviePilot user id is a decimal number (MoviePilot → 用户管理 shows it), not {id:?}"
        )));
    }
    Ok(id)
}

/// The limiter key of a MoviePilot login name. MoviePilot allows names a local account cannot
/// have (spaces, say), so any short name without control characters is checked there; the rest
/// share one key, as above.
fn moviepilot_login_name(name: &str) -> Option<&str> {
    (!name.is_empty() && name.chars().count() <= 128 && !name.chars().any(char::is_control))
        .then_some(name)
}

impl Accounts {
    pub fn new(store: Store) -> Accounts {
        Accounts::with_config(store, AccountsConfig::default())
    }

    pub fn with_config(store: Store, cfg: AccountsConfig) -> Accounts {
        Accounts {
            inner: Arc::new(Inner {
                store,
                limiter: Arc::new(LoginLimiter::new(cfg.limits)),
                hashing: Arc::new(Semaphore::new(cfg.hash_permits.max(1))),
                memory: Arc::default(),
                hash_wait: cfg.hash_wait,
                moviepilot: OnceLock::new(),
                standing: OnceLock::new(),
            }),
        }
    }

    fn store(&self) -> &Store {
        &self.inner.store
    }

    /// From now on [`Accounts::login`] checks credentials at MoviePilot (`client`'s base URL)
    /// and signs users in as their MoviePilot accounts. Set once, at start; `false` when it was
    /// already set.
    pub fn sign_in_with_moviepilot(&self, client: GatewayClient) -> bool {
        self.inner.moviepilot.set(client).is_ok()
    }

    /// From now on a MoviePilot account's agent tokens follow its standing in MoviePilot:
    /// checked while the user is active, revoked when it ends. Set once, at start.
    pub fn follow_moviepilot_standing(&self, standing: Arc<Standing>) -> bool {
        self.inner.standing.set(standing).is_ok()
    }

    /// Whether logins are checked by MoviePilot.
    pub fn signs_in_with_moviepilot(&self) -> bool {
        self.inner.moviepilot.get().is_some()
    }

    /// Links the account `name` to a MoviePilot user — `mp_user` is its decimal id and, optionally,
    /// its MoviePilot name (default: the account's) — or unlinks it with `None`; the host then
    /// mints tokens for that user (`MOVIEPILOT_SECRET_KEY`). One MoviePilot user links to one
    /// account.
    pub async fn link_moviepilot(
        &self,
        name: &str,
        mp_user: Option<(&str, Option<&str>)>,
    ) -> Result<Account> {
        let user = self.existing(name).await?;
        let link = match mp_user {
            Some((id, mp_name)) => {
                let id = moviepilot_user_id(id)?;
                Some(mpa_store::MoviePilotLink {
                    user_id: id.to_string(),
                    user_name: mp_name.unwrap_or(&user.name).to_string(),
                })
            }
            None => None,
        };
        self.store().set_moviepilot_link(&user.id, link).await?;
        Ok(user.into())
    }

    /// The MoviePilot user id the account `name` acts as, if any.
    pub async fn moviepilot_link(&self, name: &str) -> Result<Option<String>> {
        let user = self.existing(name).await?;
        Ok(self
            .store()
            .moviepilot_link(&user.id)
            .await?
            .map(|l| l.user_id))
    }

    /// Runs `f` (an argon2 hash or check) on the blocking pool under a hashing permit, with that
    /// permit's work memory. The permit moves into the blocking task, so a caller that goes away
    /// mid-check does not free its slot while the check still runs. `None` when no permit came
    /// within the wait.
    async fn with_hashing<T, F>(&self, f: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut password::Memory) -> T + Send + 'static,
    {
        let permit = tokio::time::timeout(
            self.inner.hash_wait,
            Arc::clone(&self.inner.hashing).acquire_owned(),
        )
        .await
        .ok()?
        .ok()?;
        let pool = Arc::clone(&self.inner.memory);
        tokio::task::spawn_blocking(move || {
            // A pool of work buffers: a push or pop never leaves it half-changed.
            let mut memory = crate::sync::lock(&pool).pop().unwrap_or_default();
            let out = f(&mut memory);
            crate::sync::lock(&pool).push(memory);
            drop(permit);
            out
        })
        .await
        .ok()
    }

    async fn hash_password(&self, password: &str) -> Result<String> {
        let password = checked_password(password)?.to_owned();
        self.with_hashing(move |memory| password::hash(&password, memory))
            .await
            .ok_or(CoreError::LoginBusy)?
            .map_err(CoreError::PasswordHashing)
    }

    async fn existing(&self, name: &str) -> Result<User> {
        self.store()
            .user_by_name(name)
            .await?
            .ok_or_else(|| CoreError::NoSuchUser(name.to_string()))
    }

    /// The local account `name`, created without a password on first use (local CLI use is
    /// trusted: whoever can run the binary owns the data directory).
    pub async fn ensure_local(&self, name: &str) -> Result<Account> {
        Ok(self.store().ensure_local_user(name).await?.into())
    }

    /// Creates an account; without a password it can chat locally but not log in.
    pub async fn create(
        &self,
        name: &str,
        is_admin: bool,
        password: Option<&str>,
    ) -> Result<Account> {
        let hash = match password {
            Some(p) => Some(self.hash_password(p).await?),
            None => None,
        };
        Ok(self.store().create_user(name, is_admin, hash).await?.into())
    }

    /// Creates an account linked to MoviePilot user `mp_user` (decimal id) at once: when the
    /// name or the link is taken nothing is created, and the error names the real conflict.
    pub async fn create_linked(
        &self,
        name: &str,
        is_admin: bool,
        password: Option<&str>,
        mp_user: &str,
    ) -> Result<Account> {
        let link = mpa_store::MoviePilotLink {
            user_id: moviepilot_user_id(mp_user)?.to_string(),
            user_name: name.to_string(),
        };
        let hash = match password {
            Some(p) => Some(self.hash_password(p).await?),
            None => None,
        };
        Ok(self
            .store()
            .create_linked_user(name, is_admin, hash, link)
            .await?
            .into())
    }

    /// Every account, by name.
    pub async fn list(&self) -> Result<Vec<Account>> {
        Ok(self
            .store()
            .list_users()
            .await?
            .into_iter()
            .map(Account::from)
            .collect())
    }

    pub async fn find(&self, name: &str) -> Result<Option<Account>> {
        Ok(self.store().user_by_name(name).await?.map(Account::from))
    }

    /// Renames an account; its id, and so all of its data, stays the same.
    pub async fn rename(&self, name: &str, new_name: &str) -> Result<Account> {
        let user = self.existing(name).await?;
        self.store().rename_user(&user.id, new_name).await?;
        Ok(Account {
            name: new_name.to_string(),
            ..user.into()
        })
    }

    /// Sets the password of `name` (at least [`password::MIN_PASSWORD_CHARS`] characters) and,
    /// with [`Tokens::Revoke`], logs out all its sessions in the same transaction. Returns how
    /// many tokens were revoked.
    pub async fn set_password(&self, name: &str, password: &str, tokens: Tokens) -> Result<usize> {
        let user = self.existing(name).await?;
        let hash = self.hash_password(password).await?;
        Ok(self
            .store()
            .set_password_hash(&user.id, hash, tokens == Tokens::Revoke)
            .await?)
    }

    /// Deletes the account `name` and its tokens. Its chats and history stay under its id, which
    /// is never reused, so a later account of the same name inherits nothing.
    pub async fn delete(&self, name: &str) -> Result<Account> {
        let user = self.existing(name).await?;
        if !self.store().delete_user(&user.id).await? {
            return Err(CoreError::NoSuchUser(name.to_string()));
        }
        Ok(user.into())
    }

    /// Logs out every session of `name`; returns how many tokens there were.
    pub async fn revoke_tokens(&self, name: &str) -> Result<usize> {
        let user = self.existing(name).await?;
        Ok(self.store().delete_user_tokens(&user.id).await?)
    }

    /// Checks `name`/`password` from `client` and issues a token valid for `ttl` (see the module
    /// docs for the limits). A wrong name and a wrong password are the same error.
    pub async fn login(
        &self,
        name: &str,
        password: &str,
        client: IpAddr,
        ttl: Duration,
    ) -> Result<IssuedToken> {
        let name = name.trim();
        let moviepilot = self.inner.moviepilot.get().cloned();
        let valid = if moviepilot.is_some() {
            moviepilot_login_name(name)
        } else {
            limiter_name(name)
        };
        let attempt = self
            .inner
            .limiter
            .reserve(valid.unwrap_or("<invalid name>"), client)
            .map_err(|b| {
                tracing::warn!(peer = %client, "login rate-limited");
                CoreError::LoginRateLimited {
                    retry_after_secs: b.retry_after_secs,
                }
            })?;
        if valid.is_none() {
            attempt.failed();
            return Err(CoreError::InvalidCredentials);
        }
        if attempt.slow {
            tokio::time::sleep(self.inner.limiter.limits().slowdown).await;
        }
        if let Some(mp) = moviepilot {
            let (user, mp_expiry) = self
                .check_at_moviepilot(&mp, name, password, attempt, client)
                .await?;
            let standing = self.inner.standing.get();
            if let Some(s) = standing {
                s.mark_checked(&user.id);
            }
            // Without the key nothing can replace MoviePilot's token once it expires, so the
            // agent's token ends with it.
            let cap = mp_expiry
                .filter(|_| !standing.is_some_and(|s| s.mints()))
                .and_then(|exp| DateTime::<Utc>::from_timestamp(exp, 0));
            return self.issue(user, ttl, cap).await;
        }
        let user = self.store().user_by_name(name).await?;
        let stored = user.as_ref().and_then(|u| u.password_hash.clone());
        let password = password.to_owned();
        let checked = self
            .with_hashing(move |memory| {
                // The dummy is made (once) here too, on the blocking pool under a permit.
                let hash = match &stored {
                    Some(h) => Some(h.as_str()),
                    None => dummy_hash(memory),
                };
                hash.is_some_and(|h| password::verify(h, &password, memory))
            })
            .await;
        let user = match (checked, user) {
            (None, _) => {
                attempt.unchecked();
                return Err(CoreError::LoginBusy);
            }
            (Some(true), Some(u)) if u.password_hash.is_some() => u,
            _ => {
                attempt.failed();
                tracing::info!(peer = %client, "login failed");
                return Err(CoreError::InvalidCredentials);
            }
        };
        attempt.succeeded();
        self.issue(user, ttl, None).await
    }

    /// Checks `name`/`password` at MoviePilot under a check permit and adopts the MoviePilot
    /// user as the host account (see the module docs), with the `exp` of MoviePilot's token.
    /// Consumes the limiter attempt.
    async fn check_at_moviepilot(
        &self,
        mp: &GatewayClient,
        name: &str,
        password: &str,
        attempt: limiter::Attempt,
        client: IpAddr,
    ) -> Result<(User, Option<i64>)> {
        let Ok(Ok(permit)) = tokio::time::timeout(
            self.inner.hash_wait,
            Arc::clone(&self.inner.hashing).acquire_owned(),
        )
        .await
        else {
            attempt.unchecked();
            return Err(CoreError::LoginBusy);
        };
        let answer = mp.login(name, password).await;
        drop(permit);
        let signed_in = match answer {
            Ok(r) => r,
            Err(GatewayError::LoginRejected) => {
                attempt.failed();
                tracing::info!(peer = %client, "login failed");
                return Err(CoreError::InvalidCredentials);
            }
            Err(GatewayError::AccountDisabled) => {
                attempt.failed();
                tracing::info!(peer = %client, "login of a disabled MoviePilot account");
                return Err(CoreError::AccountDisabled);
            }
            Err(e) => {
                // MoviePilot is down or answered oddly: nobody's guess, not counted.
                attempt.unchecked();
                tracing::warn!(error = %e, "MoviePilot sign-in unavailable");
                return Err(CoreError::SignInUnavailable(e.to_string()));
            }
        };
        attempt.succeeded();
        let expiry = signed_in.expires_at;
        let user = self
            .store()
            .adopt_moviepilot_user(mpa_store::MoviePilotSignIn {
                user_id: signed_in.user_id,
                user_name: signed_in.username,
                super_user: signed_in.super_user,
                token: signed_in.token.expose().to_owned(),
            })
            .await?;
        Ok((user, expiry))
    }

    /// Issues a login token for `user`, valid for `ttl` and never past `cap`.
    async fn issue(
        &self,
        user: User,
        ttl: Duration,
        cap: Option<DateTime<Utc>>,
    ) -> Result<IssuedToken> {
        let token = new_token();
        let ttl = chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::days(7));
        let expires_at = match cap {
            Some(cap) => cap.min(Utc::now() + ttl),
            None => Utc::now() + ttl,
        };
        self.store()
            .insert_token(token_hash(&token), &user.id, expires_at)
            .await?;
        tracing::info!(user = %user.id.0, "login");
        Ok(IssuedToken {
            token,
            expires_at,
            account: user.into(),
        })
    }

    /// The account a bearer token belongs to, if the token is known and unexpired. With
    /// MoviePilot sign-in a request is also when the user's standing is due for a check; a token
    /// revoked because the account ended is answered with why
    /// ([`CoreError::MoviePilotAccountEnded`]).
    pub async fn authenticate(&self, token: &str) -> Result<Option<Account>> {
        let hash = token_hash(token);
        let standing = self.inner.standing.get();
        let Some(user) = self.store().token_user(hash.clone()).await? else {
            return match standing.and_then(|s| s.revoked(&hash)) {
                Some(why) => Err(CoreError::MoviePilotAccountEnded(why)),
                None => Ok(None),
            };
        };
        if let Some(s) = standing
            && let Err(why) = s.check(&user.id, false).await
        {
            return Err(CoreError::MoviePilotAccountEnded(why));
        }
        Ok(Some(Account::from(user)))
    }

    /// Revokes one token; `false` when it was not (or no longer) valid.
    pub async fn logout(&self, token: &str) -> Result<bool> {
        Ok(self.store().delete_token(token_hash(token)).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_hash_is_sha256_hex() {
        assert_eq!(
            token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(new_token().len(), 64);
        assert_ne!(new_token(), new_token());
    }

    #[tokio::test]
    async fn a_login_that_finds_no_hashing_slot_is_busy_and_not_counted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let accounts = Accounts::with_config(
            store,
            AccountsConfig {
                hash_permits: 1,
                hash_wait: Duration::from_millis(10),
                ..AccountsConfig::default()
            },
        );
        accounts
            .create("alice", false, Some("alice-password"))
            .await
            .unwrap();
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        let ttl = Duration::from_secs(60);
        let held = Arc::clone(&accounts.inner.hashing)
            .acquire_owned()
            .await
            .unwrap();
        // More busy answers than the failure limit: none of them counts.
        for _ in 0..8 {
            assert!(matches!(
                accounts.login("alice", "wrong-password", ip, ttl).await,
                Err(CoreError::LoginBusy)
            ));
        }
        drop(held);
        let issued = accounts
            .login("alice", "alice-password", ip, ttl)
            .await
            .unwrap();
        assert_eq!(issued.account.name, "alice");
        assert!(
            accounts
                .authenticate(&issued.token)
                .await
                .unwrap()
                .is_some()
        );
    }

    #[tokio::test]
    async fn names_no_account_can_have_are_refused_without_a_check_and_still_count() {
        let dir = tempfile::tempdir().unwrap();
        let accounts = Accounts::new(Store::open_in(dir.path()).unwrap());
        let ip: IpAddr = "10.1.2.4".parse().unwrap();
        let ttl = Duration::from_secs(60);
        let huge = "x".repeat(100_000);
        for name in ["../etc", huge.as_str(), "", "a b", "x/y", "<>"] {
            assert!(matches!(
                accounts.login(name, "whatever", ip, ttl).await,
                Err(CoreError::InvalidCredentials | CoreError::LoginRateLimited { .. })
            ));
        }
        // They share one limiter key: the sixth one is over the limit.
        assert!(matches!(
            accounts.login("a b c", "whatever", ip, ttl).await,
            Err(CoreError::LoginRateLimited { .. })
        ));
    }
}
