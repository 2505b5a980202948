//! MoviePilot identities: bearer tokens, minting them with MoviePilot's `SECRET_KEY`, and what
//! its sign-in endpoint returns.
//!
//! MoviePilot's REST API accepts only JWT bearers (HS256 over `SECRET_KEY`). Its access tokens
//! carry `sub` (the user id as a decimal string), `username`, `super_user`, `level`, `purpose`
//! (`"authentication"` for REST calls; resource tokens use another key) and the `exp`/`iat`
//! timestamps in seconds. A token minted here is indistinguishable from one MoviePilot's login
//! issued for the same user.

use crate::error::{GatewayError, Result};
use crate::jwt;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The `purpose` claim of tokens MoviePilot accepts on its REST endpoints.
pub const TOKEN_PURPOSE: &str = "authentication";

/// A bearer token. Its `Debug` never shows it and it has no `Display` or `Serialize`, so it
/// cannot end up in a log line, an error or a snapshot by accident; [`expose`](Self::expose)
/// is the one way to read it.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl BearerToken {
    pub fn new(token: impl Into<String>) -> Self {
        BearerToken(token.into())
    }

    /// The token text, for the `Authorization` header or for encrypted storage.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The token's own `exp` (seconds since the epoch), read without verifying it.
    pub fn expires_at(&self) -> Option<i64> {
        token_expiry(&self.0)
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

/// The claims of a MoviePilot access token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenClaims {
    /// The MoviePilot user id, as a decimal string.
    pub sub: String,
    pub username: String,
    pub super_user: bool,
    pub level: i64,
    pub purpose: String,
    pub exp: i64,
    pub iat: i64,
}

/// Seconds since the epoch, now.
pub fn now_epoch() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Mints a MoviePilot access token for `user_id` valid for `ttl` from now.
pub fn mint_token(
    secret_key: &str,
    user_id: &str,
    username: &str,
    super_user: bool,
    level: i64,
    ttl: Duration,
) -> Result<BearerToken> {
    mint_token_at(
        secret_key,
        user_id,
        username,
        super_user,
        level,
        ttl,
        now_epoch(),
    )
}

/// [`mint_token`] at a given clock (seconds since the epoch).
pub fn mint_token_at(
    secret_key: &str,
    user_id: &str,
    username: &str,
    super_user: bool,
    level: i64,
    ttl: Duration,
    now: i64,
) -> Result<BearerToken> {
    // MoviePilot parses `sub` as an integer user id.
    if user_id.is_empty() || !user_id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(GatewayError::InvalidIdentity {
            reason: "the MoviePilot user id must be a decimal number",
        });
    }
    if secret_key.is_empty() {
        return Err(GatewayError::InvalidIdentity {
            reason: "MOVIEPILOT_SECRET_KEY is empty",
        });
    }
    let ttl = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    if ttl == 0 {
        return Err(GatewayError::InvalidIdentity {
            reason: "the token lifetime must be at least one second",
        });
    }
    let claims = TokenClaims {
        sub: user_id.to_owned(),
        username: if username.is_empty() {
            user_id.to_owned()
        } else {
            username.to_owned()
        },
        super_user,
        level,
        purpose: TOKEN_PURPOSE.to_owned(),
        exp: now.saturating_add(ttl),
        iat: now,
    };
    Ok(BearerToken(jwt::encode_hs256(
        &claims,
        secret_key.as_bytes(),
    )))
}

/// Verifies a token against `secret_key` at `now` and returns its claims when it is a valid,
/// unexpired MoviePilot authentication token.
pub fn verify_token(secret_key: &str, token: &str, now: i64) -> Option<TokenClaims> {
    let claims: TokenClaims = jwt::decode_hs256(token, secret_key.as_bytes(), now).ok()?;
    (claims.purpose == TOKEN_PURPOSE).then_some(claims)
}

/// A token's `exp` claim (seconds since the epoch), read without verifying the signature — to
/// decide when to refresh, never to authorise.
pub fn token_expiry(token: &str) -> Option<i64> {
    let claims = jwt::peek_claims(token).ok()?;
    let exp = claims.get("exp")?;
    exp.as_i64().or_else(|| exp.as_f64().map(|f| f as i64))
}

/// A successful MoviePilot sign-in.
#[derive(Debug, Clone, PartialEq)]
pub struct LoginResult {
    pub token: BearerToken,
    pub token_type: String,
    /// The stable MoviePilot user id (decimal), unchanged by renames.
    pub user_id: String,
    pub username: String,
    pub super_user: bool,
    pub level: i64,
    /// The token's `exp`, when it has one.
    pub expires_at: Option<i64>,
    pub avatar: Option<String>,
    /// MoviePilot's detailed permission map (`{}` when absent).
    pub permissions: serde_json::Value,
}

/// The fields of MoviePilot's `schemas.Token` answer, read leniently (older releases omit
/// `user_id`; then the token's `sub` names the user).
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    super_user: Option<bool>,
    #[serde(default)]
    user_id: Option<serde_json::Value>,
    #[serde(default)]
    user_name: Option<String>,
    #[serde(default)]
    avatar: Option<String>,
    #[serde(default)]
    level: Option<i64>,
    #[serde(default)]
    permissions: Option<serde_json::Value>,
}

fn id_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Number(n) if n.is_u64() => Some(n.to_string()),
        serde_json::Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            Some(s.clone())
        }
        _ => None,
    }
}

pub fn parse_login_answer(body: &[u8], username: &str) -> Result<LoginResult> {
    let answer: TokenAnswer =
        serde_json::from_slice(body).map_err(|_| GatewayError::LoginBadResponse {
            reason: "no access_token in the answer",
        })?;
    let claims = jwt::peek_claims(&answer.access_token).ok();
    let claim = |name: &str| claims.as_ref().and_then(|c| c.get(name)).cloned();
    let user_id = answer
        .user_id
        .as_ref()
        .and_then(id_text)
        .or_else(|| claim("sub").as_ref().and_then(id_text))
        .ok_or(GatewayError::LoginBadResponse {
            reason: "the answer names no user id",
        })?;
    let token = BearerToken(answer.access_token);
    Ok(LoginResult {
        expires_at: token.expires_at(),
        token,
        token_type: answer.token_type.unwrap_or_else(|| "bearer".into()),
        user_id,
        username: answer
            .user_name
            .or_else(|| claim("username").and_then(|v| v.as_str().map(str::to_owned)))
            .unwrap_or_else(|| username.to_owned()),
        super_user: answer
            .super_user
            .or_else(|| claim("super_user").and_then(|v| v.as_bool()))
            .unwrap_or(false),
        level: answer
            .level
            .or_else(|| claim("level").and_then(|v| v.as_i64()))
            .unwrap_or(1),
        avatar: answer.avatar,
        permissions: answer
            .permissions
            .unwrap_or_else(|| serde_json::Value::Object(Default::default())),
    })
}
