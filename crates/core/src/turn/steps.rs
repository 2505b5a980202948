//! The model ⇄ tools loop, shared by user turns, the background review and nested agents: each
//! step is one model call and, when it asks for tools, the tool stage; it runs until a final
//! answer, a stop, a failure, a gate's halt, the model-call limit or the input budget. What
//! differs between its users is passed in: the policy origin and agent handle (in
//! [`ToolStage`]), the tools offered ([`Offer`]), the limits, and the [`StepHooks`] (evidence
//! capture and counters for turns, nothing for the review).
//!
//! One step is these stages, in this order ([`run`] is the one place where it is written):
//!
//! 1. [`prepare_request`] — limits, steering intake ([`StepHooks::intake`]), the tools offered
//!    (the registry as of now), the outbound contributors ([`super::outbound`]: acting note, plan block, tool
//!    discovery, continuation notes), the budget, and compaction when the request is over it;
//! 2. [`call_model`] — one streamed request; a proposed compaction commits once it succeeded;
//! 3. [`settle_answer`] — what the answer means ([`super::settle`]: empty answer, cut-off
//!    output, final answer, or tool calls);
//! 4. [`gate_calls`] — the batch gates of the call-gate chain ([`crate::tools::gate`]);
//! 5. [`run_tools`] — the admitted calls through the one call path, in parallel up to a bound;
//! 6. [`after_step`] — the results join the transcript, the hooks run (evidence capture, the
//!    recovery snapshot), and a stop or a gate's halt ends the loop.
//!
//! The loop's state lives in one [`LoopState`], never in local flags.

use super::compact;
use super::error::TurnError;
use super::model_call::{self, ModelCallEnd};
use super::outbound::{Outbound, StepView};
use super::request::{Tail, assemble};
use super::settle::{self, Settled};
use super::tool_calls::{self, ToolStage};
use crate::handle::EventSink;
use crate::services::Services;
use crate::sync::Slots;
use crate::tools::gate::{Admission, Batch, BatchCall, Halt};
use crate::tools::invoke::parse_args;
use crate::transcript::Transcript;
use async_trait::async_trait;
use mpa_model::{ArgumentsStatus, BudgetLimits, ModelError};
use mpa_protocol::{Event, Message, RequestBudget, ToolCall, ToolSpec, TurnStatus, Usage};
use std::ops::ControlFlow;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What a loop's owner does between steps.
#[async_trait]
pub trait StepHooks: Send {
    /// A model response asked for these tools (before they run).
    fn on_tool_calls(&mut self, _calls: &[ToolCall]) {}
    /// A call of the response has its result (run, or answered by a gate), in call order.
    fn on_tool_result(&mut self, _call: &ToolCall, _output: &crate::tools::ToolOutput) {}
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
    /// Why the loop must not go on (its progress could not be saved); checked before each model
    /// call.
    fn failure(&self) -> Option<TurnError> {
        None
    }

    /// The first step of every request: a turn takes in its steering messages
    /// ([`super::steering`]); loops without an inbox take nothing.
    async fn intake(&mut self, _transcript: &mut Transcript) {}
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

/// The tools a loop offers the model.
#[derive(Default)]
pub struct Offer {
    /// The tools the request starts with (with discovery: the always-on and selected ones).
    pub specs: Vec<ToolSpec>,
    /// With tool discovery: every tool the actor may see, where discovered schemas come from.
    pub catalogue: Option<Vec<ToolSpec>>,
    /// Follows the registry (a user's turn): the view generation the lists were taken at; when
    /// a tool set joins or leaves, the next model call lists the tools again.
    pub follow: Option<(u64, u64)>,
}

impl Offer {
    /// Exactly these tools for the loop's life (the review offers its turn's list, byte for byte).
    pub fn fixed(specs: Vec<ToolSpec>) -> Self {
        Self {
            specs,
            catalogue: None,
            follow: None,
        }
    }
}

pub struct LoopSetup<'a> {
    pub services: &'a Arc<Services>,
    pub tools: ToolStage<'a>,
    pub system: &'a Message,
    pub offer: Offer,
    pub limits: Limits,
    /// The window and output limits every request is budgeted against.
    pub budget: BudgetLimits,
    /// Said to the model when the actor is not the session's owner (an admin continuing a chat).
    pub acting_note: Option<String>,
}

pub struct LoopEnd {
    pub status: TurnStatus,
    pub final_text: String,
    /// Why the loop failed or hit a limit.
    pub error: Option<TurnError>,
    /// A gate ended the loop on purpose.
    pub halt: Option<Halt>,
    pub model_calls: u32,
    pub usage: Usage,
}

impl LoopEnd {
    pub fn new(status: TurnStatus) -> Self {
        Self {
            status,
            final_text: String::new(),
            error: None,
            halt: None,
            model_calls: 0,
            usage: Usage::default(),
        }
    }
}

/// Everything the loop knows between stages.
pub struct LoopState {
    /// How the loop ends so far (its counters; the status once a stage ends it).
    pub end: LoopEnd,
    /// Empty answers in a row (the first gets one continuation, the second ends the turn).
    pub empty_answers: u32,
    /// The same-turn guard: once compacted, only a request over the window compacts again.
    pub compacted: bool,
    /// A provider's context-length error compacts and retries once (the estimate can be wrong
    /// about a server's real window); a second one ends the turn with what the user can do.
    pub force_compaction: bool,
    pub overflow_retried: bool,
    pub overflow: Option<ModelError>,
    pub offer: Offer,
    /// This loop run's slots (gates keep per-turn counts here).
    pub turn: Arc<Slots>,
}

impl LoopState {
    fn new(offer: Offer) -> Self {
        Self {
            end: LoopEnd::new(TurnStatus::IterationLimit),
            empty_answers: 0,
            compacted: false,
            force_compaction: false,
            overflow_retried: false,
            overflow: None,
            offer,
            turn: Arc::new(Slots::new()),
        }
    }

    /// Ends the loop with `status` (and why, when it failed or hit a limit).
    fn finish(&mut self, status: TurnStatus, error: Option<TurnError>) {
        self.end.status = status;
        self.end.error = error;
    }
}

pub async fn run(
    mut setup: LoopSetup<'_>,
    transcript: &mut Transcript,
    hooks: &mut dyn StepHooks,
    sink: &EventSink,
    cancel: &CancellationToken,
) -> LoopEnd {
    let mut st = LoopState::new(std::mem::take(&mut setup.offer));
    let setup = &setup;
    loop {
        let ControlFlow::Continue(prepared) =
            prepare_request(setup, &mut st, transcript, hooks, sink, cancel).await
        else {
            break;
        };
        let called = call_model(setup, &mut st, prepared, transcript, hooks, sink, cancel).await;
        let response = match settle_answer(setup, &mut st, called, transcript, hooks, sink).await {
            Settle::Again => continue,
            Settle::End => break,
            Settle::Calls(response) => response,
        };
        let admission = gate_calls(setup, &st, &response);
        let ran = run_tools(setup, &st, &response, &admission, sink, cancel).await;
        if after_step(&mut st, response, admission, ran, transcript, hooks, sink)
            .await
            .is_break()
        {
            break;
        }
    }
    // A final answer or a guardrail's stop says whether the turn's writes are still open.
    st.end.status = crate::tools::guardrails::honest_status(st.end.status, &st.turn);
    st.end
}

/// What [`prepare_request`] hands to [`call_model`].
pub struct Prepared {
    tail: Tail,
    /// The tools of this call when a contributor changed them (else the offer's).
    specs: Option<Vec<ToolSpec>>,
    /// A proposed compaction (committed only after the call succeeded).
    pending: Option<compact::Compaction>,
    budget: RequestBudget,
    estimate: u64,
    /// The request shows the model tool images (a rejection of image input retries it without).
    observed: bool,
}

/// Stage 1: the request as it will be sent, or the end of the loop (a stop, a limit, a
/// request that cannot fit).
pub async fn prepare_request(
    setup: &LoopSetup<'_>,
    st: &mut LoopState,
    transcript: &mut Transcript,
    hooks: &mut dyn StepHooks,
    sink: &EventSink,
    cancel: &CancellationToken,
) -> ControlFlow<(), Prepared> {
    if cancel.is_cancelled() {
        st.finish(TurnStatus::Stopped, None);
        return ControlFlow::Break(());
    }
    // A step whose snapshot could not be written is not built upon: the turn ends failed.
    if let Some(error) = hooks.failure() {
        st.finish(TurnStatus::Failed, Some(error));
        return ControlFlow::Break(());
    }
    if st.end.model_calls >= setup.limits.max_model_calls {
        let error = TurnError::IterationLimit {
            max_model_calls: setup.limits.max_model_calls,
        };
        st.finish(TurnStatus::IterationLimit, Some(error));
        return ControlFlow::Break(());
    }
    if let Some(budget) = setup.limits.input_token_budget
        && st.end.usage.input_tokens >= budget
    {
        st.finish(
            TurnStatus::IterationLimit,
            Some(TurnError::InputBudget { budget }),
        );
        return ControlFlow::Break(());
    }
    let counter = setup.budget.counter;
    if !counter.is_ready() {
        // A vocabulary loads (once per process, ~0.1–0.6 s) off the runtime's threads.
        let _ = tokio::task::spawn_blocking(move || counter.warm_up()).await;
    }
    // Steering intake: queued user messages join the transcript here, never between a tool
    // call and its result.
    hooks.intake(transcript).await;
    let transcript = &*transcript;
    refresh_offer(setup, st);
    let out = outbound(setup, st, transcript);
    let observed = out.observed;
    let mut tail = Tail::patched(transcript.messages(), Arc::new(out.patches), &out.blocks);
    if let Some(note) = &out.continuation {
        tail.continuation(note);
    }
    let specs = out.specs;
    let breakdown = count_request(
        counter,
        setup.system,
        &[],
        (0, transcript.messages()),
        &tail,
        specs.as_deref().unwrap_or(&st.offer.specs),
        transcript.tokens(),
    );
    let mut budget = mpa_model::request_budget(&breakdown, &setup.budget);
    budget.tool_discovery = out.tool_discovery;
    // Compaction at the model-call boundary, on the real request. A proposal only: the
    // transcript changes once the main call with the rebuilt request has succeeded.
    let mut pending = None;
    let forced = std::mem::take(&mut st.force_compaction);
    if forced || compact::due(&budget, st.compacted) {
        let input = compact::Input {
            model: &setup.services.model,
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
                st.finish(TurnStatus::Stopped, None);
                return ControlFlow::Break(());
            }
            Err(e) => {
                tracing::warn!(code = e.code(), "context compaction did not succeed");
                if forced && let Some(overflow) = st.overflow.take() {
                    // Nothing could be compacted: resending the refused request would be
                    // refused again.
                    st.finish(TurnStatus::Failed, Some(TurnError::Model(overflow)));
                    return ControlFlow::Break(());
                }
                budget.compaction = Some(serde_json::json!({
                    "status": "failed", "code": e.code(), "message": e.message(),
                }));
                if budget.estimated_over_input_limit {
                    // Never send a request the window cannot hold; the history is unchanged.
                    sink.emit(Event::Budget {
                        budget: Box::new(budget),
                    });
                    st.finish(TurnStatus::Failed, Some(TurnError::Compaction(e)));
                    return ControlFlow::Break(());
                }
            }
        }
    }
    ControlFlow::Continue(Prepared {
        tail,
        specs,
        pending,
        budget,
        estimate: breakdown.total(),
        observed,
    })
}

/// The tools offered follow the registry: a set that joined or left since the last call is
/// listed (or no longer) from this call on.
fn refresh_offer(setup: &LoopSetup<'_>, st: &mut LoopState) {
    let Some(seen) = st.offer.follow else {
        return;
    };
    let view = setup.services.tools.view_for(setup.tools.state);
    if view.generation() == seen {
        return;
    }
    st.offer.follow = Some(view.generation());
    let actor = setup.tools.actor;
    let all = view.specs_for(actor);
    let offer = &mut st.offer;
    match &mut offer.catalogue {
        Some(catalogue) => {
            offer.specs.retain(|s| all.iter().any(|a| a.name == s.name));
            *catalogue = all;
            let entries = crate::tools::search_tools::catalogue_for(&view, actor);
            setup
                .tools
                .state
                .with(|d: &mut crate::tools::search_tools::Discovery| d.catalogue = entries);
        }
        None => offer.specs = crate::tools::search_tools::without_discovery(all),
    }
}

/// Runs the outbound contributors in order.
fn outbound(setup: &LoopSetup<'_>, st: &LoopState, transcript: &Transcript) -> Outbound {
    let view = StepView {
        setup,
        state: st,
        transcript,
        session: setup.tools.state,
    };
    let mut out = Outbound::default();
    for c in setup.services.contributors.iter() {
        c.contribute(&view, &mut out);
    }
    out
}

/// What [`call_model`] hands to [`settle_answer`].
pub struct Called {
    answer: ModelCallEnd,
    /// The host's estimate of the request's input tokens.
    estimate: u64,
    budget: RequestBudget,
    observed: bool,
}

/// Stage 2: one streamed model call; a proposed compaction commits once it succeeded.
pub async fn call_model(
    setup: &LoopSetup<'_>,
    st: &mut LoopState,
    prepared: Prepared,
    transcript: &mut Transcript,
    hooks: &mut dyn StepHooks,
    sink: &EventSink,
    cancel: &CancellationToken,
) -> Called {
    let Prepared {
        tail,
        specs,
        pending,
        mut budget,
        estimate,
        observed,
    } = prepared;
    let specs = specs.as_deref().unwrap_or(&st.offer.specs);
    let (prefix, kept): (&[Message], (usize, &[Message])) = match &pending {
        Some(c) => (&c.prefix, (c.cut, &transcript.messages()[c.cut..])),
        None => (&[], (0, transcript.messages())),
    };
    let req = assemble(setup.system, prefix, kept, &tail, specs);
    let estimate = if pending.is_some() {
        let rebuilt = count_request(
            setup.budget.counter,
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
        estimate
    };
    sink.emit(Event::Budget {
        budget: Box::new(budget.clone()),
    });
    st.end.model_calls += 1;
    let answer = model_call::call(&setup.services.model, &req, cancel, sink).await;
    drop(req);
    if let (ModelCallEnd::Answer(_), Some(c)) = (&answer, pending) {
        let summary = c.prefix.iter().find(|m| compact::is_summary(m));
        let summary = summary.map(compact::summary_text).unwrap_or_default();
        let removed = transcript.compact(c.cut, c.prefix);
        hooks.on_compacted(transcript, &removed).await;
        st.compacted = true;
        sink.emit(Event::Compacted { summary });
    }
    Called {
        answer,
        estimate,
        budget,
        observed,
    }
}

/// A model response that asks for tools.
pub struct Response {
    pub calls: Vec<ToolCall>,
    pub statuses: Vec<ArgumentsStatus>,
}

/// What [`settle_answer`] decided.
pub enum Settle {
    /// Ask the model again.
    Again,
    /// The loop ends (the state says how).
    End,
    /// Run these calls.
    Calls(Response),
}

/// Stage 3: what the answer means — a stop or failure, an answer the settle rules
/// ([`super::settle`]) discard, end with or continue after, or tool calls to run.
pub async fn settle_answer(
    setup: &LoopSetup<'_>,
    st: &mut LoopState,
    called: Called,
    transcript: &mut Transcript,
    hooks: &mut dyn StepHooks,
    sink: &EventSink,
) -> Settle {
    let Called {
        answer,
        estimate,
        budget,
        observed,
    } = called;
    let completion = match answer {
        ModelCallEnd::Answer(c) => c,
        ModelCallEnd::Stopped { partial } => {
            keep_partial(transcript, partial);
            hooks.after_step(transcript).await;
            st.finish(TurnStatus::Stopped, None);
            return Settle::End;
        }
        ModelCallEnd::Failed { partial, error }
            if matches!(error, ModelError::ContextLengthExceeded { .. })
                && partial.is_empty()
                && !st.overflow_retried
                && !st.compacted =>
        {
            tracing::info!(message = %error, "context exceeded: compacting and retrying once");
            st.overflow_retried = true;
            st.force_compaction = true;
            st.overflow = Some(error);
            return Settle::Again;
        }
        ModelCallEnd::Failed { partial, error }
            if observed && partial.is_empty() && error.is_image_input_rejected() =>
        {
            // The provider cannot take the tool images: this same call once more in text mode
            // (no tool runs again), and the rest of the turn stays text-only (spec §9.4).
            crate::vision::reject_for_turn(&st.turn, &setup.services.cfg.model.model, &error);
            return Settle::Again;
        }
        ModelCallEnd::Failed { partial, error } => {
            keep_partial(transcript, partial);
            hooks.after_step(transcript).await;
            st.end.usage.input_tokens += estimate;
            st.finish(TurnStatus::Failed, Some(TurnError::Model(error)));
            return Settle::End;
        }
    };
    let usage = usage_of(&completion, estimate, setup.budget.counter, sink);
    hooks.on_model_answer(&usage, &budget);
    st.end.usage.add(&usage);
    let truncated = completion.finish_reason == Some(mpa_model::FinishReason::Length);
    let answer = settle::Answer {
        completion: &completion,
        truncated,
    };
    let verdict = setup
        .services
        .settle_rules
        .iter()
        .find_map(|r| r.settle(&answer, st));
    match verdict {
        Some(Settled::Discard) => return Settle::Again,
        Some(Settled::Reject(status, error)) => {
            st.finish(status, error);
            return Settle::End;
        }
        Some(Settled::Final(..)) | Some(Settled::Continue) | None => {}
    }
    let statuses: Vec<ArgumentsStatus> = completion.tool_call_statuses().map(|(_, s)| s).collect();
    let calls = completion.tool_calls;
    let mut saved = Message::assistant(completion.content.clone(), calls.clone());
    if truncated {
        saved
            .metadata
            .insert("truncated".into(), serde_json::Value::Bool(true));
    }
    transcript.push(saved);
    hooks.after_step(transcript).await;
    match verdict {
        Some(Settled::Final(status, error)) => {
            st.end.final_text = completion.content;
            st.finish(status, error);
            Settle::End
        }
        Some(Settled::Continue) => Settle::Again,
        _ if calls.is_empty() => {
            st.end.final_text = completion.content;
            st.finish(TurnStatus::Completed, None);
            Settle::End
        }
        _ => {
            hooks.on_tool_calls(&calls);
            Settle::Calls(Response { calls, statuses })
        }
    }
}

/// Stage 4: the batch gates decide which calls of the response run at all.
pub fn gate_calls(setup: &LoopSetup<'_>, st: &LoopState, response: &Response) -> Admission {
    let view = setup.services.tools.view_for(setup.tools.state);
    let calls: Vec<BatchCall<'_>> = response
        .calls
        .iter()
        .zip(&response.statuses)
        .map(|(call, status)| BatchCall {
            call,
            args: parse_args(&call.arguments).ok(),
            cut_off: *status == ArgumentsStatus::CutOff,
            meta: view.get(&call.name).map(|t| t.meta),
        })
        .collect();
    setup.services.gates.admit(&Batch {
        actor: setup.tools.actor,
        origin: setup.tools.origin,
        channel: setup.tools.channel,
        calls: &calls,
        session: setup.tools.state,
        turn: &st.turn,
    })
}

/// Stage 5: the admitted calls through the one call path (each passes the per-call gates).
pub async fn run_tools(
    setup: &LoopSetup<'_>,
    st: &LoopState,
    response: &Response,
    admission: &Admission,
    sink: &EventSink,
    cancel: &CancellationToken,
) -> tool_calls::ToolResults {
    let runnable: Vec<ToolCall> = response
        .calls
        .iter()
        .zip(&admission.answers)
        .filter(|(_, answered)| answered.is_none())
        .map(|(c, _)| c.clone())
        .collect();
    tool_calls::run(&setup.tools, &st.turn, &runnable, sink, cancel).await
}

/// Stage 6: every call's result joins the transcript in call order (calls a gate answered
/// included), the hooks run, and a stop or a gate's halt ends the loop.
pub async fn after_step(
    st: &mut LoopState,
    response: Response,
    mut admission: Admission,
    ran: tool_calls::ToolResults,
    transcript: &mut Transcript,
    hooks: &mut dyn StepHooks,
    sink: &EventSink,
) -> ControlFlow<()> {
    let mut results = ran.results.into_iter();
    for (call, answered) in response.calls.iter().zip(admission.answers.iter_mut()) {
        let invoked = match answered.take() {
            Some(out) => answered_without_running(call, out, sink),
            None => match results.next() {
                Some(invoked) => invoked,
                None => continue,
            },
        };
        hooks.on_tool_result(call, &invoked.output);
        let (m, full) = super::references::join(transcript, call, invoked);
        transcript.push_with_full(m, full);
    }
    hooks.after_step(transcript).await;
    if ran.stopped {
        st.finish(TurnStatus::Stopped, None);
        return ControlFlow::Break(());
    }
    let Some(halt) = admission.halt.or(ran.halt) else {
        return ControlFlow::Continue(());
    };
    if let Some(reply) = &halt.reply {
        sink.emit(Event::Delta {
            content: reply.clone(),
        });
        transcript.push(Message::assistant(reply.clone(), vec![]));
        hooks.after_step(transcript).await;
        st.end.final_text.clone_from(reply);
    }
    st.end.status = halt.status;
    st.end.halt = Some(halt);
    ControlFlow::Break(())
}

pub fn count_request(
    counter: mpa_model::TokenCounter,
    system: &Message,
    prefix: &[Message],
    messages: (usize, &[Message]),
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

/// What the provider reported, or — marked as such — the host's estimate when it reported
/// nothing (llama.cpp sends no usage chunk), so usage is never silently zero.
fn usage_of(
    c: &mpa_model::Completion,
    estimate: u64,
    counter: mpa_model::TokenCounter,
    sink: &EventSink,
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

/// A call answered by the host with `out`, never dispatched (its events still shown).
fn answered_without_running(
    call: &ToolCall,
    out: crate::tools::ToolOutput,
    sink: &EventSink,
) -> crate::tools::invoke::Invoked {
    sink.emit(Event::ToolStarted {
        tool_id: call.id.clone(),
        name: call.name.clone(),
        message: format!("{}(…)", call.name),
        detail: crate::tools::line::detail(&call.name, &call.arguments, None),
    });
    sink.emit(Event::ToolFinished {
        tool_id: call.id.clone(),
        name: call.name.clone(),
        outcome: out.outcome,
        message: crate::tools::invoke::summary_line(&out.content),
        detail: crate::tools::line::detail(&call.name, &call.arguments, Some(&out.content)),
    });
    crate::tools::invoke::Invoked::uncapped(out)
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
        let tail = Tail::new(&messages, &["[Host note: acting for lin]"]);
        for counter in [TokenCounter::O200kBase, TokenCounter::Cl100kBase] {
            let cache = TokenCache::new();
            let split = count_request(counter, &system, &[], (0, &messages), &tail, &[], &cache);
            let req = assemble(&system, &[], (0, &messages), &tail, &[]);
            let whole = counter.breakdown(req.messages.iter().copied(), &[], &TokenCache::new());
            // Within a token or two of counting the copy itself.
            assert!(
                split.message_tokens.abs_diff(whole.message_tokens) <= 2,
                "{split:?} {whole:?}"
            );
            assert_eq!(split.system_tokens, whole.system_tokens);
            // Cached as the transcript has them: another block costs only the block.
            let held = cache.len();
            let next = Tail::new(&messages, &["[Host note: acting for mei]"]);
            count_request(counter, &system, &[], (0, &messages), &next, &[], &cache);
            assert_eq!(cache.len(), held + 1);
        }
        // The estimate counts the copy itself, as before.
        let cache = TokenCache::new();
        let counter = TokenCounter::Estimate;
        let req = assemble(&system, &[], (0, &messages), &tail, &[]);
        assert_eq!(
            count_request(counter, &system, &[], (0, &messages), &tail, &[], &cache),
            mpa_model::estimate_breakdown(req.messages.iter().copied(), &[])
        );
    }
}
