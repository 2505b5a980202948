//! The model ⇄ tools loop, shared by user turns and the background review: each step is one model
//! call and, when it asks for tools, the tool stage; it runs until a final answer, a stop, a
//! failure, the model-call limit or the input budget. What differs between its users is passed in:
//! the policy origin (in [`ToolStage`]), the limits, and the [`StepHooks`] (evidence capture and
//! counters for turns, nothing for the review).

use super::EventSink;
use super::model_call::{self, ModelCallEnd};
use super::request::{Tail, assemble};
use super::tool_calls::{self, ToolStage};
use crate::tools::SessionState;
use crate::transcript::Transcript;
use async_trait::async_trait;
use mpa_model::ModelClient;
use mpa_protocol::{Message, ToolCall, ToolSpec, TurnStatus, Usage};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// What a loop's owner does between steps.
#[async_trait]
pub trait StepHooks: Send {
    /// A model response asked for these tools (before they run).
    fn on_tool_calls(&mut self, _calls: &[ToolCall]) {}
    /// A step's messages were appended to the transcript (evidence capture, snapshots).
    async fn after_step(&mut self, _transcript: &mut Transcript) {}
}

/// Hooks that do nothing.
pub struct NoHooks;

impl StepHooks for NoHooks {}

pub struct Limits {
    pub max_model_calls: u32,
    /// Stop before a model call once this many input tokens were used (provider usage, or the
    /// estimate when the provider reports none).
    pub input_token_budget: Option<u64>,
}

pub struct LoopSetup<'a> {
    pub model: &'a ModelClient,
    pub tools: ToolStage<'a>,
    pub system: &'a Message,
    pub specs: &'a [ToolSpec],
    pub limits: Limits,
    /// Said to the model when the actor is not the session's owner (an admin continuing a chat).
    pub acting_note: Option<String>,
}

pub struct LoopEnd {
    pub status: TurnStatus,
    pub final_text: String,
    /// Code and message when the loop failed or hit a limit.
    pub error: Option<(String, String)>,
    pub model_calls: u32,
    pub usage: Usage,
}

fn plan_of(state: &Arc<Mutex<SessionState>>) -> Option<crate::plan::Plan> {
    state.lock().ok().and_then(|s| s.plan.clone())
}

pub async fn run(
    setup: &LoopSetup<'_>,
    transcript: &mut Transcript,
    hooks: &mut dyn StepHooks,
    sink: &EventSink<'_>,
    cancel: &CancellationToken,
) -> LoopEnd {
    let mut end = LoopEnd {
        status: TurnStatus::IterationLimit,
        final_text: String::new(),
        error: None,
        model_calls: 0,
        usage: Usage::default(),
    };
    loop {
        if cancel.is_cancelled() {
            end.status = TurnStatus::Stopped;
            break;
        }
        if end.model_calls >= setup.limits.max_model_calls {
            end.status = TurnStatus::IterationLimit;
            end.error = Some((
                "iteration_limit".into(),
                format!(
                    "the turn reached LLM_MAX_ITERATIONS ({}) model calls without a final answer; the work may be incomplete",
                    setup.limits.max_model_calls
                ),
            ));
            break;
        }
        if let Some(budget) = setup.limits.input_token_budget
            && end.usage.input_tokens >= budget
        {
            end.status = TurnStatus::IterationLimit;
            end.error = Some((
                "input_budget".into(),
                format!("the input-token budget ({budget}) is used up"),
            ));
            break;
        }
        // Slot: steering (queued user messages join the transcript here, never between a tool
        // call and its result), then compaction when the request is over budget.
        let plan = plan_of(setup.tools.state);
        let tail = Tail::new(
            transcript.messages(),
            plan.as_ref(),
            setup.acting_note.as_deref(),
        );
        // Slot: vision projection of tool images (outbound copy only).
        let req = assemble(setup.system, transcript.messages(), &tail, setup.specs);
        let estimate = mpa_model::estimate_tokens(req.messages.iter().copied(), req.tools);
        end.model_calls += 1;
        let answer = model_call::call(setup.model, &req, cancel, sink).await;
        drop(req);
        let completion = match answer {
            ModelCallEnd::Answer(c) => c,
            ModelCallEnd::Stopped { partial } => {
                keep_partial(transcript, partial);
                hooks.after_step(transcript).await;
                end.status = TurnStatus::Stopped;
                break;
            }
            ModelCallEnd::Failed {
                partial,
                code,
                message,
            } => {
                keep_partial(transcript, partial);
                hooks.after_step(transcript).await;
                end.usage.input_tokens += estimate;
                end.status = TurnStatus::Failed;
                end.error = Some((code, message));
                break;
            }
        };
        match completion.usage {
            Some(u) if u.input_tokens > 0 => end.usage.add(&u),
            Some(u) => {
                end.usage.add(&u);
                end.usage.input_tokens += estimate;
            }
            None => end.usage.input_tokens += estimate,
        }
        let calls = completion.tool_calls;
        transcript.push(Message::assistant(
            completion.content.clone(),
            calls.clone(),
        ));
        hooks.after_step(transcript).await;
        if calls.is_empty() {
            // Slot: the continuation nudge (an answer that stops short of the task).
            end.final_text = completion.content;
            end.status = TurnStatus::Completed;
            break;
        }
        hooks.on_tool_calls(&calls);
        // Slots inside the tool stage's call path: guardrail pre-check, ledger claim for writes.
        let results = tool_calls::run(&setup.tools, &calls, sink, cancel).await;
        for (m, full) in results.results {
            transcript.push_with_full(m, full);
        }
        hooks.after_step(transcript).await;
        if results.stopped {
            end.status = TurnStatus::Stopped;
            break;
        }
    }
    end
}

/// Text streamed before a stop or a broken stream is kept, marked as interrupted.
fn keep_partial(transcript: &mut Transcript, partial: String) {
    if partial.is_empty() {
        return;
    }
    let mut m = Message::assistant(partial, vec![]);
    m.metadata
        .insert("interrupted".into(), serde_json::Value::Bool(true));
    transcript.push(m);
}
