//! Tool calls of one model response, through the one call path ([`invoke`]): parallel, bounded,
//! each under the tool timeout. Every call gets exactly one result message, in call order; after a
//! stop, calls without a result are answered "result unknown: interrupted".

use crate::agent::Services;
use crate::plan::PLAN_METADATA_KEY;
use crate::session::SessionData;
use crate::tools::ToolContext;
use crate::tools::invoke::{Invoked, Invoker, interrupted, invoke, summary_line};
use crate::tools::policy::Origin;
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

fn args_summary(call: &ToolCall) -> String {
    let mut s: String = call.arguments.chars().take(120).collect();
    if call.arguments.chars().count() > 120 {
        s.push('…');
    }
    format!("{}({})", call.name, crate::redaction::redact(&s))
}

pub fn invoker(services: &Services) -> Invoker<'_> {
    Invoker {
        registry: &services.tools,
        timeout: services.cfg.tool_timeout,
    }
}

pub async fn run_tool_calls(
    services: &Services,
    data: &SessionData,
    actor: &Actor,
    calls: &[ToolCall],
    sink: &EventSink<'_>,
    cancel: &CancellationToken,
) -> DispatchOutcome {
    let mut slots: Vec<Option<Invoked>> = vec![None; calls.len()];
    let mut started = vec![false; calls.len()];
    let limit = Arc::new(Semaphore::new(services.cfg.max_parallel_tools.max(1)));
    let mut running = FuturesUnordered::new();
    for (i, call) in calls.iter().enumerate() {
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
    let inv = invoker(services);
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
                let same = calls.iter().filter(|c| c.name == call.name).count();
                executing.push(async move {
                    let r = invoke(inv, ctx, Origin::Turn, call, same).await;
                    drop(permit);
                    (i, r)
                });
            }
            Some((i, r)) = executing.next(), if !executing.is_empty() => {
                let call = &calls[i];
                sink.emit(Event::ToolFinished {
                    tool_id: call.id.clone(),
                    name: call.name.clone(),
                    outcome: r.output.outcome,
                    message: summary_line(&r.output.content),
                });
                if let Some(plan) = r.output.metadata.get(PLAN_METADATA_KEY) {
                    sink.emit(Event::PlanUpdated { plan: plan.clone() });
                }
                slots[i] = Some(r);
            }
        }
    }
    // Dropping the pending futures aborts their tasks.
    drop(executing);
    drop(running);
    let mut results = Vec::with_capacity(calls.len());
    let mut full_contents = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        let invoked = match slots[i].take() {
            Some(r) => r,
            None => {
                let out = interrupted(started[i]);
                sink.emit(Event::ToolFinished {
                    tool_id: call.id.clone(),
                    name: call.name.clone(),
                    outcome: Outcome::Unknown,
                    message: summary_line(&out.content),
                });
                Invoked {
                    output: out,
                    full_content: None,
                }
            }
        };
        full_contents.push(invoked.full_content);
        let out = invoked.output;
        let mut m = Message::tool(call.id.clone(), call.name.clone(), out.content, out.outcome);
        m.metadata = out.metadata;
        results.push(m);
    }
    DispatchOutcome {
        results,
        full_contents,
        stopped,
    }
}
