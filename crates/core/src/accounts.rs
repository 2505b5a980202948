//! Accounts: users, passwords, login tokens and the login itself — the one door `server` and
//! `mpagent user` go through, so the rules below hold for every front end.
//!
//! Public API ([`Accounts`], built from the agent's [`Store`]; one per process, clones share
//! state): [`Accounts::create`], [`Accounts::list`], [`Accounts::find`], [`Accounts::rename`],
//! [`Accounts::set_password`] for administration; [`Accounts::login`] (rate-limited, returns an
//! [`IssuedToken`]), [`Accounts::authenticate`] and [`Accounts::logout`] for bearer tokens.
//!
//! Invariants: passwords are hashed here with argon2id ([`password`]) and never stored or
//! returned; a token is a random 256-bit secret handed out once, of which only its SHA-256 is
//! stored; an unknown user costs a login as much time as a wrong password, so names cannot be
//! probed by timing; [`Account`] carries no hash.

pub mod limiter;
pub mod password;

use crate::error::{CoreError, Result};
use chrono::{DateTime, Utc};
use limiter::LoginLimiter;
use mpa_protocol::{Actor, UserId};
use mpa_store::{Store, User};
use sha2::{Digest, Sha256};
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

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

/// The accounts facade (see the module docs).
#[derive(Clone)]
pub struct Accounts {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    limiter: LoginLimiter,
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
fn dummy_hash() -> Option<&'static str> {
    static H: OnceLock<Option<String>> = OnceLock::new();
    H.get_or_init(|| password::hash(&new_token()).ok())
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

/// Argon2 is deliberately slow: it runs on the blocking pool, never on the async executor.
async fn hash_password(password: &str) -> Result<String> {
    let password = checked_password(password)?.to_owned();
    tokio::task::spawn_blocking(move || password::hash(&password))
        .await
        .map_err(|e| CoreError::PasswordHashing(e.to_string()))?
        .map_err(CoreError::PasswordHashing)
}

async fn verify_password(stored: Option<String>, password: String) -> bool {
    tokio::task::spawn_blocking(move || stored.is_some_and(|h| password::verify(&h, &password)))
        .await
        .unwrap_or(false)
}

impl Accounts {
    pub fn new(store: Store) -> Accounts {
        Accounts {
            inner: Arc::new(Inner {
                store,
                limiter: LoginLimiter::default(),
            }),
        }
    }

    fn store(&self) -> &Store {
        &self.inner.store
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
            Some(p) => Some(hash_password(p).await?),
            None => None,
        };
        Ok(self.store().create_user(name, is_admin, hash).await?.into())
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

    /// Sets the password of `name` (at least [`password::MIN_PASSWORD_CHARS`] characters).
    pub async fn set_password(&self, name: &str, password: &str) -> Result<Account> {
        let user = self.existing(name).await?;
        let hash = hash_password(password).await?;
        self.store().set_password_hash(&user.id, hash).await?;
        Ok(Account {
            has_password: true,
            ..user.into()
        })
    }

    /// Checks `name`/`password` and issues a token valid for `ttl`. Failures are counted per name
    /// and per client address; over the limit the answer is [`CoreError::LoginRateLimited`]
    /// without checking the password. Wrong name and wrong password are one error.
    pub async fn login(
        &self,
        name: &str,
        password: &str,
        client: IpAddr,
        ttl: Duration,
    ) -> Result<IssuedToken> {
        let name = name.trim();
        let user_key = format!("user:{}", name.to_lowercase());
        let keys = [user_key.clone(), format!("ip:{client}")];
        if let Some(retry_after_secs) = self.inner.limiter.blocked(&keys) {
            tracing::warn!(peer = %client, "login rate-limited");
            return Err(CoreError::LoginRateLimited { retry_after_secs });
        }
        let user = self.store().user_by_name(name).await?;
        let stored = user
            .as_ref()
            .and_then(|u| u.password_hash.clone())
            .or_else(|| dummy_hash().map(str::to_owned));
        let ok = verify_password(stored, password.to_owned()).await;
        let user = match user {
            Some(u) if ok && u.password_hash.is_some() => u,
            _ => {
                self.inner.limiter.fail(&keys);
                tracing::info!(peer = %client, "login failed");
                return Err(CoreError::InvalidCredentials);
            }
        };
        self.inner.limiter.succeed(&user_key);
        let token = new_token();
        let ttl = chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::days(7));
        let expires_at = Utc::now() + ttl;
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

    /// The account a bearer token belongs to, if the token is known and unexpired.
    pub async fn authenticate(&self, token: &str) -> Result<Option<Account>> {
        Ok(self
            .store()
            .token_user(token_hash(token))
            .await?
            .map(Account::from))
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
}
