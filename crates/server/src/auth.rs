//! Bearer-token auth over the core's [`Accounts`](mpa_core::Accounts) facade (login, token
//! lookup, logout, rate limits all live there); `MPA_ADMIN_TOKEN` is a static admin credential
//! for automation, checked here in constant time.

use crate::error::ApiError;
use crate::extract::Json;
use crate::state::AppState;
use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use mpa_protocol::{Actor, UserId};
use serde::Deserialize;
use std::net::SocketAddr;

/// The stable id chats created with `MPA_ADMIN_TOKEN` belong to. Real user ids are random UUIDs,
/// so this can never collide with an account.
pub const ADMIN_TOKEN_USER_ID: &str = "admin-token";

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
        match state.agent.accounts().authenticate(token).await? {
            Some(account) => Ok(Authed(account.actor())),
            None => Err(ApiError::unauthorized()),
        }
    }
}

#[derive(Deserialize)]
pub struct LoginRequest {
    pub username: String,
    pub password: String,
}

pub async fn login(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Json(req): Json<LoginRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let issued = state
        .agent
        .accounts()
        .login(&req.username, &req.password, peer.ip(), state.cfg.token_ttl)
        .await?;
    let account = issued.account;
    Ok(Json(serde_json::json!({
        "token": issued.token,
        "token_type": "bearer",
        "expires_at": issued.expires_at.to_rfc3339(),
        "user": {"id": account.id.0, "name": account.name, "is_admin": account.is_admin},
    })))
}

/// Revokes the presented token. The static admin token cannot be revoked: it is answered 400
/// `admin_token_not_revocable` (it keeps working until `MPA_ADMIN_TOKEN` changes).
pub async fn logout(
    State(state): State<AppState>,
    Authed(actor): Authed,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    if actor.user_id.0 == ADMIN_TOKEN_USER_ID {
        return Err(ApiError::bad_request_code(
            "admin_token_not_revocable",
            "the static admin token (MPA_ADMIN_TOKEN) cannot be revoked by logging out; \
             change or unset MPA_ADMIN_TOKEN and restart the host",
        ));
    }
    if let Some(token) = bearer(&headers) {
        state.agent.accounts().logout(token).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}

pub async fn me(Authed(actor): Authed) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "id": actor.user_id.0, "name": actor.user_name, "is_admin": actor.is_admin
    }))
}
