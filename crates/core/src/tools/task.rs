//! `task` (spec runtime.md §8.1): one subtask, blocking — a read-only subagent runs it and its
//! final text is the answer. The same controller as `subagent_task` (its limits and seal apply);
//! a stopped turn cancels the child.

use super::{ToolContext, ToolMeta, ToolOutput, TypedTool};
use crate::subagent::controller::{Controller, TaskStatus};
use crate::subagent::{Hub, TaskEntry, TerminalShare, launch};
use async_trait::async_trait;
use mpa_protocol::Outcome;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

pub const NAME: &str = "task";

pub const NO_RESULT: &str = "the subagent did not return a usable result";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskArgs {
    /// The self-contained task for the subagent: what to check and what to report.
    pub description: String,
    /// Only `general-purpose` exists; other values fall back to it.
    #[serde(default)]
    pub subagent_type: Option<String>,
    /// Terminal sessions of yours it may read: `[{session_id, actions:["read","wait"]}]`.
    /// Mentioning a session in the description grants nothing.
    #[serde(default)]
    pub terminal_sessions: Vec<TerminalShare>,
}

pub struct Task {
    pub hub: Arc<Hub>,
}

/// Cancels the children when the call is dropped (a stopped turn); a no-op once they ended.
pub(crate) struct CancelOnDrop(pub Controller, pub Vec<String>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel_now(&self.1);
    }
}

/// A blocking wait is bounded by the child's own limits; this only keeps the deadline finite.
const BLOCKING_WAIT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

#[async_trait]
impl TypedTool for Task {
    type Args = TaskArgs;
    const NAME: &'static str = NAME;

    fn description(&self) -> String {
        "Hand one independent, read-only investigation to a subagent and wait for its report. \
         The subagent can only read (the host refuses it any write); it does not see this \
         conversation, so describe the task completely. Returns its final text. For several \
         tasks in parallel use subagent_task."
            .into()
    }

    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }

    async fn run(&self, ctx: ToolContext, args: TaskArgs) -> ToolOutput {
        let controller = self.hub.controller(&ctx.session, grace(&ctx));
        let entry = TaskEntry {
            description: args.description,
            subagent_type: args.subagent_type,
            terminal_sessions: args.terminal_sessions,
        };
        let ids = match launch(&self.hub, &ctx, &controller, &[entry], None).await {
            Ok(ids) => ids,
            Err(r) => return ToolOutput::failure(r.code, r.message),
        };
        let _cancel_child = CancelOnDrop(controller.clone(), ids.clone());
        let waited = controller
            .wait(&ids, false, BLOCKING_WAIT, &ctx.cancel)
            .await;
        if waited.timed_out {
            controller.cancel(&ids).await;
        }
        let Some(view) = controller.views(&ids).into_iter().next() else {
            return ToolOutput::failure("subagent_failed", NO_RESULT);
        };
        match view.status {
            TaskStatus::Completed => ToolOutput::json(
                &json!({"success": true, "task_id": view.task_id,
                    "result": view.result, "result_truncated": view.result_truncated,
                    "summary": "called 1 subagent (completed)"}),
                Outcome::Succeeded,
            ),
            status => ToolOutput::json(
                &json!({"success": false, "error": "subagent_failed", "task_id": view.task_id,
                    "status": status,
                    "message": view.error.unwrap_or_else(|| NO_RESULT.into()),
                    "summary": format!("called 1 subagent ({status:?})").to_lowercase()}),
                Outcome::Failed,
            )
            .with_error("subagent_failed"),
        }
    }
}

/// The host's cancel grace.
pub(crate) fn grace(ctx: &ToolContext) -> std::time::Duration {
    ctx.agent
        .services()
        .map(|s| s.cfg.subagent_cancel_grace)
        .unwrap_or(crate::subagent::controller::CANCEL_GRACE)
}
