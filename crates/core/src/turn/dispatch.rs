//! Tool calls of one model response: policy → dispatch (parallel, bounded, per-call timeout) →
//! outcome classification → size cap. Every call gets exactly one result message, in call order;
//! after a stop, calls without a result are answered "result unknown: interrupted".

use crate::agent::Services;
use crate::outcome::classify;
use crate::plan::PLAN_METADATA_KEY;
use crate::result_cap::{DEFAULT_TOOL_RESULT_MAX_CHARS, cap_result};
use crate::session::SessionData;
use crate::tools::{ToolContext, ToolOutput};
use crate::turn::EventSink;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use mpa_protocol::{Actor, Event, Message, Outcome, ToolCall};
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub struct DispatchOutcome {
    pub results: Vec<Message>,
    /// Per result: the full content when the message holds a capped preview (for evidence).
    pub full_contents: Vec<Option<String>>,
    pub stopped: bool,
}

const UPDATE_PLAN: &str = "update_plan";

/// Aborts the spawned tool task when the dispatcher stops waiting for it.
struct AbortOnDrop(tokio::task::JoinHandle<ToolOutput>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn parse_args(raw: &str) -> Result<serde_json::Value, String> {
    if raw.trim().is_empty() {
        return Ok(serde_json::Value::Object(serde_json::Map::new()));
    }
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(v @ serde_json::Value::Object(_)) => Ok(v),
        Ok(_) => Err("tool arguments must be a JSON object".into()),
        Err(e) => Err(format!("tool arguments are not valid JSON: {e}")),
    }
}

/// Runs one call through policy, timeout and panic isolation, and classifies the result.
pub async fn run_single_tool(
    services: &Services,
    ctx: ToolContext,
    call: &ToolCall,
) -> (ToolOutput, Outcome) {
    let out = execute(services, ctx, call).await;
    let outcome = classify(&out.content, out.is_error);
    (out, outcome)
}

async fn execute(services: &Services, ctx: ToolContext, call: &ToolCall) -> ToolOutput {
    let Some(tool) = services.tools.get(&call.name) else {
        let known: Vec<&str> = services.tools.names().collect();
        return ToolOutput::failure(
            "unknown_tool",
            format!(
                "there is no tool named {:?}; available tools: {}",
                call.name,
                known.join(", ")
            ),
        );
    };
    if tool.meta().requires_admin && !ctx.actor.is_admin {
        return ToolOutput::failure(
            "permission_denied",
            format!(
                "{} is available to administrators only; ask an administrator or use another tool",
                call.name
            ),
        );
    }
    let args = match parse_args(&call.arguments) {
        Ok(a) => a,
        Err(msg) => {
            return ToolOutput::failure(
                "invalid_arguments",
                format!("invalid arguments for {}: {msg}", call.name),
            );
        }
    };
    let cancel = ctx.cancel.clone();
    let mut task = AbortOnDrop(tokio::spawn(async move { tool.call(ctx, args).await }));
    let joined = match services.cfg.tool_timeout {
        Some(limit) => match tokio::time::timeout(limit, &mut task.0).await {
            Ok(j) => j,
            Err(_) => {
                cancel.cancel();
                return timed_out(limit);
            }
        },
        None => (&mut task.0).await,
    };
    match joined {
        Ok(out) => out,
        Err(e) if e.is_panic() => {
            // The panic payload may hold arguments or secrets; it is logged by name only.
            tracing::warn!(tool = %call.name, "tool panicked");
            ToolOutput::failure(
                "tool_failed",
                "tool failed (panic); check arguments or query current state",
            )
        }
        Err(_) => interrupted(true),
    }
}

fn timed_out(limit: std::time::Duration) -> ToolOutput {
    let v = serde_json::json!({
        "success": false,
        "execution_outcome": "unknown",
        "error": "tool_timeout",
        "message": format!(
            "tool timed out after {}s; external writes may still be running; verify before retrying",
            limit.as_secs()
        ),
    });
    ToolOutput {
        content: v.to_string(),
        is_error: true,
        metadata: Default::default(),
    }
}

fn interrupted(started: bool) -> ToolOutput {
    let detail = if started {
        "the turn was stopped while this call was running; its effects may or may not have happened — verify before retrying"
    } else {
        "the turn was stopped before this call could report a result — verify the current state before retrying"
    };
    let v = serde_json::json!({
        "success": false,
        "execution_outcome": "unknown",
        "error": "interrupted",
        "message": format!("result unknown: interrupted; {detail}"),
    });
    ToolOutput {
        content: v.to_string(),
        is_error: true,
        metadata: Default::default(),
    }
}

/// A one-line human summary of a result for tool activity lines.
pub fn summary_line(content: &str) -> String {
    let from_json = serde_json::from_str::<serde_json::Value>(content)
        .ok()
        .and_then(|v| {
            ["message", "error", "summary"]
                .iter()
                .find_map(|k| v.get(*k).and_then(|x| x.as_str()).map(str::to_string))
        });
    let line = from_json.unwrap_or_else(|| content.lines().next().unwrap_or("").to_string());
    let mut s: String = line.chars().take(200).collect();
    if line.chars().count() > 200 {
        s.push('…');
    }
    s
}

fn args_summary(call: &ToolCall) -> String {
    let mut s: String = call.arguments.chars().take(120).collect();
    if call.arguments.chars().count() > 120 {
        s.push('…');
    }
    format!("{}({})", call.name, crate::redaction::redact(&s))
}

pub async fn run_tool_calls(
    services: &Services,
    data: &SessionData,
    actor: &Actor,
    calls: &[ToolCall],
    sink: &EventSink<'_>,
    cancel: &CancellationToken,
) -> DispatchOutcome {
    let plan_calls = calls.iter().filter(|c| c.name == UPDATE_PLAN).count();
    let mut slots: Vec<Option<(ToolOutput, Outcome)>> = vec![None; calls.len()];
    let mut started = vec![false; calls.len()];
    let limit = Arc::new(Semaphore::new(services.cfg.max_parallel_tools.max(1)));
    let mut running = FuturesUnordered::new();
    for (i, call) in calls.iter().enumerate() {
        if call.name == UPDATE_PLAN && plan_calls > 1 {
            let out = ToolOutput::failure(
                "multiple_update_plan",
                "only one update_plan per response; plan not updated, merge the steps and retry",
            );
            sink.emit(Event::ToolFinished {
                tool_id: call.id.clone(),
                name: call.name.clone(),
                outcome: Outcome::Failed,
                message: summary_line(&out.content),
            });
            slots[i] = Some((out, Outcome::Failed));
            continue;
        }
        let ctx = ToolContext {
            actor: actor.clone(),
            session_id: data.session_id.clone(),
            call_id: call.id.clone(),
            cancel: cancel.child_token(),
            session: Arc::clone(&data.state),
            review: None,
        };
        let limit = Arc::clone(&limit);
        running.push(async move {
            let permit = limit.acquire_owned().await;
            (i, permit, ctx)
        });
    }
    // Stage 1 hands out permits; stage 2 runs the calls. Both stop at a cancel.
    let mut executing = FuturesUnordered::new();
    let mut stopped = false;
    loop {
        if running.is_empty() && executing.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            _ = cancel.cancelled() => { stopped = true; break; }
            Some((i, permit, ctx)) = running.next(), if !running.is_empty() => {
                let call: &ToolCall = &calls[i];
                started[i] = true;
                sink.emit(Event::ToolStarted {
                    tool_id: call.id.clone(),
                    name: call.name.clone(),
                    message: args_summary(call),
                });
                executing.push(async move {
                    let r = run_single_tool(services, ctx, call).await;
                    drop(permit);
                    (i, r)
                });
            }
            Some((i, r)) = executing.next(), if !executing.is_empty() => {
                let call = &calls[i];
                sink.emit(Event::ToolFinished {
                    tool_id: call.id.clone(),
                    name: call.name.clone(),
                    outcome: r.1,
                    message: summary_line(&r.0.content),
                });
                if let Some(plan) = r.0.metadata.get(PLAN_METADATA_KEY) {
                    sink.emit(Event::PlanUpdated { plan: plan.clone() });
                }
                slots[i] = Some(r);
            }
        }
    }
    // Dropping the pending futures aborts their tasks (AbortOnDrop).
    drop(executing);
    drop(running);
    let mut results = Vec::with_capacity(calls.len());
    let mut full_contents = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        let (out, outcome) = match slots[i].take() {
            Some(r) => r,
            None => {
                let out = interrupted(started[i]);
                sink.emit(Event::ToolFinished {
                    tool_id: call.id.clone(),
                    name: call.name.clone(),
                    outcome: Outcome::Unknown,
                    message: summary_line(&out.content),
                });
                (out, Outcome::Unknown)
            }
        };
        let self_capped = services
            .tools
            .get(&call.name)
            .is_some_and(|t| t.meta().self_capped);
        let preview = if self_capped {
            None
        } else {
            cap_result(
                &call.name,
                &out.content,
                outcome,
                DEFAULT_TOOL_RESULT_MAX_CHARS,
            )
        };
        // A capped message keeps its full content beside it for the evidence store.
        let (content, full) = match preview {
            Some(p) => (p, Some(out.content)),
            None => (out.content, None),
        };
        full_contents.push(full);
        let mut m = Message::tool(call.id.clone(), call.name.clone(), content, outcome);
        m.metadata = out.metadata;
        results.push(m);
    }
    DispatchOutcome {
        results,
        full_contents,
        stopped,
    }
}
