//! `get_tool_execution(invocation_id)` (spec runtime.md §6.7): reads one ledger record of the
//! current user and session. Another session's or user's id answers exactly like a missing one.
//! Querying never retries anything.

use super::guardrails::LoopClass;
use super::{ToolContext, ToolMeta, ToolOutput, ToolResult, TypedTool};
use async_trait::async_trait;
use mpa_protocol::Outcome;
use mpa_store::Store;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetToolExecutionArgs {
    /// The `invocation_id` from a tool result's `_tool_execution` receipt.
    #[schemars(length(min = 1, max = 128))]
    pub invocation_id: String,
}

pub struct GetToolExecution {
    pub store: Store,
}

#[derive(Serialize)]
struct Found {
    success: bool,
    invocation_id: String,
    tool_name: String,
    execution_status: mpa_store::LedgerStatus,
    summary: String,
    updated_at: String,
}

impl ToolResult for Found {}

fn not_found() -> ToolOutput {
    ToolOutput::json(
        &serde_json::json!({"success": false, "error": "execution_not_found"}),
        Outcome::Failed,
    )
}

#[async_trait]
impl TypedTool for GetToolExecution {
    type Args = GetToolExecutionArgs;
    const NAME: &'static str = "get_tool_execution";

    fn description(&self) -> String {
        "Look up the durable receipt of a write you made in this conversation by the invocation_id of its \
         `_tool_execution` receipt: running, succeeded, failed, pending (submitted, completion not \
         observed) or unknown (may or may not have happened). It never retries anything; an unknown \
         write stays unknown until a read shows the actual state."
            .into()
    }

    fn meta(&self) -> ToolMeta {
        // It polls a receipt that moves on its own (pending → succeeded).
        ToolMeta::read().internal().loop_class(LoopClass::POLLER)
    }

    async fn run(&self, ctx: ToolContext, args: GetToolExecutionArgs) -> ToolOutput {
        let id = args.invocation_id.trim();
        if id.is_empty() || id.chars().count() > 128 {
            return not_found();
        }
        match self
            .store
            .ledger_get(&ctx.actor.user_id.0, &ctx.session_id, id)
            .await
        {
            Ok(Some(rec)) => ToolOutput::result(&Found {
                success: true,
                invocation_id: rec.invocation_id,
                tool_name: rec.tool_name,
                execution_status: rec.status,
                summary: rec.summary,
                updated_at: rec.updated_at,
            }),
            Ok(None) => not_found(),
            Err(e) => ToolOutput::failure(
                "storage_unavailable",
                format!("the execution ledger cannot be read right now: {e}"),
            ),
        }
    }
}
