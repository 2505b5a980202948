//! Who a gateway call is made as. MoviePilot's REST API takes only JWT bearers (its API token
//! works on a few integration routes only), so every call carries a token for the acting user:
//! the user's own token from signing in with MoviePilot, or one the host mints with
//! `MOVIEPILOT_SECRET_KEY` for the MoviePilot user recorded for (or linked to) this host user —
//! never another user's. Tokens are never logged and never part of an error.

use async_trait::async_trait;
use mpa_gateway::BearerToken;
use mpa_protocol::Actor;
use std::time::Duration;

/// Minted tokens live this long; a call never takes longer than the longest gateway timeout.
pub const MINTED_TOKEN_TTL: Duration = Duration::from_secs(15 * 60);

/// Why no token can be had for a user. Each carries its user-facing text (English / Chinese).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// A local account not linked to a MoviePilot user.
    #[error(
        "this account is not linked to a MoviePilot user; an administrator can link it with `mpagent user link` / 此账户尚未关联 MoviePilot 用户"
    )]
    NotLinked,
    /// The user's MoviePilot sign-in expired and the host cannot mint a new token.
    #[error(
        "the MoviePilot sign-in of this account has expired; sign in again / MoviePilot 登录已过期，请重新登录"
    )]
    SignInAgain,
    /// The gateway is configured without a way to authenticate (no secret key, no sign-in).
    #[error(
        "MoviePilot access is not configured for this host (MOVIEPILOT_SECRET_KEY or MPA_AUTH=moviepilot) / 未配置 MoviePilot 访问"
    )]
    NotConfigured,
    #[error("the account store is unavailable: {0}")]
    Unavailable(String),
    /// MoviePilot has disabled or deleted the account: its agent sessions have ended.
    #[error(
        "this MoviePilot account is disabled or no longer exists; its agent sessions have ended / 该 MoviePilot 账户已停用或已删除，其会话已结束"
    )]
    AccountDisabled,
}

impl From<super::standing::Ended> for IdentityError {
    fn from(e: super::standing::Ended) -> Self {
        match e {
            super::standing::Ended::Disabled => IdentityError::AccountDisabled,
            super::standing::Ended::SignInExpired => IdentityError::SignInAgain,
        }
    }
}

impl IdentityError {
    pub fn code(&self) -> &'static str {
        match self {
            IdentityError::NotLinked => "moviepilot_not_linked",
            IdentityError::SignInAgain => "moviepilot_sign_in_again",
            IdentityError::NotConfigured => "moviepilot_not_configured",
            IdentityError::Unavailable(_) => "storage_unavailable",
            IdentityError::AccountDisabled => "moviepilot_account_disabled",
        }
    }
}

/// The MoviePilot user a host user acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoviePilotUser {
    pub id: String,
    pub name: String,
}

#[async_trait]
pub trait IdentityResolver: Send + Sync {
    /// A bearer for `actor`'s own calls.
    async fn bearer(&self, actor: &Actor) -> Result<BearerToken, IdentityError>;

    /// MoviePilot answered 401 to a call made with [`bearer`](Self::bearer)'s token.
    async fn rejected(&self, _actor: &Actor) {}
}

/// Mints a token for `user`; `super_user` only when the acting host account is an admin.
pub fn mint_for(
    secret_key: &str,
    user: &MoviePilotUser,
    actor: &Actor,
) -> Result<BearerToken, IdentityError> {
    mpa_gateway::mint_token(
        secret_key,
        &user.id,
        &user.name,
        actor.is_admin,
        if actor.is_admin { 2 } else { 1 },
        MINTED_TOKEN_TTL,
    )
    .map_err(|_| IdentityError::NotConfigured)
}

/// Resolves through a lookup of the recorded/linked MoviePilot user (the account store's link in
/// production; a fixed table in tests and the evaluation harness).
pub struct MintingResolver<F> {
    secret_key: String,
    lookup: F,
}

impl<F> MintingResolver<F> {
    pub fn new(secret_key: impl Into<String>, lookup: F) -> Self {
        Self {
            secret_key: secret_key.into(),
            lookup,
        }
    }
}

#[async_trait]
impl<F> IdentityResolver for MintingResolver<F>
where
    F: Fn(&Actor) -> Option<MoviePilotUser> + Send + Sync,
{
    async fn bearer(&self, actor: &Actor) -> Result<BearerToken, IdentityError> {
        let user = (self.lookup)(actor).ok_or(IdentityError::NotLinked)?;
        mint_for(&self.secret_key, &user, actor)
    }
}

/// A gateway configured without any way to authenticate.
pub struct Unconfigured;

#[async_trait]
impl IdentityResolver for Unconfigured {
    async fn bearer(&self, _actor: &Actor) -> Result<BearerToken, IdentityError> {
        Err(IdentityError::NotConfigured)
    }
}

/// The production resolver: the account store's records decide. With local accounts the host
/// mints for the linked MoviePilot user; with MoviePilot sign-in it uses the user's own token
/// while it is valid, and mints a fresh one for the same recorded user when the secret key is
/// configured (so scheduled runs and channels keep working) — otherwise "sign in again".
pub struct AccountResolver {
    pub store: mpa_store::Store,
    pub secret_key: Option<String>,
    pub mode: super::AuthMode,
    /// With MoviePilot sign-in: the user's standing, checked before a re-mint and while active.
    pub standing: Option<std::sync::Arc<super::standing::Standing>>,
}

/// A stored token this close to its expiry is not used (a call may take a while).
const EXPIRY_MARGIN_SECS: i64 = 60;

#[async_trait]
impl IdentityResolver for AccountResolver {
    async fn bearer(&self, actor: &Actor) -> Result<BearerToken, IdentityError> {
        let unavailable = |e: mpa_store::StoreError| IdentityError::Unavailable(e.to_string());
        let link = self
            .store
            .moviepilot_link(&actor.user_id)
            .await
            .map_err(unavailable)?
            .ok_or(IdentityError::NotLinked)?;
        let user = MoviePilotUser {
            id: link.user_id,
            name: link.user_name,
        };
        if self.mode == super::AuthMode::MoviePilot {
            let stored = self
                .store
                .moviepilot_token(&actor.user_id)
                .await
                .map_err(unavailable)?
                .map(BearerToken::new);
            // An opaque token (no `exp` to read) is used until MoviePilot answers 401.
            if let Some(token) = stored
                && token
                    .expires_at()
                    .is_none_or(|exp| exp > mpa_gateway::now_epoch() + EXPIRY_MARGIN_SECS)
            {
                if let Some(standing) = &self.standing {
                    standing.check(&actor.user_id, false).await?;
                }
                return Ok(token);
            }
            return match &self.secret_key {
                Some(key) => {
                    // Never mint for someone MoviePilot no longer lets in.
                    if let Some(standing) = &self.standing {
                        standing.check(&actor.user_id, true).await?;
                    }
                    mint_for(key, &user, actor)
                }
                None => Err(IdentityError::SignInAgain),
            };
        }
        match &self.secret_key {
            Some(key) => mint_for(key, &user, actor),
            None => Err(IdentityError::NotConfigured),
        }
    }

    /// Without the key the token was the user's own: MoviePilot refusing it ends the session.
    async fn rejected(&self, actor: &Actor) {
        if self.mode == super::AuthMode::MoviePilot
            && self.secret_key.is_none()
            && let Some(standing) = &self.standing
        {
            standing
                .end(&actor.user_id, super::standing::Ended::SignInExpired)
                .await;
        }
    }
}
