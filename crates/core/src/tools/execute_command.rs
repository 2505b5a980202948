//! `execute_command` adapter: admin-only; the terminal scope is the session's, bound by the host
//! and never named by tool JSON. The hub sizes its own replies (65 536-character budget), so the
//! generic cap does not re-truncate them.

use super::{JsonTool, ToolContext, ToolMeta, ToolOutput};
use async_trait::async_trait;
use mpa_exec::{ExecHub, ScopeOwner};
use mpa_protocol::ToolSpec;

pub struct ExecuteCommand {
    pub hub: ExecHub,
}

#[async_trait]
impl JsonTool for ExecuteCommand {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "execute_command".into(),
            description: mpa_exec::execute_command_description().into(),
            parameters: mpa_exec::execute_command_parameters_schema(),
        }
    }

    fn meta(&self) -> ToolMeta {
        ToolMeta::new(mpa_protocol::EffectClass::ArbitraryExecution)
            .admin()
            .self_capped()
    }

    async fn call(&self, ctx: ToolContext, args: serde_json::Value) -> ToolOutput {
        if !ctx.actor.is_admin {
            return ToolOutput::classified(mpa_exec::permission_denied_result().to_string(), true);
        }
        let scope = {
            let Ok(mut st) = ctx.session.lock() else {
                return ToolOutput::failure(
                    "terminal_unavailable",
                    "terminal scope is unavailable",
                );
            };
            st.exec_scope
                .get_or_insert_with(|| {
                    self.hub.open_scope(ScopeOwner {
                        user_key: ctx.actor.user_key(),
                        label: format!("session:{}", ctx.session_id),
                    })
                })
                .clone()
        };
        ToolOutput::classified(self.hub.execute(&scope, args).await.to_string(), false)
    }
}
