//! Bearer-token auth: login issues a random token whose SHA-256 is stored (expiring, deleted on
//! logout); `MPA_ADMIN_TOKEN` is a static admin credential for automation. Failed logins are
//! rate-limited per user name and per client address.

use crate::error::ApiError;
use crate::state::AppState;
use axum::Json;
use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use mpa_protocol::{Actor, UserId};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The stable id chats created with `MPA_ADMIN_TOKEN` belong to. Real user ids are random UUIDs,
/// so this can never collide with an account.
pub const ADMIN_TOKEN_USER_ID: &str = "admin-token";

/// Failed logins tolerated per key inside [`FAILURE_WINDOW`] before answering 429.
const MAX_FAILURES: u32 = 5;
const FAILURE_WINDOW: Duration = Duration::from_secs(300);

/// What is stored for a token: its SHA-256, so a leaked database grants no session.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::Rng::fill(&mut rand::rng(), &mut bytes);
    hex::encode(bytes)
}

/// Comparing in constant time keeps the admin token from leaking through response timing.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The authenticated caller of a request.
pub struct Authed(pub Actor);

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(axum::http::header::AUTHORIZATION)?;
    let s = v.to_str().ok()?;
    let (scheme, token) = s.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

impl FromRequestParts<AppState> for Authed {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(&parts.headers).ok_or_else(ApiError::unauthorized)?;
        if let Some(admin) = &state.cfg.admin_token
            && !admin.is_empty()
            && constant_time_eq(admin.as_bytes(), token.as_bytes())
        {
            return Ok(Authed(Actor {
                user_id: UserId(ADMIN_TOKEN_USER_ID.into()),
                user_name: ADMIN_TOKEN_USER_ID.into(),
                is_admin: true,
            }));
        }
        match state.agent.store().token_user(token_hash(token)).await? {
            Some(user) => Ok(Authed(Actor {
                user_id: user.id,
                user_name: user.name,
                is_admin: user.is_admin,
            })),
            None => Err(ApiError::unauthorized()),
        }
    }
}

#[derive(Deserialize)]
pub struct LoginRequest {
    pub username: String,
    pub password: String,
}

/// Failed-login counters keyed by `user:<name>` and `ip:<addr>`.
#[derive(Default)]
pub struct LoginLimiter {
    failures: Mutex<HashMap<String, (u32, Instant)>>,
}

impl LoginLimiter {
    /// Seconds until `keys` may try again, if any of them is over the limit.
    fn blocked(&self, keys: &[String]) -> Option<u64> {
        let map = self.failures.lock().ok()?;
        keys.iter()
            .filter_map(|k| map.get(k))
            .filter(|(n, since)| *n >= MAX_FAILURES && since.elapsed() < FAILURE_WINDOW)
            .map(|(_, since)| FAILURE_WINDOW.saturating_sub(since.elapsed()).as_secs() + 1)
            .max()
    }

    fn fail(&self, keys: &[String]) {
        if let Ok(mut map) = self.failures.lock() {
            // Bound the table: forget windows that have passed once it grows.
            if map.len() > 10_000 {
                map.retain(|_, (_, since)| since.elapsed() < FAILURE_WINDOW);
            }
            for k in keys {
                let e = map.entry(k.clone()).or_insert((0, Instant::now()));
                if e.1.elapsed() >= FAILURE_WINDOW {
                    *e = (0, Instant::now());
                }
                e.0 += 1;
            }
        }
    }

    fn succeed(&self, user_key: &str) {
        if let Ok(mut map) = self.failures.lock() {
            map.remove(user_key);
        }
    }
}

/// A hash to verify against when the user does not exist, so a missing account costs as much time
/// as a wrong password and names cannot be probed by timing.
fn dummy_hash() -> Option<&'static str> {
    static H: OnceLock<Option<String>> = OnceLock::new();
    H.get_or_init(|| mpa_store::password::hash(&new_token()).ok())
        .as_deref()
}

pub async fn login(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Json(req): Json<LoginRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let name = req.username.trim().to_string();
    let user_key = format!("user:{}", name.to_lowercase());
    let keys = [user_key.clone(), format!("ip:{}", peer.ip())];
    if let Some(wait) = state.limiter.blocked(&keys) {
        tracing::warn!(peer = %peer.ip(), "login rate-limited");
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_login_attempts",
            format!("too many failed logins; try again in {wait} s"),
        ));
    }
    let user = state.agent.store().user_by_name(&name).await?;
    let stored = user
        .as_ref()
        .and_then(|u| u.password_hash.clone())
        .or_else(|| dummy_hash().map(str::to_owned));
    let password = req.password;
    // Argon2 is deliberately slow: keep it off the async executor.
    let ok = tokio::task::spawn_blocking(move || {
        stored.is_some_and(|h| mpa_store::password::verify(&h, &password))
    })
    .await
    .unwrap_or(false);
    let user = match user {
        Some(u) if ok && u.password_hash.is_some() => u,
        _ => {
            state.limiter.fail(&keys);
            tracing::info!(peer = %peer.ip(), "login failed");
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "invalid_credentials",
                "wrong user name or password",
            ));
        }
    };
    state.limiter.succeed(&user_key);
    let token = new_token();
    let ttl = chrono::Duration::from_std(state.cfg.token_ttl).unwrap_or(chrono::Duration::days(7));
    let expires_at = chrono::Utc::now() + ttl;
    state
        .agent
        .store()
        .insert_token(token_hash(&token), &user.id, expires_at)
        .await?;
    tracing::info!(user = %user.id.0, "login");
    Ok(Json(serde_json::json!({
        "token": token,
        "token_type": "bearer",
        "expires_at": expires_at.to_rfc3339(),
        "user": {"id": user.id.0, "name": user.name, "is_admin": user.is_admin},
    })))
}

/// Revokes the presented token (the admin token cannot be revoked this way).
pub async fn logout(
    State(state): State<AppState>,
    Authed(_actor): Authed,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    if let Some(token) = bearer(&headers) {
        state.agent.store().delete_token(token_hash(token)).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}

pub async fn me(Authed(actor): Authed) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "id": actor.user_id.0, "name": actor.user_name, "is_admin": actor.is_admin
    }))
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

    #[test]
    fn limiter_blocks_after_max_failures_and_success_clears_the_name() {
        let l = LoginLimiter::default();
        let keys = ["user:a".to_string(), "ip:1".to_string()];
        for _ in 0..MAX_FAILURES {
            assert!(l.blocked(&keys).is_none());
            l.fail(&keys);
        }
        assert!(l.blocked(&keys).is_some());
        l.succeed("user:a");
        assert!(l.blocked(&["user:a".to_string()]).is_none());
        assert!(l.blocked(&["ip:1".to_string()]).is_some());
    }
}
