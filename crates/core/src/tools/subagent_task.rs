//! `subagent_task` (spec runtime.md §8.1): the asynchronous controller of read-only subagents —
//! `start` (one task or up to 8), `status`, `wait` (`all` or `any`, bounded by `timeout_ms`),
//! `cancel` (with the 5 s grace), `run` (start and wait) and `pipeline` (steps in order, each
//! fed the earlier results as private context). The children are the session's
//! ([`crate::subagent::controller`]); what a turn leaves running is cancelled when it ends.

use super::task::{CancelOnDrop, grace};
use super::{ToolContext, ToolMeta, ToolOutput, TypedTool};
use crate::subagent::controller::{Controller, Implied, RESULT_CLIP, TaskStatus, TaskView, clip};
use crate::subagent::{Hub, TaskEntry, TerminalShare, launch};
use async_trait::async_trait;
use mpa_protocol::Outcome;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

pub const NAME: &str = "subagent_task";

pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
pub const MAX_TIMEOUT_MS: u64 = 300_000;
/// Everything earlier steps of a pipeline said, as one step reads it.
pub const PIPELINE_CONTEXT_CLIP: usize = 12_000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SubagentAction {
    #[default]
    Start,
    Status,
    Wait,
    Cancel,
    Run,
    Pipeline,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitMode {
    #[default]
    All,
    Any,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubagentTaskArgs {
    /// start (default) | status | wait | cancel | run (start and wait) | pipeline (tasks in
    /// order, each given the earlier results).
    #[serde(default)]
    pub action: SubagentAction,
    /// One task (start/run): what the subagent should find out, completely described.
    #[serde(default)]
    pub description: Option<String>,
    /// Only `general-purpose` exists; other values fall back to it.
    #[serde(default)]
    pub subagent_type: Option<String>,
    /// With `description`: terminal sessions of yours it may read (`read`/`wait`).
    #[serde(default)]
    pub terminal_sessions: Vec<TerminalShare>,
    /// Several tasks (start/run/pipeline), at most 8; grants go in each task.
    #[serde(default)]
    pub tasks: Vec<TaskEntry>,
    /// status/wait/cancel; empty = all (wait: running or not yet reported; cancel: running).
    #[serde(default)]
    pub task_ids: Vec<String>,
    #[serde(default)]
    pub task_id: Option<String>,
    /// wait/run: `all` (default) or `any` (return when the first has ended).
    #[serde(default)]
    pub wait_mode: WaitMode,
    /// wait/run: how long to wait (default 60000, at most 300000); pipeline: per step (> 0).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

pub struct SubagentTask {
    pub hub: Arc<Hub>,
}

#[derive(Serialize)]
struct Reply {
    success: bool,
    action: SubagentAction,
    wait_mode: WaitMode,
    missing_task_ids: Vec<String>,
    tasks: Vec<TaskView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cancel_pending_task_ids: Option<Vec<String>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    timed_out: bool,
    /// The one line the user's stream shows for this call.
    summary: String,
}

fn summary(tasks: &[TaskView]) -> String {
    let count = |s: TaskStatus| tasks.iter().filter(|t| t.status == s).count();
    let mut parts = Vec::new();
    for (s, name) in [
        (TaskStatus::Completed, "completed"),
        (TaskStatus::Running, "running"),
        (TaskStatus::Pending, "pending"),
        (TaskStatus::Failed, "failed"),
        (TaskStatus::Cancelled, "cancelled"),
    ] {
        let n = count(s);
        if n > 0 {
            parts.push(format!("{n} {name}"));
        }
    }
    let n = tasks.len();
    format!(
        "called {n} subagent{} ({})",
        if n == 1 { "" } else { "s" },
        parts.join(", ")
    )
}

impl SubagentTaskArgs {
    /// The selection of status/wait/cancel.
    fn ids(&self) -> Vec<String> {
        let mut ids = self.task_ids.clone();
        if let Some(id) = &self.task_id {
            ids.push(id.clone());
        }
        ids
    }

    /// The tasks of start/run/pipeline: `tasks`, or the single-task form.
    fn entries(&self) -> Result<Vec<TaskEntry>, ToolOutput> {
        if !self.tasks.is_empty() {
            if self.description.is_some() || !self.terminal_sessions.is_empty() {
                return Err(ToolOutput::failure(
                    "invalid_arguments",
                    "give either tasks or one description; grants go inside each task entry, \
                     never beside tasks",
                ));
            }
            return Ok(self.tasks.clone());
        }
        match &self.description {
            Some(d) if !d.trim().is_empty() => Ok(vec![TaskEntry {
                description: d.clone(),
                subagent_type: self.subagent_type.clone(),
                terminal_sessions: self.terminal_sessions.clone(),
            }]),
            _ => Err(ToolOutput::failure(
                "invalid_arguments",
                format!("{:?} needs a description or tasks", self.action).to_lowercase(),
            )),
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(
            self.timeout_ms
                .unwrap_or(DEFAULT_TIMEOUT_MS)
                .min(MAX_TIMEOUT_MS),
        )
    }
}

fn reply(r: Reply) -> ToolOutput {
    let outcome = if r.success {
        Outcome::Succeeded
    } else {
        Outcome::Failed
    };
    ToolOutput::json(&r, outcome)
}

#[async_trait]
impl TypedTool for SubagentTask {
    type Args = SubagentTaskArgs;
    const NAME: &'static str = NAME;

    fn description(&self) -> String {
        "Run independent read-only investigations in parallel subagents and collect their \
         reports. action=start (one description, or tasks: up to 8, each {description, \
         terminal_sessions}) returns task ids at once; wait (wait_mode all|any, timeout_ms \
         default 60000, max 300000) returns their results; status shows them; cancel stops them; \
         run starts and waits; pipeline runs tasks in order, each given the earlier results. At \
         most 8 active and 4 running at once. Subagents can only read, do not see this \
         conversation (describe each task completely) and are cancelled when your turn ends. \
         Their reports are evidence: combine them for the user yourself."
            .into()
    }

    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }

    async fn run(&self, ctx: ToolContext, args: SubagentTaskArgs) -> ToolOutput {
        let controller = self.hub.controller(&ctx.session, grace(&ctx));
        let base = |tasks: Vec<TaskView>| Reply {
            success: true,
            action: args.action,
            wait_mode: args.wait_mode,
            missing_task_ids: Vec::new(),
            summary: summary(&tasks),
            tasks,
            cancel_pending_task_ids: None,
            timed_out: false,
        };
        match args.action {
            SubagentAction::Start | SubagentAction::Run => {
                let entries = match args.entries() {
                    Ok(e) => e,
                    Err(out) => return out,
                };
                let ids = match launch(&self.hub, &ctx, &controller, &entries, None).await {
                    Ok(ids) => ids,
                    Err(r) => return ToolOutput::failure(r.code, r.message),
                };
                if args.action == SubagentAction::Start {
                    return reply(base(controller.views(&ids)));
                }
                let waited = controller
                    .wait(
                        &ids,
                        args.wait_mode == WaitMode::Any,
                        args.timeout(),
                        &ctx.cancel,
                    )
                    .await;
                reply(Reply {
                    timed_out: waited.timed_out,
                    ..base(waited.tasks)
                })
            }
            SubagentAction::Status => {
                let sel = controller.select(&args.ids(), Implied::All);
                reply(Reply {
                    missing_task_ids: sel.missing,
                    ..base(controller.views(&sel.ids))
                })
            }
            SubagentAction::Wait => {
                let sel = controller.select(&args.ids(), Implied::Unreported);
                let waited = controller
                    .wait(
                        &sel.ids,
                        args.wait_mode == WaitMode::Any,
                        args.timeout(),
                        &ctx.cancel,
                    )
                    .await;
                reply(Reply {
                    missing_task_ids: sel.missing,
                    timed_out: waited.timed_out,
                    ..base(waited.tasks)
                })
            }
            SubagentAction::Cancel => {
                let sel = controller.select(&args.ids(), Implied::Active);
                let pending = controller.cancel(&sel.ids).await;
                reply(Reply {
                    missing_task_ids: sel.missing,
                    cancel_pending_task_ids: (!pending.is_empty()).then_some(pending),
                    ..base(controller.views(&sel.ids))
                })
            }
            SubagentAction::Pipeline => pipeline(&self.hub, &ctx, &controller, &args).await,
        }
    }
}

/// The earlier steps' results as one private block (each ≤ 12,000 characters, all together
/// too).
fn pipeline_context(done: &[TaskView]) -> Option<String> {
    if done.is_empty() {
        return None;
    }
    let mut body = String::new();
    for (i, t) in done.iter().enumerate() {
        let result = t.result.as_deref().unwrap_or_default();
        body.push_str(&format!(
            "[step {} · {}]\n{}\n\n",
            i + 1,
            t.task_id,
            clip(result, RESULT_CLIP).0
        ));
    }
    let (body, cut) = clip(body.trim_end(), PIPELINE_CONTEXT_CLIP);
    Some(format!(
        "<pipeline_context>\nPrivate context from the earlier steps of this pipeline: use it for \
         your task, do not repeat it verbatim.{}\n{body}\n</pipeline_context>",
        if cut { " (cut to fit)" } else { "" }
    ))
}

async fn pipeline(
    hub: &Hub,
    ctx: &ToolContext,
    controller: &Controller,
    args: &SubagentTaskArgs,
) -> ToolOutput {
    if args.tasks.is_empty() {
        return ToolOutput::failure("invalid_arguments", "pipeline needs tasks (its steps)");
    }
    if args.timeout_ms == Some(0) {
        return ToolOutput::failure(
            "invalid_arguments",
            "pipeline needs timeout_ms > 0 (it applies to each step)",
        );
    }
    let entries = match args.entries() {
        Ok(e) => e,
        Err(out) => return out,
    };
    if entries.len() > crate::subagent::controller::MAX_TASKS_PER_SUBMISSION {
        return ToolOutput::failure(
            "too_many_tasks",
            format!(
                "{} steps; at most {}",
                entries.len(),
                crate::subagent::controller::MAX_TASKS_PER_SUBMISSION
            ),
        );
    }
    let mut done: Vec<TaskView> = Vec::new();
    let mut error: Option<String> = None;
    for entry in &entries {
        let context = pipeline_context(&done);
        let ids = match launch(
            hub,
            ctx,
            controller,
            std::slice::from_ref(entry),
            context.as_deref(),
        )
        .await
        {
            Ok(ids) => ids,
            Err(r) => {
                error = Some(format!("{}: {}", r.code, r.message));
                break;
            }
        };
        let _cancel_child = CancelOnDrop(controller.clone(), ids.clone());
        let waited = controller
            .wait(&ids, false, args.timeout(), &ctx.cancel)
            .await;
        if waited.timed_out {
            controller.cancel(&ids).await;
        }
        let Some(view) = controller.views(&ids).into_iter().next() else {
            break;
        };
        let status = view.status;
        done.push(view);
        if status != TaskStatus::Completed {
            error = Some(if waited.timed_out {
                format!(
                    "step {} did not finish within timeout_ms; the pipeline stopped",
                    done.len()
                )
            } else {
                format!("step {} ended {status:?}; the pipeline stopped", done.len()).to_lowercase()
            });
            break;
        }
    }
    let mut v = serde_json::Map::new();
    v.insert("success".into(), json!(error.is_none()));
    v.insert("action".into(), json!("pipeline"));
    v.insert(
        "error".into(),
        json!(error.as_ref().map(|_| "pipeline_stopped")),
    );
    if let Some(message) = &error {
        v.insert("message".into(), json!(message));
    }
    v.insert("tasks".into(), json!(done));
    v.insert("summary".into(), json!(summary(&done)));
    let outcome = if error.is_none() {
        Outcome::Succeeded
    } else {
        Outcome::Failed
    };
    ToolOutput::object(v, outcome)
}
