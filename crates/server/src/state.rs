use mpa_core::Agent;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How the host is run; built by the CLI from its `Config`.
#[derive(Clone)]
pub struct ServerConfig {
    /// `MPA_LISTEN`; port 0 picks a free port (see [`crate::Host::local_addr`]).
    pub listen: SocketAddr,
    /// `MPA_ADMIN_TOKEN`: a static bearer token with admin rights (never logged).
    pub admin_token: Option<String>,
    /// Lifetime of a login token.
    pub token_ttl: Duration,
    /// The model id `/v1/models` advertises and completions echo back.
    pub model_name: String,
    /// Silence on an SSE stream before a `heartbeat` frame.
    pub heartbeat: Duration,
    /// Largest accepted request body in bytes (images arrive inline as data URLs). A larger
    /// `Content-Length` is refused with 413 before the body is read.
    pub max_body: usize,
    /// Longest time a client may take to send a request's headers — and so also how long a
    /// keep-alive connection may sit idle between requests.
    pub header_read_timeout: Duration,
    /// Longest silence while a request body arrives (reset by every chunk that comes).
    pub body_read_timeout: Duration,
    /// Connections one client address may hold open at once (a reverse proxy counts as one).
    pub max_connections_per_ip: usize,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("listen", &self.listen)
            .field(
                "admin_token",
                &self.admin_token.as_ref().map(|_| "<redacted>"),
            )
            .field("token_ttl", &self.token_ttl)
            .field("model_name", &self.model_name)
            .field("heartbeat", &self.heartbeat)
            .field("max_body", &self.max_body)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("body_read_timeout", &self.body_read_timeout)
            .field("max_connections_per_ip", &self.max_connections_per_ip)
            .finish()
    }
}

impl ServerConfig {
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listen,
            admin_token: None,
            token_ttl: Duration::from_secs(7 * 24 * 3600),
            model_name: "mpagent".into(),
            heartbeat: Duration::from_secs(15),
            max_body: crate::MAX_BODY,
            header_read_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(30),
            max_connections_per_ip: 256,
        }
    }
}

/// Shared by every handler.
#[derive(Clone)]
pub struct AppState {
    /// Also the door to accounts and tokens ([`Agent::accounts`]).
    pub agent: Agent,
    pub cfg: Arc<ServerConfig>,
    /// Cancelled when shutdown begins: new turns are refused from then on.
    pub shutting_down: CancellationToken,
}
