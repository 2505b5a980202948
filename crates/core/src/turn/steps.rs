//! The model ⇄ tools loop, shared by user turns and the background review: each step is one model
//! call and, when it asks for tools, the tool stage; it runs until a final answer, a stop, a
//! failure, the model-call limit or the input budget. What differs between its users is passed in:
//! the policy origin (in [`ToolStage`]), the limits, and the [`StepHooks`] (evidence capture and
//! counters for turns, nothing for the review).

use super::EventSink;
use super::compact;
use super::model_call::{self, ModelCallEnd};
use super::request::{Tail, assemble};
use super::tool_calls::{self, ToolStage};
use crate::moviepilot::secret_read;
use crate::tools::SessionState;
use crate::transcript::Transcript;
use async_trait::async_trait;
use mpa_model::ArgumentsStatus;
use mpa_model::BudgetLimits;
use mpa_model::ModelClient;
use mpa_protocol::{Event, Message, RequestBudget, ToolCall, ToolSpec, TurnStatus, Usage};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// What a loop's owner does between steps.
#[async_trait]
pub trait StepHooks: Send {
    /// A model response asked for these tools (before they run).
    fn on_tool_calls(&mut self, _calls: &[ToolCall]) {}
    /// A step's messages were appended to the transcript (evidence capture, snapshots).
    async fn after_step(&mut self, _transcript: &mut Transcript) {}
    /// A model call was answered: its usage and the budget of its request.
    fn on_model_answer(&mut self, _usage: &Usage, _budget: &RequestBudget) {}
    /// A compaction was committed; these messages left the live context.
    async fn on_compacted(&mut self, _transcript: &Transcript, _removed: &[Message]) {}
    /// Messages before this index are in the evidence store and may be compacted away.
    fn evidence_watermark(&self, transcript: &Transcript) -> usize {
        transcript.len()
    }
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
    /// The tools the request starts with (with discovery: the always-on and selected ones).
    pub specs: &'a [ToolSpec],
    /// With tool discovery: every tool the actor may see, where discovered schemas come from.
    pub catalogue: Option<&'a [ToolSpec]>,
    pub limits: Limits,
    /// The window and output limits every request is budgeted against.
    pub budget: BudgetLimits,
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
    let mut empty_answers = 0u32;
    // The same-turn guard: once compacted, only a request over the window compacts again.
    let mut compacted = false;
    // A provider's context-length error compacts and retries once (the estimate can be wrong
    // about a server's real window); a second one ends the turn with what the user can do.
    let mut force_compaction = false;
    let mut overflow_retried = false;
    let mut overflow: Option<(String, String)> = None;
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
        let counter = setup.budget.counter;
        if !counter.is_ready() {
            // A vocabulary loads (once per process, ~0.1–0.6 s) off the runtime's threads.
            let _ = tokio::task::spawn_blocking(move || counter.warm_up()).await;
        }
        // Slot: steering (queued user messages join the transcript here, never between a tool
        // call and its result), then compaction when the request is over budget.
        let plan = plan_of(setup.tools.state);
        let discovered = discovery_for(setup, transcript, plan.as_ref());
        let (specs, notice, statuses) = match &discovered {
            Some((specs, notice, statuses)) => (
                specs.as_slice(),
                Some(notice.as_str()),
                Some(statuses.clone()),
            ),
            None => (setup.specs, None, None),
        };
        let mut tail = Tail::new(
            transcript.messages(),
            plan.as_ref(),
            setup.acting_note.as_deref(),
            notice,
        );
        if empty_answers > 0 {
            tail.continuation(EMPTY_ANSWER_NUDGE);
        }
        // Slot: vision projection of tool images (outbound copy only).
        let breakdown = count_request(
            counter,
            setup.system,
            &[],
            transcript.messages(),
            &tail,
            specs,
            transcript.tokens(),
        );
        let mut budget = mpa_model::request_budget(&breakdown, &setup.budget);
        budget.tool_discovery = statuses;
        // Compaction at the model-call boundary, on the real request. A proposal only: the
        // transcript changes once the main call with the rebuilt request has succeeded.
        let mut pending = None;
        let forced = std::mem::take(&mut force_compaction);
        if forced || compact::due(&budget, compacted) {
            let input = compact::Input {
                model: setup.model,
                messages: transcript.messages(),
                tokens: transcript.tokens(),
                request_raw_tokens: breakdown.total(),
                limits: setup.budget,
                max_cut: hooks.evidence_watermark(transcript),
                cancel,
            };
            match compact::compact(&input).await {
                Ok(c) => {
                    let report = compact::report(&c, breakdown.total(), &setup.budget);
                    pending = Some(c);
                    budget.compaction = Some(report);
                }
                Err(compact::CompactError::Cancelled) => {
                    end.status = TurnStatus::Stopped;
                    break;
                }
                Err(e) => {
                    tracing::warn!(code = e.code(), "context compaction did not succeed");
                    if forced && let Some((code, message)) = overflow.take() {
                        // Nothing could be compacted: resending the refused request would be
                        // refused again.
                        end.status = TurnStatus::Failed;
                        end.error = Some((code, format!("{message}. {CONTEXT_EXCEEDED_HELP}")));
                        break;
                    }
                    budget.compaction = Some(serde_json::json!({
                        "status": "failed", "code": e.code(), "message": e.message(),
                    }));
                    if budget.estimated_over_input_limit {
                        // Never send a request the window cannot hold; the history is unchanged.
                        sink.emit(Event::Budget {
                            budget: Box::new(budget),
                        });
                        end.status = TurnStatus::Failed;
                        end.error = Some((e.code().into(), e.message().into()));
                        break;
                    }
                }
            }
        }
        let (prefix, kept): (&[Message], &[Message]) = match &pending {
            Some(c) => (&c.prefix, &transcript.messages()[c.cut..]),
            None => (&[], transcript.messages()),
        };
        let req = assemble(setup.system, prefix, kept, &tail, specs);
        let estimate = if pending.is_some() {
            let rebuilt = count_request(
                counter,
                setup.system,
                prefix,
                kept,
                &tail,
                specs,
                transcript.tokens(),
            );
            let (report, statuses) = (budget.compaction.take(), budget.tool_discovery.take());
            budget = mpa_model::request_budget(&rebuilt, &setup.budget);
            budget.compaction = report;
            budget.tool_discovery = statuses;
            rebuilt.total()
        } else {
            breakdown.total()
        };
        sink.emit(Event::Budget {
            budget: Box::new(budget.clone()),
        });
        end.model_calls += 1;
        let answer = model_call::call(setup.model, &req, cancel, sink).await;
        drop(req);
        if let (ModelCallEnd::Answer(_), Some(c)) = (&answer, pending.take()) {
            let summary = c.prefix.iter().find(|m| compact::is_summary(m));
            let summary = summary.map(compact::summary_text).unwrap_or_default();
            let removed = transcript.compact(c.cut, c.prefix);
            hooks.on_compacted(transcript, &removed).await;
            compacted = true;
            sink.emit(Event::Compacted { summary });
        }
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
            } if code == "model_context_exceeded"
                && partial.is_empty()
                && !overflow_retried
                && !compacted =>
            {
                tracing::info!(%message, "context exceeded: compacting and retrying once");
                overflow_retried = true;
                force_compaction = true;
                overflow = Some((code, message));
                continue;
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
                let message = if code == "model_context_exceeded" {
                    format!("{message}. {CONTEXT_EXCEEDED_HELP}")
                } else {
                    message
                };
                end.error = Some((code, message));
                break;
            }
        };
        let usage = usage_of(&completion, estimate, counter, sink);
        hooks.on_model_answer(&usage, &budget);
        end.usage.add(&usage);
        if completion.is_empty_answer() {
            // An empty answer is never saved (and so never resent); the model gets one host
            // continuation, then the turn fails saying so.
            if empty_answers == 0 {
                empty_answers += 1;
                continue;
            }
            end.status = TurnStatus::Failed;
            end.error = Some(("model_empty_answer".into(), EMPTY_ANSWER_FAILED.into()));
            break;
        }
        empty_answers = 0;
        let truncated = completion.finish_reason == Some(mpa_model::FinishReason::Length);
        let statuses: Vec<ArgumentsStatus> =
            completion.tool_call_statuses().map(|(_, s)| s).collect();
        let calls = completion.tool_calls;
        let mut answer = Message::assistant(completion.content.clone(), calls.clone());
        if truncated {
            answer
                .metadata
                .insert("truncated".into(), serde_json::Value::Bool(true));
        }
        transcript.push(answer);
        hooks.after_step(transcript).await;
        if calls.is_empty() {
            // Slot: the continuation nudge (an answer that stops short of the task).
            end.final_text = completion.content;
            if truncated {
                end.status = TurnStatus::Partial;
                end.error = Some(("output_truncated".into(), OUTPUT_TRUNCATED.into()));
            } else {
                end.status = TurnStatus::Completed;
            }
            break;
        }
        hooks.on_tool_calls(&calls);
        // (Settings are administrators' operations: anyone else is refused by the policy.)
        if setup.tools.origin == crate::tools::policy::Origin::Turn
            && setup.tools.actor.is_admin
            && let Some(secret) = calls.iter().find(|c| secret_read::requests_secrets(c))
        {
            // Spec §11.4: none of this response's calls runs; the host asks the user.
            let interactive = secret_read::interactive(setup.tools.channel);
            for call in &calls {
                let out = secret_read::paused(interactive);
                let (m, full) = answered_without_running(call, out, sink);
                transcript.push_with_full(m, full);
            }
            hooks.after_step(transcript).await;
            if interactive {
                secret_read::ask(
                    setup.tools.state,
                    secret,
                    setup.tools.actor,
                    setup.tools.channel,
                );
                sink.emit(Event::Delta {
                    content: secret_read::QUESTION.to_string(),
                });
                transcript.push(Message::assistant(secret_read::QUESTION, vec![]));
                hooks.after_step(transcript).await;
                end.final_text = secret_read::QUESTION.to_string();
                end.status = TurnStatus::Completed;
                break;
            }
            continue;
        }
        // Calls whose arguments were cut off are answered, never dispatched: `finish_reason:
        // "tool_calls"` alone proves nothing (llama.cpp reports it for cut-off calls too).
        let runnable: Vec<ToolCall> = calls
            .iter()
            .zip(&statuses)
            .filter(|(_, s)| **s != ArgumentsStatus::CutOff)
            .map(|(c, _)| c.clone())
            .collect();
        // Slots inside the tool stage's call path: guardrail pre-check, ledger claim for writes.
        let done = tool_calls::run(&setup.tools, &runnable, sink, cancel).await;
        let stopped = done.stopped;
        let mut results = done.results.into_iter();
        for (call, status) in calls.iter().zip(&statuses) {
            if *status == ArgumentsStatus::CutOff {
                let (m, full) = cut_off_result(call, sink);
                transcript.push_with_full(m, full);
            } else if let Some((m, full)) = results.next() {
                transcript.push_with_full(m, full);
            }
        }
        hooks.after_step(transcript).await;
        if stopped {
            end.status = TurnStatus::Stopped;
            break;
        }
    }
    end
}

/// With discoveries pending: this call's tools (baseline + the discoveries that fit), the
/// availability notice, and each candidate's status (spec runtime.md §3.3).
fn discovery_for(
    setup: &LoopSetup<'_>,
    transcript: &Transcript,
    plan: Option<&crate::plan::Plan>,
) -> Option<(
    Vec<ToolSpec>,
    String,
    std::collections::BTreeMap<String, String>,
)> {
    use crate::tools::search_tools::{admit, availability_notice};
    let catalogue = setup.catalogue?;
    let discovery = setup
        .tools
        .state
        .lock()
        .ok()
        .map(|s| s.discovery.clone())
        .filter(|d| d.enabled && !d.discovered.is_empty())?;
    // The baseline request, with the notice in its longest form.
    let longest = discovery
        .discovered
        .iter()
        .map(|n| (n.clone(), "unavailable_in_current_catalog".to_string()))
        .collect();
    let tail = Tail::new(
        transcript.messages(),
        plan,
        setup.acting_note.as_deref(),
        Some(&availability_notice(&longest)),
    );
    let counter = setup.budget.counter;
    let estimated = count_request(
        counter,
        setup.system,
        &[],
        transcript.messages(),
        &tail,
        setup.specs,
        transcript.tokens(),
    )
    .input_tokens();
    let by_name = catalogue.iter().map(|s| (s.name.as_str(), s)).collect();
    let (statuses, enabled) = admit(
        &discovery,
        &by_name,
        setup.budget.context_window_tokens,
        estimated,
        counter,
    );
    let mut specs = setup.specs.to_vec();
    specs.extend(
        catalogue
            .iter()
            .filter(|s| enabled.contains(&s.name))
            .cloned(),
    );
    Some((specs, availability_notice(&statuses), statuses))
}

/// The tokens of the request [`assemble`] builds from these parts. With a real tokenizer the
/// final message's outbound copy (the plan block appended) is counted as the transcript's own
/// message — cached, so each message is tokenized once in its life, not once more per call with
/// the block — plus the block: the BPE could merge a token across the join, so this may be a
/// token or two off. The estimate counts the copy itself (it costs what a lookup does).
pub fn count_request(
    counter: mpa_model::TokenCounter,
    system: &Message,
    prefix: &[Message],
    messages: &[Message],
    tail: &Tail,
    specs: &[ToolSpec],
    tokens: &mpa_model::TokenCache,
) -> mpa_model::TokenEstimate {
    if !counter.is_tokenizer() {
        let req = assemble(system, prefix, messages, tail, specs);
        return counter.breakdown(req.messages.iter().copied(), req.tools, tokens);
    }
    let plain = tail.without_appendix();
    let req = assemble(system, prefix, messages, &plain, specs);
    let mut est = counter.breakdown(req.messages.iter().copied(), req.tools, tokens);
    est.message_tokens += tail
        .appendix()
        .map_or(0, |a| tokens.text_tokens(counter, a));
    est
}

const EMPTY_ANSWER_NUDGE: &str = "[Host note: your last answer was empty. Continue the task: call a \
tool, or give the final answer to the user.]";

const EMPTY_ANSWER_FAILED: &str = "the model returned an empty answer twice (no text and no tool call); \
nothing was done after that — try again, or use a more capable model";

const OUTPUT_TRUNCATED: &str = "the answer was cut off by the model's output limit \
(LLM_MAX_OUTPUT_TOKENS); ask to continue, or raise the limit";

const CONTEXT_EXCEEDED_HELP: &str = "The conversation no longer fits the model's context window: start \
a new session, or raise the model server's context size (and LLM_MAX_CONTEXT_TOKENS)";

/// What the provider reported, or — marked as such — the host's estimate when it reported
/// nothing (llama.cpp sends no usage chunk), so usage is never silently zero.
fn usage_of(
    c: &mpa_model::Completion,
    estimate: u64,
    counter: mpa_model::TokenCounter,
    sink: &EventSink<'_>,
) -> Usage {
    match c.usage {
        Some(u) if u.input_tokens > 0 => u,
        Some(mut u) => {
            u.input_tokens = estimate;
            u.total_tokens = u.input_tokens + u.output_tokens;
            u.estimated = true;
            u
        }
        None => {
            let output = counter.text_tokens(&c.content)
                + c.tool_calls
                    .iter()
                    .map(|t| counter.text_tokens(&t.arguments))
                    .sum::<u64>();
            let u = Usage {
                input_tokens: estimate,
                output_tokens: output,
                total_tokens: estimate + output,
                estimated: true,
                ..Usage::default()
            };
            sink.emit(Event::Usage { usage: u });
            u
        }
    }
}

/// The answer for a call whose arguments the output limit cut off.
fn cut_off_result(call: &ToolCall, sink: &EventSink<'_>) -> (Message, Option<String>) {
    let out = crate::tools::ToolOutput::failure(
        "arguments_cut_off",
        "arguments were cut off by the output limit; not executed. Send the call again with shorter \
         arguments, or split the work.",
    );
    answered_without_running(call, out, sink)
}

/// A call answered by the host with `out`, never dispatched (its events still shown).
fn answered_without_running(
    call: &ToolCall,
    out: crate::tools::ToolOutput,
    sink: &EventSink<'_>,
) -> (Message, Option<String>) {
    sink.emit(Event::ToolStarted {
        tool_id: call.id.clone(),
        name: call.name.clone(),
        message: format!("{}(…)", call.name),
    });
    sink.emit(Event::ToolFinished {
        tool_id: call.id.clone(),
        name: call.name.clone(),
        outcome: out.outcome,
        message: crate::tools::invoke::summary_line(&out.content),
    });
    (
        Message::tool(call.id.clone(), call.name.clone(), out.content, out.outcome),
        None,
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use mpa_model::{TokenCache, TokenCounter};
    use mpa_protocol::Outcome;

    #[test]
    fn the_outbound_copy_of_the_last_message_is_not_tokenized_again() {
        let system = Message::system("You are the MoviePilot agent.");
        let rows: String = (0..40)
            .map(|i| format!(r#"{{"id":{i},"name":"订阅 {i} 流浪地球","state":"R"}}"#))
            .collect();
        let messages = vec![
            Message::user("第3页：请列出订阅，每页 20 条"),
            Message::tool("c1", "t", format!("[{rows}]"), Outcome::Succeeded),
        ];
        let tail = Tail::new(&messages, None, Some("[Host note: acting for lin]"), None);
        for counter in [TokenCounter::O200kBase, TokenCounter::Cl100kBase] {
            let cache = TokenCache::new();
            let split = count_request(counter, &system, &[], &messages, &tail, &[], &cache);
            let req = assemble(&system, &[], &messages, &tail, &[]);
            let whole = counter.breakdown(req.messages.iter().copied(), &[], &TokenCache::new());
            // Within a token or two of counting the copy itself.
            assert!(
                split.message_tokens.abs_diff(whole.message_tokens) <= 2,
                "{split:?} {whole:?}"
            );
            assert_eq!(split.system_tokens, whole.system_tokens);
            // Cached as the transcript has them: another block costs only the block.
            let held = cache.len();
            let next = Tail::new(&messages, None, Some("[Host note: acting for mei]"), None);
            count_request(counter, &system, &[], &messages, &next, &[], &cache);
            assert_eq!(cache.len(), held + 1);
        }
        // The estimate counts the copy itself, as before.
        let cache = TokenCache::new();
        let counter = TokenCounter::Estimate;
        let req = assemble(&system, &[], &messages, &tail, &[]);
        assert_eq!(
            count_request(counter, &system, &[], &messages, &tail, &[], &cache),
            mpa_model::estimate_breakdown(req.messages.iter().copied(), &[])
        );
    }
}
