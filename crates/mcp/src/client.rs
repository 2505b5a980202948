//! One connection per configured external server, made with the SDK's client.
//!
//! Life of a connection: nothing runs until the first request ([`Server::list_tools`] or
//! [`Server::call`]); a request finding the connection closed (the child exited, the endpoint
//! went away) connects again; a connect that fails leaves the server `down` until its backoff
//! passes (doubling from [`ClientOptions::backoff_initial`] up to
//! [`ClientOptions::backoff_max`]), and every request meanwhile is answered
//! [`McpError::Unavailable`] at once, so one dead server costs its own tools nothing but a quick
//! refusal and the others nothing at all. [`Server::close`] ends the session and its child.

use crate::config::{ServerConfig, TransportKind};
use crate::error::McpError;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Timing of connections.
#[derive(Debug, Clone, Copy)]
pub struct ClientOptions {
    /// Starting the server and the MCP handshake.
    pub connect_timeout: Duration,
    /// The wait after the first failed connect; doubled after each further failure.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(30),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
        }
    }
}

/// A tool as the server lists it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RemoteTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The tool's JSON schema, as the server gave it.
    pub input_schema: serde_json::Value,
    /// The server's own `readOnlyHint` (shown to admins; the host never trusts it alone).
    #[serde(default)]
    pub read_only_hint: bool,
}

/// What a `tools/call` returned.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    /// The text blocks joined by blank lines; other blocks are named by kind.
    pub text: String,
    pub structured: Option<serde_json::Value>,
    /// The server's `isError`.
    pub is_error: bool,
}

/// Called when the server says its tool list changed.
pub type ListChanged = Arc<dyn Fn() + Send + Sync>;

/// The client side's handler: it only listens for tool-list changes.
#[derive(Clone)]
struct Listener {
    on_list_changed: ListChanged,
}

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        (self.on_list_changed)();
    }
}

enum Link {
    Idle,
    /// A session, and the number of the connection that made it.
    Up(RunningService<RoleClient, Listener>, u64),
    Down {
        failures: u32,
        retry_at: Instant,
        reason: String,
    },
}

/// One configured external server.
pub struct Server {
    cfg: ServerConfig,
    opts: ClientOptions,
    listener: Listener,
    link: tokio::sync::Mutex<Link>,
    /// Numbers connections, so a request that saw its session fail ends only that one.
    connections: std::sync::atomic::AtomicU64,
}

/// Whether a session can still carry requests.
fn is_open(running: &RunningService<RoleClient, Listener>) -> bool {
    !running.is_closed() && !running.peer().is_transport_closed()
}

impl Server {
    pub fn new(cfg: ServerConfig, opts: ClientOptions, on_list_changed: ListChanged) -> Self {
        Self {
            cfg,
            opts,
            listener: Listener { on_list_changed },
            link: tokio::sync::Mutex::new(Link::Idle),
            connections: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub fn config(&self) -> &ServerConfig {
        &self.cfg
    }

    pub fn name(&self) -> &str {
        &self.cfg.name
    }

    fn unavailable(&self, reason: impl Into<String>) -> McpError {
        McpError::Unavailable {
            server: self.cfg.name.clone(),
            reason: reason.into(),
        }
    }

    /// The live session's peer and its connection number, connecting first when there is none
    /// (or it closed).
    async fn peer(&self) -> Result<(rmcp::Peer<RoleClient>, u64), McpError> {
        let mut link = self.link.lock().await;
        let failures = match &*link {
            Link::Up(running, n) if is_open(running) => return Ok((running.peer().clone(), *n)),
            Link::Up(..) | Link::Idle => 0,
            Link::Down {
                failures,
                retry_at,
                reason,
            } => {
                let now = Instant::now();
                if now < *retry_at {
                    let wait = retry_at.saturating_duration_since(now).as_secs_f32().ceil();
                    return Err(self.unavailable(format!(
                        "{reason}; the next attempt to reconnect is in {wait:.0} s"
                    )));
                }
                *failures
            }
        };
        // A closed session still holds its child until dropped: end it before starting anew.
        if let Link::Up(old, _) = std::mem::replace(&mut *link, Link::Idle) {
            let _ = old.cancel().await;
        }
        match tokio::time::timeout(self.opts.connect_timeout, self.connect()).await {
            Ok(Ok(running)) => {
                let peer = running.peer().clone();
                let n = self
                    .connections
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                *link = Link::Up(running, n);
                Ok((peer, n))
            }
            failed => {
                let reason = match failed {
                    Ok(Err(reason)) => reason,
                    _ => format!(
                        "it did not complete the handshake within {} s",
                        self.opts.connect_timeout.as_secs()
                    ),
                };
                let backoff = self
                    .opts
                    .backoff_initial
                    .saturating_mul(1u32 << failures.min(16))
                    .min(self.opts.backoff_max);
                tracing::warn!(server = %self.cfg.name, %reason, "MCP server could not be connected");
                *link = Link::Down {
                    failures: failures.saturating_add(1),
                    retry_at: Instant::now() + backoff,
                    reason: reason.clone(),
                };
                Err(self.unavailable(reason))
            }
        }
    }

    /// Starts the server (stdio) or opens the session (HTTP) and does the handshake. The error
    /// text never includes an env or header value.
    async fn connect(&self) -> Result<RunningService<RoleClient, Listener>, String> {
        match self.cfg.transport {
            TransportKind::Stdio => {
                let command = self.cfg.command.as_deref().unwrap_or_default();
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(&self.cfg.args)
                    .envs(&self.cfg.env)
                    // The host's own end reaps it if the session is dropped without a close.
                    .kill_on_drop(true);
                let (transport, _stderr) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .map_err(|e| format!("{command:?} could not be started: {e}"))?;
                self.listener
                    .clone()
                    .serve(transport)
                    .await
                    .map_err(|e| format!("the MCP handshake failed: {e}"))
            }
            TransportKind::StreamableHttp => {
                let url = self.cfg.url.as_deref().unwrap_or_default();
                let mut headers = std::collections::HashMap::new();
                for (name, value) in &self.cfg.headers {
                    // Validated when stored; a hand-edited store still gets words, not a value.
                    let name = http::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| format!("header name {name:?} is not valid"))?;
                    let value = http::HeaderValue::from_str(value)
                        .map_err(|_| format!("the value of header {name} is not valid"))?;
                    headers.insert(name, value);
                }
                let client = crate::http::HttpClient::new(self.opts.connect_timeout)?;
                let config = StreamableHttpClientTransportConfig::with_uri(url)
                    .custom_headers(headers)
                    .reinit_on_expired_session(true);
                let transport = StreamableHttpClientTransport::with_client(client, config);
                self.listener
                    .clone()
                    .serve(transport)
                    .await
                    .map_err(|e| format!("the MCP handshake failed: {e}"))
            }
        }
    }

    /// The server's tools (every page).
    pub async fn list_tools(&self) -> Result<Vec<RemoteTool>, McpError> {
        let (peer, n) = self.peer().await?;
        let tools = match peer.list_all_tools().await {
            Ok(tools) => tools,
            Err(e) => return Err(self.request_failed(e, n).await),
        };
        Ok(tools
            .into_iter()
            .map(|t| RemoteTool {
                name: t.name.to_string(),
                description: t.description.as_deref().unwrap_or_default().to_string(),
                input_schema: serde_json::Value::Object((*t.input_schema).clone()),
                read_only_hint: t
                    .annotations
                    .as_ref()
                    .and_then(|a| a.read_only_hint)
                    .unwrap_or(false),
            })
            .collect())
    }

    /// Calls `tool` with `arguments`. Dropping the future cancels the request on the server.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallResult, McpError> {
        let (peer, n) = self.peer().await?;
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments);
        let result = match peer.call_tool(params).await {
            Ok(result) => result,
            Err(e) => return Err(self.request_failed(e, n).await),
        };
        let mut text = Vec::new();
        for block in &result.content {
            match block.as_text() {
                Some(t) => text.push(t.text.clone()),
                None => text.push("[non-text content omitted]".to_string()),
            }
        }
        Ok(CallResult {
            text: text.join("\n\n"),
            structured: result.structured_content.clone(),
            is_error: result.is_error.unwrap_or(false),
        })
    }

    /// A request's error; one that is not the server's own answer ends connection `n`, so the
    /// next request connects anew.
    async fn request_failed(&self, e: ServiceError, n: u64) -> McpError {
        if let ServiceError::McpError(data) = e {
            return McpError::Protocol {
                server: self.cfg.name.clone(),
                code: data.code.0,
                message: data.message.to_string(),
            };
        }
        let mut link = self.link.lock().await;
        if matches!(&*link, Link::Up(_, m) if *m == n)
            && let Link::Up(old, _) = std::mem::replace(&mut *link, Link::Idle)
        {
            let _ = old.cancel().await;
        }
        // An HTTP request that never reached the server (nothing listens there now) took no
        // effect: the server is down, not lost mid-call.
        if never_delivered(&e) {
            return self.unavailable(format!("its endpoint cannot be reached: {e}"));
        }
        McpError::ConnectionLost {
            server: self.cfg.name.clone(),
            reason: e.to_string(),
        }
    }

    /// Whether a session is open now (no request is made).
    pub async fn is_connected(&self) -> bool {
        matches!(&*self.link.lock().await, Link::Up(r, _) if is_open(r))
    }

    /// Forgets a reconnect backoff, so the next request tries at once (an admin's test).
    pub async fn reset_backoff(&self) {
        let mut link = self.link.lock().await;
        if matches!(&*link, Link::Down { .. }) {
            *link = Link::Idle;
        }
    }

    /// Ends the session (a stdio child gets SIGTERM, then SIGKILL, and is reaped).
    pub async fn close(&self) {
        let mut link = self.link.lock().await;
        if let Link::Up(running, _) = std::mem::replace(&mut *link, Link::Idle) {
            let _ = running.cancel().await;
        }
    }
}

/// Whether a request failed before any byte of it reached the server: an HTTP connect failure.
fn never_delivered(e: &ServiceError) -> bool {
    let ServiceError::TransportSend(sent) = e else {
        return false;
    };
    matches!(
        sent.error.downcast_ref::<StreamableHttpError<reqwest::Error>>(),
        Some(StreamableHttpError::Client(e)) if e.is_connect()
    )
}
