//! MCP both ways (issue 33; spec runtime.md §11.5, §8.2), adapting `mpa-mcp`.
//!
//! - **External servers as tools** ([`McpHub`]): an admin's configured servers are kept in the
//!   main store with the tools each last listed. When the host opens, every server's tools join
//!   the registry's dynamic layer as one set (`mcp:<server>`), named `mcp__<server>__<tool>`
//!   ([`external::ExternalTool`]) — before the server is started: it starts on the first call
//!   (or an admin's test), reconnects with backoff after it died, and a `tools/list_changed`
//!   re-lists it and replaces its set. External tools are admin-only, `external` (subagents and
//!   the Python kernel never call them), and always ledgered; their effect is `unknown` unless
//!   an admin marked the tool a read.
//! - **The host's tools published** ([`publish::HostCatalogue`]): the tools an actor may see,
//!   minus the internal ones (`ToolView::publishable_specs`), each call through the one call
//!   path with origin `mcp`.

pub mod external;
pub mod publish;

use crate::error::{CoreError, Result};
use crate::tools::ToolRegistry;
use crate::tools::registry::Tools;
use mpa_mcp::{ClientOptions, McpError, RemoteTool, Server, ServerConfig};
use mpa_store::{McpServerRow, Store};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

pub use mpa_mcp::ClientOptions as McpClientOptions;
pub use publish::HostCatalogue;

/// The `/mcp` endpoint's tower service (streamable HTTP; the front end authenticates each request
/// and puts the caller's `Actor` in its extensions).
pub type McpEndpoint = mpa_mcp::publish::HttpEndpoint<HostCatalogue>;

/// The `/mcp` endpoint over `agent`'s tools; `cancel` ends its sessions (host shutdown).
pub fn http_endpoint(
    agent: &crate::Agent,
    cancel: tokio_util::sync::CancellationToken,
) -> McpEndpoint {
    mpa_mcp::publish::http_service(Arc::new(HostCatalogue::new(agent.clone())), cancel)
}

/// Serves `agent`'s tools over this process's stdin/stdout as `actor` (`mpagent mcp serve
/// --stdio`) until the client closes its end.
pub async fn serve_stdio(agent: &crate::Agent, actor: mpa_protocol::Actor) -> Result<()> {
    mpa_mcp::publish::serve_stdio(Arc::new(HostCatalogue::new(agent.clone())), actor)
        .await
        .map_err(|e| CoreError::Config(format!("the MCP stdio server stopped: {e}")))
}

/// The registry set of a server's tools.
fn set_name(server: &str) -> String {
    format!("mcp:{server}")
}

/// The registry name of a server's tool.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("mcp__{server}__{tool}")
}

/// A tool name the function-calling APIs accept (`^[a-zA-Z0-9_-]{1,64}$`).
fn valid_function_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

struct Inner {
    store: Store,
    opts: ClientOptions,
    tools: OnceLock<Tools>,
    servers: Mutex<BTreeMap<String, Arc<Server>>>,
    /// Serialises configuration changes (add, remove, refresh of one set).
    changes: tokio::sync::Mutex<()>,
}

/// The external MCP servers of one host. Cheap to clone.
#[derive(Clone)]
pub struct McpHub(Arc<Inner>);

impl McpHub {
    pub fn new(store: Store, opts: ClientOptions) -> Self {
        McpHub(Arc::new(Inner {
            store,
            opts,
            tools: OnceLock::new(),
            servers: Mutex::new(BTreeMap::new()),
            changes: tokio::sync::Mutex::new(()),
        }))
    }

    fn servers(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Server>>> {
        crate::sync::lock(&self.0.servers)
    }

    /// Puts every stored server's last listed tools into `tools` (nothing is started). A stored
    /// configuration that no longer reads is skipped with a warning.
    pub async fn load(&self, tools: Tools) -> Result<()> {
        let _ = self.0.tools.set(tools);
        for row in self.0.store.mcp_servers().await? {
            let cfg = serde_json::from_str::<serde_json::Value>(&row.config)
                .map_err(|e| McpError::InvalidConfig(e.to_string()))
                .and_then(ServerConfig::from_json);
            let cfg = match cfg {
                Ok(cfg) => cfg,
                Err(e) => {
                    tracing::warn!(server = %row.name, error = %e, "stored MCP server skipped");
                    continue;
                }
            };
            let listed: Vec<RemoteTool> = serde_json::from_str(&row.tools).unwrap_or_default();
            let server = self.server_for(cfg);
            self.publish_set(&server, &listed);
        }
        Ok(())
    }

    /// A connection for `cfg` whose tool-list changes refresh this hub.
    fn server_for(&self, cfg: ServerConfig) -> Arc<Server> {
        let hub: Weak<Inner> = Arc::downgrade(&self.0);
        let name = cfg.name.clone();
        let on_change: mpa_mcp::client::ListChanged = Arc::new(move || {
            if let Some(inner) = hub.upgrade() {
                let hub = McpHub(inner);
                let name = name.clone();
                tokio::spawn(async move {
                    if let Err(e) = hub.refresh(&name).await {
                        tracing::warn!(server = %name, error = %e, "MCP tool list not refreshed");
                    }
                });
            }
        });
        let server = Arc::new(Server::new(cfg, self.0.opts, on_change));
        self.servers()
            .insert(server.name().to_string(), Arc::clone(&server));
        server
    }

    /// Replaces the server's registry set with `listed`.
    fn publish_set(&self, server: &Arc<Server>, listed: &[RemoteTool]) {
        let Some(tools) = self.0.tools.get() else {
            return;
        };
        let mut set = ToolRegistry::new();
        for remote in listed {
            let name = tool_name(server.name(), &remote.name);
            if !valid_function_name(&name) {
                tracing::warn!(server = %server.name(), tool = %remote.name,
                    "MCP tool left out: its name does not fit a function name");
                continue;
            }
            set.register(crate::tools::json_tool(external::ExternalTool::new(
                Arc::clone(server),
                remote.clone(),
            )));
        }
        if let Err(e) = tools.add_set(&set_name(server.name()), set) {
            tracing::warn!(server = %server.name(), error = %e, "MCP tools not registered");
        }
    }

    /// Lists the server's tools now and replaces its set (and the stored list).
    pub async fn refresh(&self, name: &str) -> Result<Vec<RemoteTool>> {
        let server = self
            .servers()
            .get(name)
            .cloned()
            .ok_or_else(|| CoreError::McpServerNotFound(name.to_string()))?;
        let listed = server.list_tools().await?;
        let _changes = self.0.changes.lock().await;
        // Removed meanwhile: stays removed.
        if !self
            .servers()
            .get(name)
            .is_some_and(|s| Arc::ptr_eq(s, &server))
        {
            return Ok(listed);
        }
        self.publish_set(&server, &listed);
        self.0
            .store
            .set_mcp_server_tools(name, serde_json::to_string(&listed).unwrap_or_default())
            .await?;
        Ok(listed)
    }

    /// Adds (or replaces) a server from an admin's JSON and lists its tools. The configuration is
    /// stored even when the server cannot be reached now (`status` says so); invalid JSON changes
    /// nothing.
    pub async fn add(&self, config: serde_json::Value) -> Result<serde_json::Value> {
        let cfg = ServerConfig::from_json(config)?;
        let name = cfg.name.clone();
        let stored = serde_json::to_string(&cfg).unwrap_or_default();
        let _changes = self.0.changes.lock().await;
        let old = self.servers().remove(&name);
        if let Some(old) = old {
            old.close().await;
        }
        let server = self.server_for(cfg);
        let listed = server.list_tools().await;
        let tools = listed.as_ref().map(Vec::clone).unwrap_or_default();
        self.0
            .store
            .put_mcp_server(McpServerRow {
                name: name.clone(),
                config: stored,
                tools: serde_json::to_string(&tools).unwrap_or_default(),
            })
            .await?;
        self.publish_set(&server, &tools);
        Ok(self.describe(&server, listed).await)
    }

    /// Removes a server: its tools leave the registry (calls already running finish), its
    /// process ends.
    pub async fn remove(&self, name: &str) -> Result<()> {
        let _changes = self.0.changes.lock().await;
        let server = self.servers().remove(name);
        let stored = self.0.store.delete_mcp_server(name).await?;
        if let Some(tools) = self.0.tools.get() {
            tools.remove_set(&set_name(name));
        }
        match server {
            Some(server) => server.close().await,
            None if !stored => return Err(CoreError::McpServerNotFound(name.to_string())),
            None => {}
        }
        Ok(())
    }

    /// Tests a server: `{"name": …}` alone tests the configured one now (its backoff forgotten,
    /// its tools refreshed); a whole configuration is tried without being stored.
    pub async fn test(&self, config: serde_json::Value) -> Result<serde_json::Value> {
        let only_name = config
            .as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.get("name"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_string);
        if let Some(name) = only_name {
            let server = self
                .servers()
                .get(&name)
                .cloned()
                .ok_or_else(|| CoreError::McpServerNotFound(name.clone()))?;
            server.reset_backoff().await;
            let listed = self.refresh(&name).await;
            return Ok(self.describe(&server, listed.map_err(mcp_error)).await);
        }
        let cfg = ServerConfig::from_json(config)?;
        let probe = Arc::new(Server::new(cfg, self.0.opts, Arc::new(|| {})));
        let listed = probe.list_tools().await;
        let out = self.describe(&probe, listed).await;
        probe.close().await;
        Ok(out)
    }

    /// Every configured server as an admin may see it (never an env or header value).
    pub async fn list(&self) -> Result<Vec<serde_json::Value>> {
        let rows = self.0.store.mcp_servers().await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let server = self.servers().get(&row.name).cloned();
            let Some(server) = server else { continue };
            let listed: Vec<RemoteTool> = serde_json::from_str(&row.tools).unwrap_or_default();
            let mut v = self.describe(&server, Ok(listed)).await;
            if let Some(o) = v.as_object_mut() {
                o.insert(
                    "status".into(),
                    if server.is_connected().await {
                        "connected"
                    } else {
                        "idle"
                    }
                    .into(),
                );
            }
            out.push(v);
        }
        Ok(out)
    }

    /// A server's public view with its tools (or why they could not be listed).
    async fn describe(
        &self,
        server: &Server,
        listed: std::result::Result<Vec<RemoteTool>, McpError>,
    ) -> serde_json::Value {
        let cfg = server.config();
        let mut v = cfg.public_view();
        if let Some(o) = v.as_object_mut() {
            match listed {
                Ok(tools) => {
                    o.insert("status".into(), "connected".into());
                    let tools: Vec<serde_json::Value> = tools
                        .iter()
                        .map(|t| {
                            serde_json::json!({
                                "name": tool_name(server.name(), &t.name),
                                "server_tool": t.name,
                                "description": t.description,
                                "effect": if cfg.is_read(&t.name) { "safe_read" } else { "unknown" },
                                "read_only_hint": t.read_only_hint,
                            })
                        })
                        .collect();
                    o.insert("tools".into(), tools.into());
                }
                Err(e) => {
                    o.insert("status".into(), "unavailable".into());
                    o.insert("error".into(), e.code().into());
                    o.insert("message".into(), e.to_string().into());
                    o.insert("tools".into(), serde_json::Value::Array(Vec::new()));
                }
            }
        }
        v
    }

    /// The server an external tool belongs to (`mpagent tool list`), by registry name.
    pub fn server_of(&self, tool: &str) -> Option<String> {
        let rest = tool.strip_prefix("mcp__")?;
        let (server, _) = rest.split_once("__")?;
        self.servers()
            .contains_key(server)
            .then(|| server.to_string())
    }

    /// Ends every server's session (stdio children are terminated and reaped).
    pub async fn shutdown(&self) {
        let servers: Vec<Arc<Server>> = self.servers().values().cloned().collect();
        for s in servers {
            s.close().await;
        }
    }
}

fn mcp_error(e: CoreError) -> McpError {
    match e {
        CoreError::Mcp(e) => e,
        other => McpError::Unavailable {
            server: String::new(),
            reason: other.to_string(),
        },
    }
}

/// The hub as a capability: built from the host's configuration and main store, its servers
/// end with the host.
pub struct McpServers {
    pub hub: McpHub,
}

impl crate::capability::Configure for McpServers {
    fn configure(setup: &crate::capability::Setup<'_>) -> Result<Option<Self>> {
        Ok(match (setup.host, setup.store) {
            (Some(host), Some(store)) => Some(McpServers {
                hub: McpHub::new(store.clone(), host.mcp),
            }),
            _ => None,
        })
    }
}

/// The agent's MCP hub, when its host has one.
pub fn hub_of(agent: &crate::Agent) -> Option<McpHub> {
    agent
        .services()
        .caps
        .get::<McpServers>()
        .map(|m| m.hub.clone())
}

#[async_trait::async_trait]
impl crate::capability::Capability for McpServers {
    fn name(&self) -> &'static str {
        "mcp"
    }

    async fn shutdown(&self) {
        self.hub.shutdown().await;
    }
}
