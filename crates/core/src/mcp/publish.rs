//! The host's side of the MCP endpoint: the catalogue `mpa-mcp` publishes. Each call is one
//! direct call through the one call path with origin `mcp` (the same policy, ledger, timeout,
//! outcome and result cap as in a chat; loop guardrails only warn), in a session of its own per
//! call under the caller's id, so nothing of another user's history is reachable.

use crate::agent::{Agent, new_session_id, server_session_id};
use crate::tools::policy::Origin;
use crate::tools::{ToolContext, invoke};
use mpa_mcp::{Catalogue, Published};
use mpa_protocol::{Actor, ToolCall, ToolSpec};

/// The host's tools for MCP clients.
pub struct HostCatalogue {
    agent: Agent,
}

impl HostCatalogue {
    pub fn new(agent: Agent) -> Self {
        Self { agent }
    }
}

impl Catalogue for HostCatalogue {
    fn tools(&self, actor: &Actor) -> Vec<ToolSpec> {
        self.agent.services().tools.view().publishable_specs(actor)
    }

    async fn call(
        &self,
        actor: Actor,
        tool: String,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Published {
        let services = self.agent.services();
        // Only what `tools/list` offers this caller can be called.
        let published =
            services.tools.view().get(&tool).is_some_and(|t| {
                crate::tools::policy::visible(&actor, &t.meta) && !t.meta.internal
            });
        if !published {
            return Published::UnknownTool;
        }
        let call_id = format!("mcp_{}", new_session_id());
        let session_id = server_session_id(&actor.user_id, "mcp");
        let mut ctx = ToolContext::detached(actor, &session_id, &call_id);
        ctx.channel = "mcp".into();
        ctx.request_id = new_session_id();
        ctx.agent = crate::handle::AgentHandle::new(services, Origin::Mcp, &ctx.request_id);
        let call = ToolCall {
            id: call_id,
            name: tool,
            arguments: serde_json::Value::Object(arguments).to_string(),
        };
        let done = invoke::invoke_one(services.invoker(), ctx, Origin::Mcp, &call).await;
        if done.output.error.as_deref() == Some("invalid_arguments") {
            return Published::InvalidArguments(done.output.content);
        }
        Published::Result {
            is_error: done.output.outcome == mpa_protocol::Outcome::Failed,
            text: done.output.content,
        }
    }
}
