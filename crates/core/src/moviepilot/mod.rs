//! MoviePilot access for the agent: who a gateway call is made as ([`identity`]), the operation
//! guides shipped as public skills ([`guides`]) and the business rules the host prompt carries when
//! the gateway is configured ([`rules`]). The `moviepilot_api` tool itself is
//! `tools::moviepilot_api`.

pub mod doctor;
pub mod guides;
pub mod identity;
pub mod live;
pub mod rules;
pub mod secret_read;

use std::sync::Arc;

/// How the host signs its users in (`MPA_AUTH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMode {
    /// Local accounts; each may be linked to a MoviePilot user for whom the host mints tokens
    /// with `MOVIEPILOT_SECRET_KEY`.
    #[default]
    Local,
    /// Sign in with MoviePilot accounts: the host adopts MoviePilot's user id and superuser flag.
    MoviePilot,
}

/// `MOVIEPILOT_URL` and friends.
#[derive(Clone)]
pub struct MoviePilotConfig {
    pub url: String,
    /// `MOVIEPILOT_SECRET_KEY`: mints short-lived JWTs for recorded or linked users. Never logged.
    pub secret_key: Option<String>,
    pub auth: AuthMode,
}

impl std::fmt::Debug for MoviePilotConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MoviePilotConfig")
            .field("url", &self.url)
            .field(
                "secret_key",
                &self.secret_key.as_ref().map(|_| "[redacted]"),
            )
            .field("auth", &self.auth)
            .finish()
    }
}

/// What the `moviepilot_api` tool needs: the HTTP client and the identity resolver.
#[derive(Clone)]
pub struct MoviePilotAccess {
    pub client: mpa_gateway::GatewayClient,
    pub identity: Arc<dyn identity::IdentityResolver>,
}
