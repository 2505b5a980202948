//! MoviePilot's sign-in: the OAuth2 password-form login that issues an HS256 JWT, and the bearer
//! check every REST route runs. Status codes and details follow MoviePilot's
//! `app/api/endpoints/login.py`, `app/core/security.py` and `app/db/user_oper.py`.

use crate::jwt;
use crate::state::User;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::time::Duration;

pub const LOGIN_PATH: &str = "/api/v1/login/access-token";

/// The claims MoviePilot puts in its tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// The user id, as a string (MoviePilot reads it back as an int).
    pub sub: Value,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub super_user: Option<bool>,
    #[serde(default)]
    pub level: Option<i64>,
    /// `authentication` for API tokens; `resource` tokens only open images.
    #[serde(default)]
    pub purpose: Option<String>,
    pub exp: i64,
    #[serde(default)]
    pub iat: Option<i64>,
}

/// Signs a token for `user` valid for `ttl` from `now` (seconds since the epoch), as MoviePilot's
/// login does.
pub fn issue_token(user: &User, secret: &str, ttl: Duration, now: i64) -> String {
    let iat = now;
    let claims = Claims {
        sub: json!(user.id.to_string()),
        username: Some(user.name.clone()),
        super_user: Some(user.super_user),
        level: Some(user.level),
        purpose: Some("authentication".to_string()),
        exp: iat.saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)),
        iat: Some(iat),
    };
    jwt::encode(&claims, secret.as_bytes())
}

/// A refused request: HTTP status, FastAPI body, and whether to add `WWW-Authenticate`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AuthFailure {
    pub status: u16,
    pub body: Value,
    pub challenge: bool,
    pub message: &'static str,
}

fn failure(status: u16, detail: &'static str, challenge: bool) -> AuthFailure {
    AuthFailure {
        status,
        body: json!({"detail": detail}),
        challenge,
        message: detail,
    }
}

/// The one answer for a wrong password and an unknown user alike.
pub(crate) fn bad_credentials() -> AuthFailure {
    failure(401, "用户名、密码或二次校验码不正确", false)
}

/// Checks the login form and returns MoviePilot's `Token` reply.
pub(crate) fn login(
    form: &[(String, String)],
    users: &[User],
    secret: &str,
    ttl: Duration,
    now: i64,
) -> Result<(User, Value), AuthFailure> {
    let field = |name: &str| form.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v);
    let (Some(username), Some(password)) = (field("username"), field("password")) else {
        return Err(AuthFailure {
            status: 422,
            body: json!({"detail": [{
                "type": "missing", "loc": ["body", if field("username").is_none() { "username" } else { "password" }],
                "msg": "Field required", "input": null
            }]}),
            challenge: false,
            message: "username and password are required",
        });
    };
    let Some(user) = users
        .iter()
        .find(|u| &u.name == username && &u.password == password)
    else {
        return Err(bad_credentials());
    };
    if !user.is_active {
        return Err(failure(403, "用户未启用", false));
    }
    let token = issue_token(user, secret, ttl, now);
    let reply = json!({
        "access_token": token,
        "token_type": "bearer",
        "super_user": user.super_user,
        "user_id": user.id,
        "user_name": user.name,
        "avatar": user.avatar,
        "level": user.level,
        "permissions": user.permissions,
        "widzard": null,
    });
    Ok((user.clone(), reply))
}

/// The authenticated user and whether it may use admin operations (superuser in the state and
/// in the token: a token minted without `super_user` grants no admin rights).
pub(crate) fn authenticate<'a>(
    authorization: Option<&str>,
    users: &'a [User],
    secret: &str,
    now: i64,
) -> Result<(&'a User, bool), AuthFailure> {
    let token = authorization
        .and_then(|h| h.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim())
        .filter(|t| !t.is_empty());
    let Some(token) = token else {
        return Err(failure(401, "Not authenticated", true));
    };
    let invalid = || failure(403, "token校验不通过", false);
    let claims: Claims = jwt::decode(token, secret.as_bytes(), now).ok_or_else(invalid)?;
    if claims.purpose.as_deref() == Some("resource") {
        return Err(invalid());
    }
    let id = match &claims.sub {
        Value::String(s) => s.parse::<i64>().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
    .ok_or_else(invalid)?;
    let Some(user) = users.iter().find(|u| u.id == id) else {
        return Err(failure(403, "用户不存在", false));
    };
    if !user.is_active {
        return Err(failure(403, "用户未激活", false));
    }
    Ok((user, user.super_user && claims.super_user == Some(true)))
}

/// MoviePilot answers 400 here; the fake answers 403 so a client cannot mistake it for bad input.
pub(crate) fn not_superuser() -> AuthFailure {
    failure(403, "用户权限不足", false)
}

/// What the recorded MoviePilot v2 answers a non-superuser on a superuser route: HTTP 400.
pub(crate) fn not_superuser_v2() -> AuthFailure {
    failure(400, "用户权限不足", false)
}
