//! The tool stage: the calls of one model response through the one call path
//! ([`invoke`](crate::tools::invoke::invoke)), in parallel up to a bound, each under the tool
//! timeout. Every call gets exactly one result message, in call order; after a stop, calls without
//! a result are answered "result unknown: interrupted".

use crate::handle::{AgentHandle, EventSink};
use crate::plan::PLAN_METADATA_KEY;
use crate::sync::Slots;
use crate::tools::gate::Halt;
use crate::tools::invoke::{Dispatched, Invoked, Invoker, dispatch, interrupted, summary_line};
use crate::tools::line;
use crate::tools::policy::Origin;
use crate::tools::{SessionState, ToolContext};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use mpa_learning::ReviewToken;
use mpa_protocol::{Actor, Event, Message, Outcome, ToolCall};
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Who runs the calls, and where.
pub struct ToolStage<'a> {
    pub invoker: Invoker<'a>,
    pub origin: Origin,
    pub max_parallel: usize,
    pub actor: &'a Actor,
    pub session_id: &'a str,
    pub channel: &'a str,
    /// This user request's id (identical MoviePilot writes inside it are one write).
    pub request_id: &'a str,
    pub state: &'a Arc<SessionState>,
    pub review: Option<&'a ReviewToken>,
    /// The calling agent, handed to every call.
    pub handle: AgentHandle,
}

pub struct ToolResults {
    /// One result per call, in call order.
    pub results: Vec<Invoked>,
    pub stopped: bool,
    /// The first halt a gate decided for one of the calls.
    pub halt: Option<Halt>,
}

/// The tool message for a call's result (its host notes appended), with the full content when
/// the message holds a capped preview or notes (the evidence keeps the result itself).
pub fn message_of(call: &ToolCall, invoked: Invoked) -> (Message, Option<String>) {
    let mut out = invoked.output;
    let mut full = invoked.full_content;
    if out.has_notes() && full.is_none() {
        full = Some(out.content.clone());
    }
    out.render_notes();
    let images = out.take_images();
    let mut m = Message::tool(call.id.clone(), call.name.clone(), out.content, out.outcome);
    m.metadata = out.metadata;
    m.images = images;
    (m, full)
}

fn args_summary(call: &ToolCall) -> String {
    let mut s: String = call.arguments.chars().take(120).collect();
    if call.arguments.chars().count() > 120 {
        s.push('…');
    }
    format!("{}({})", call.name, crate::redaction::redact(&s))
}

pub async fn run(
    stage: &ToolStage<'_>,
    turn: &Arc<Slots>,
    calls: &[ToolCall],
    sink: &EventSink,
    cancel: &CancellationToken,
) -> ToolResults {
    let mut slots: Vec<Option<Dispatched>> = (0..calls.len()).map(|_| None).collect();
    let mut started = vec![false; calls.len()];
    let limit = Arc::new(Semaphore::new(stage.max_parallel.max(1)));
    let mut waiting = FuturesUnordered::new();
    for (i, call) in calls.iter().enumerate() {
        let ctx = ToolContext {
            actor: stage.actor.clone(),
            session_id: stage.session_id.to_string(),
            channel: stage.channel.to_string(),
            call_id: call.id.clone(),
            request_id: stage.request_id.to_string(),
            cancel: cancel.child_token(),
            session: Arc::clone(stage.state),
            turn: Arc::clone(turn),
            review: stage.review.cloned(),
            agent: stage.handle.clone(),
        };
        let limit = Arc::clone(&limit);
        waiting.push(async move {
            let permit = limit.acquire_owned().await;
            (i, permit, ctx)
        });
    }
    // Stage 1 hands out permits; stage 2 runs the calls. Both stop at a cancel.
    let mut executing = FuturesUnordered::new();
    let mut stopped = false;
    loop {
        if waiting.is_empty() && executing.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            _ = cancel.cancelled() => { stopped = true; break; }
            Some((i, permit, ctx)) = waiting.next(), if !waiting.is_empty() => {
                let call: &ToolCall = &calls[i];
                started[i] = true;
                sink.emit(Event::ToolStarted {
                    tool_id: call.id.clone(),
                    name: call.name.clone(),
                    message: args_summary(call),
                    detail: line::detail(&call.name, &call.arguments, None),
                });
                let same = calls.iter().filter(|c| c.name == call.name).count();
                let (inv, origin) = (stage.invoker, stage.origin);
                executing.push(async move {
                    let r = dispatch(inv, ctx, origin, call, same).await;
                    drop(permit);
                    (i, r)
                });
            }
            Some((i, r)) = executing.next(), if !executing.is_empty() => {
                let call = &calls[i];
                sink.emit(Event::ToolFinished {
                    tool_id: call.id.clone(),
                    name: call.name.clone(),
                    outcome: r.output().outcome,
                    message: summary_line(&r.output().content),
                    detail: line::detail(&call.name, &call.arguments, Some(&r.output().content)),
                });
                if let Some(plan) = r.output().metadata.get(PLAN_METADATA_KEY) {
                    sink.emit(Event::PlanUpdated { plan: plan.clone() });
                }
                slots[i] = Some(r);
            }
        }
    }
    // Dropping the pending futures aborts their tasks.
    drop(executing);
    drop(waiting);
    // A stop that came as the last call ended (that call answered as interrupted) is a stop.
    let stopped = stopped || cancel.is_cancelled();
    // The gates observe the calls in the order the model emitted them (parallel results
    // included), so what they count does not depend on which call finished first.
    let results: Vec<Invoked> = calls
        .iter()
        .enumerate()
        .map(|(i, call)| match slots[i].take() {
            Some(ran) => ran.conclude(stage.invoker, call),
            None => {
                let out = interrupted(started[i]);
                sink.emit(Event::ToolFinished {
                    tool_id: call.id.clone(),
                    name: call.name.clone(),
                    outcome: Outcome::Unknown,
                    message: summary_line(&out.content),
                    detail: line::detail(&call.name, &call.arguments, Some(&out.content)),
                });
                Invoked::uncapped(out)
            }
        })
        .collect();
    let halt = results.iter().find_map(|r| r.halt.clone());
    ToolResults {
        results,
        stopped,
        halt,
    }
}
