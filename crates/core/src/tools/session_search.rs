//! `session_search` adapter: the caller's own evidence store only (the user key comes from the
//! host's actor, never from arguments), the current session from the host's context. The tool
//! sizes its output itself (display caps), so the generic cap never re-truncates it.

use super::{JsonTool, ToolContext, ToolMeta, ToolOutput};
use async_trait::async_trait;
use mpa_history::{HistoryHub, SearchContext};
use mpa_protocol::ToolSpec;

pub struct SessionSearch {
    pub hub: HistoryHub,
}

#[async_trait]
impl JsonTool for SessionSearch {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "session_search".into(),
            description: mpa_history::session_search_tool_description().into(),
            parameters: mpa_history::session_search_parameters_schema(),
        }
    }

    fn meta(&self) -> ToolMeta {
        ToolMeta::new(mpa_protocol::EffectClass::SensitiveRead)
            .internal()
            .self_capped()
    }

    async fn call(&self, ctx: ToolContext, args: serde_json::Value) -> ToolOutput {
        let search = SearchContext {
            current_session_id: Some(ctx.session_id.clone()),
        };
        let v = self
            .hub
            .session_search(&ctx.actor.user_key(), &search, args)
            .await;
        ToolOutput::classified(v.to_string(), false)
    }
}
