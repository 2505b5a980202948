//! An external server's tool in the registry: its schema as the server gave it, the host's
//! metadata (admin-only, external, ledgered), and a call that reaches the server through its
//! connection. What the call returns is classified like any text result (`isError` → failed);
//! a server that cannot be reached is `mcp_server_unavailable` (nothing ran), a connection lost
//! during a call that may write is `unknown`.

use crate::tools::{JsonTool, ToolContext, ToolMeta, ToolOutput};
use async_trait::async_trait;
use mpa_mcp::{McpError, RemoteTool, Server};
use mpa_protocol::{EffectClass, ToolSpec};
use std::sync::Arc;

pub struct ExternalTool {
    server: Arc<Server>,
    remote: RemoteTool,
    spec: ToolSpec,
    meta: ToolMeta,
}

impl ExternalTool {
    pub fn new(server: Arc<Server>, remote: RemoteTool) -> Self {
        let effect = if server.config().is_read(&remote.name) {
            EffectClass::SafeRead
        } else {
            EffectClass::Unknown
        };
        let mut parameters = remote.input_schema.clone();
        if !parameters.is_object() {
            parameters = serde_json::json!({"type": "object", "properties": {}});
        }
        let spec = ToolSpec {
            name: super::tool_name(server.name(), &remote.name),
            description: format!(
                "[external MCP server {}] {}",
                server.name(),
                remote.description
            ),
            parameters,
        };
        Self {
            server,
            remote,
            spec,
            meta: ToolMeta::new(effect).admin().external(),
        }
    }
}

#[async_trait]
impl JsonTool for ExternalTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn meta(&self) -> ToolMeta {
        self.meta
    }

    async fn call(&self, ctx: ToolContext, args: serde_json::Value) -> ToolOutput {
        let arguments = match args {
            serde_json::Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let call = self.server.call(&self.remote.name, arguments);
        // A stopped turn or the timeout drops the request (the SDK cancels it on the server).
        let result = tokio::select! {
            r = call => r,
            () = ctx.cancel.cancelled() => {
                return ToolOutput::unknown(
                    "cancelled",
                    "the call was cancelled while the external server ran it; verify before retrying",
                );
            }
        };
        match result {
            Ok(r) => {
                let text = if r.text.is_empty() {
                    r.structured.map(|v| v.to_string()).unwrap_or_default()
                } else {
                    r.text
                };
                ToolOutput::classified(text, r.is_error)
            }
            Err(e @ McpError::ConnectionLost { .. }) if !self.meta.effect.is_read() => {
                ToolOutput::unknown(
                    e.code(),
                    format!("{e}; the tool may have acted — verify before retrying"),
                )
            }
            Err(e @ McpError::Unavailable { .. }) => {
                ToolOutput::failure("mcp_server_unavailable", e.to_string())
            }
            Err(e) => ToolOutput::failure(e.code(), e.to_string()),
        }
    }
}
