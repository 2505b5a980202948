//! One turn, in order (DESIGN.md §2). This function is the one place where the order is written;
//! each stage is a module that takes what it needs and returns what it produces:
//!
//! 1. [`begin`]: restore the plan, build the user message, the session's frozen system message;
//!    a pending secret-read question and [`host_command`]s are answered here and skip the model;
//! 2. [`steps`]: the model ⇄ tools loop, itself a sequence of named stages
//!    (`prepare_request` → `call_model` → `settle_answer` → `gate_calls` → `run_tools` →
//!    `after_step`), with evidence [`capture`] flushed after every step and [`steering`]
//!    messages taken in at each model-call boundary; messages that arrive after the loop's
//!    last boundary keep the turn going (the inbox's atomic end of the run);
//! 3. [`end`]: interruption notice, plan snapshot, redaction, the chat snapshot; then the
//!    background review when its counters are due.

pub mod begin;
pub mod capture;
pub mod compact;
pub mod end;
pub mod error;
pub mod host_command;
pub mod model_call;
pub mod nudge;
pub mod outbound;
pub mod references;
pub mod request;
pub mod settle;
pub mod steering;
pub mod steps;
pub mod tool_calls;

pub use crate::handle::EventSink;
pub use error::TurnError;

use crate::handle::AgentHandle;
use crate::review::{Due, ReviewStart};
use crate::services::Services;
use crate::session::SessionData;
use crate::session::steering::{Finish, SteeringInbox};
use crate::tools::policy::Origin;
use crate::transcript::Transcript;
use async_trait::async_trait;
use mpa_protocol::{Actor, Event, ToolCall, TurnStatus};
use std::sync::Arc;
use steps::{Limits, LoopSetup, Offer, StepHooks};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tool_calls::ToolStage;

pub struct TurnInput {
    pub actor: Actor,
    pub text: String,
    pub images: Vec<String>,
    /// A stateless client's earlier conversation, for a session the host has not seen.
    pub client_context: Option<mpa_protocol::ClientContext>,
    /// The language the host's own replies are read in; `None`: the language of `text`.
    pub lang: Option<mpa_protocol::Lang>,
}

/// Why a stopped turn stopped (the notice the next turn reads says which).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    User,
    Shutdown,
}

pub struct TurnOutcome {
    pub status: TurnStatus,
    pub review: Option<ReviewStart>,
}

/// A turn's step hooks: evidence capture and the recovery snapshot after every step, the
/// skill-review counter per tool response, steering intake at every model-call boundary.
struct TurnHooks<'a> {
    capture: Option<capture::CaptureTarget<'a>>,
    checkpoint: end::Checkpoint,
    review: &'a mut crate::review::ReviewCounters,
    usage: &'a mut model_call::UsageSnapshot,
    services: &'a Services,
    /// The first snapshot write of the turn that failed (the loop ends at the next step).
    unsaved: Option<TurnError>,
    /// The user's language, for the storage error.
    lang: error::Lang,
    steering: &'a SteeringInbox,
    sink: &'a EventSink,
    /// Steering messages are user turns for the memory review too.
    memory_interval: u32,
    memory_due: bool,
}

impl TurnHooks<'_> {
    /// The chat snapshot as of now, in its recovery form (overwritten when the turn ends). A
    /// failure is kept: the turn ends failed before its next model call.
    async fn checkpoint(&mut self, transcript: &Transcript) {
        let saved = end::checkpoint(
            &self.services.store,
            &self.checkpoint,
            self.review,
            transcript,
        )
        .await;
        if let Err(e) = saved
            && self.unsaved.is_none()
        {
            self.unsaved = Some(TurnError::Storage {
                full: e.is_disk_full(),
                lang: self.lang,
            });
        }
    }
}

#[async_trait]
impl StepHooks for TurnHooks<'_> {
    fn on_tool_calls(&mut self, calls: &[ToolCall]) {
        self.review
            .on_tool_response(&self.services.tools.view(), calls);
    }

    fn on_model_answer(
        &mut self,
        usage: &mpa_protocol::Usage,
        budget: &mpa_protocol::RequestBudget,
    ) {
        self.usage.record(usage, budget);
    }

    fn evidence_watermark(&self, transcript: &Transcript) -> usize {
        // Without an evidence store there is nothing to keep searchable.
        match &self.capture {
            Some(_) => transcript.captured(),
            None => transcript.len(),
        }
    }

    async fn on_compacted(&mut self, transcript: &Transcript, removed: &[mpa_protocol::Message]) {
        // This turn's first message moved with the compaction.
        let last = transcript.compaction_count().saturating_sub(1);
        self.checkpoint.turn_start = transcript.rebase(self.checkpoint.turn_start, last);
        // The saved base holds the messages the compaction replaced: the next step rewrites it
        // (with the display lines of the replaced messages, now archived).
        self.checkpoint
            .base_saved
            .store(end::BASE_STALE, std::sync::atomic::Ordering::Release);
        // Compacted-out messages stay in the evidence store, marked, and searchable.
        if let Some(target) = &self.capture {
            capture::mark_compacted(target, removed).await;
        }
    }

    async fn after_step(&mut self, transcript: &mut Transcript) {
        // Evidence is captured as the turn goes, so a crash loses at most the step in flight.
        if let Some(target) = &self.capture {
            capture::flush(target, transcript).await;
        }
        // So does the chat: a process killed now leaves the conversation up to this step.
        self.checkpoint(transcript).await;
    }

    fn failure(&self) -> Option<TurnError> {
        self.unsaved.clone()
    }

    async fn intake(&mut self, transcript: &mut Transcript) {
        let taken = steering::intake(self.services, self.steering, transcript);
        if taken.is_empty() {
            return;
        }
        for _ in &taken {
            self.memory_due |= self.review.on_user_turn(self.memory_interval, 0);
        }
        // Stored before it is acknowledged: `applied` means the message is in the chat and
        // the evidence.
        self.after_step(transcript).await;
        for t in &taken {
            self.sink.emit(steering::applied_event(t));
        }
    }
}

pub async fn run_turn(
    services: &Arc<Services>,
    data: &mut SessionData,
    input: TurnInput,
    events: &mpsc::UnboundedSender<Event>,
    cancel: CancellationToken,
    stop_cause: impl Fn() -> StopCause,
    steering: &SteeringInbox,
) -> TurnOutcome {
    let sink = EventSink::new(events.clone());
    let actor = input.actor;
    begin::restore_plan(data);
    if let Some(ctx) = input.client_context {
        begin::adopt_client_context(data, ctx);
    }
    let turn_start = data.transcript.len();
    let compactions_before = data.transcript.compaction_count();
    let mut user = begin::user_message(services, &input.text, &input.images);
    crate::web::stamp_time(&mut user);
    data.transcript.push(user);
    let totals = |u: &model_call::UsageSnapshot| {
        (u.total_input_tokens, u.total_output_tokens, u.total_tokens)
    };
    let usage_before = totals(&data.persisted.usage);
    let assistant_message_id = uuid::Uuid::new_v4().simple().to_string();
    sink.emit(Event::TurnStarted {
        session_id: data.session_id.clone(),
        assistant_message_id: assistant_message_id.clone(),
    });
    // The saved state this session was loaded with could not all be read: said once, here.
    if let Some(lost) = data.state_lost.take() {
        sink.emit(lost.to_event());
    }

    let mut memory_due = false;
    let mut system = None;
    let confirmation = crate::moviepilot::secret_read::answer(
        services,
        &actor,
        &data.session_id,
        &data.channel,
        &mut data.persisted.pending_secret_read,
        &data.state,
        &input.text,
    )
    .await;
    let host_reply = match confirmation {
        Some(a) => {
            if let Some(content) = a.protected {
                sink.emit(Event::Protected { content });
            }
            Some(a.reply)
        }
        None => {
            let lang = input
                .lang
                .unwrap_or_else(|| mpa_protocol::Lang::of(&input.text));
            host_command::answer(services, &actor, &input.text, lang).await
        }
    };
    let end = match host_reply {
        Some(reply) => {
            sink.emit(Event::Delta {
                content: reply.clone(),
            });
            host_command::record(&mut data.transcript, &reply);
            let mut end = steps::LoopEnd::new(TurnStatus::Completed);
            end.final_text = reply;
            end
        }
        None => {
            let memory_interval = if services.caps.get::<crate::capability::Learning>().is_some() {
                services.cfg.memory_review_interval
            } else {
                0
            };
            let prior_turns = host_command::user_turns(&data.transcript.messages()[..turn_start]);
            memory_due = data
                .persisted
                .review
                .on_user_turn(memory_interval, prior_turns);
            let sys = begin::system_message(services, &actor, data).await;
            let view = services.tools.view_for(&data.state);
            let all_specs = view.specs_for(&actor);
            // Discovery state lives for one user request.
            let (specs, discovery) = crate::tools::search_tools::first_call(
                &view,
                &actor,
                &input.text,
                services.cfg.max_tools,
                &all_specs,
            );
            let discovering = discovery.enabled;
            data.state.put(discovery);
            let acting_note = begin::acting_note(&actor, data);
            data.save_capabilities(&services.caps);
            let request_id = uuid::Uuid::new_v4().simple().to_string();
            let catalogue = discovering.then_some(all_specs);
            let generation = view.generation();
            let setup = || LoopSetup {
                services,
                tools: ToolStage {
                    invoker: services.invoker(),
                    origin: Origin::Turn,
                    max_parallel: services.cfg.max_parallel_tools,
                    actor: &actor,
                    session_id: &data.session_id,
                    channel: &data.channel,
                    request_id: &request_id,
                    state: &data.state,
                    review: None,
                    handle: AgentHandle::new(services, Origin::Turn, &request_id)
                        .with_events(sink.clone()),
                },
                system: &sys,
                offer: Offer {
                    specs: specs.clone(),
                    catalogue: catalogue.clone(),
                    follow: Some(generation),
                },
                limits: Limits {
                    max_model_calls: services.cfg.max_iterations,
                    input_token_budget: None,
                },
                budget: services.budget_limits(),
                acting_note: acting_note.clone(),
            };
            let checkpoint = end::Checkpoint::of(data, turn_start);
            let mut hooks = TurnHooks {
                capture: capture::CaptureTarget::for_session(
                    services.caps.history(),
                    data,
                    &services.cfg.model.model,
                ),
                checkpoint,
                review: &mut data.persisted.review,
                usage: &mut data.persisted.usage,
                services,
                unsaved: None,
                lang: error::Lang::of(&input.text),
                steering,
                sink: &sink,
                memory_interval,
                memory_due: false,
            };
            // What is in the transcript before the first model call — the user's message and
            // what a stateless client sent along with it — is evidence from the start, so the
            // first request can already be compacted (compaction never cuts past the evidence).
            if let Some(target) = &hooks.capture {
                capture::flush(target, &mut data.transcript).await;
            }
            // The request is kept even if the process dies during the first model call; a
            // request that cannot be kept is not sent (the loop ends before its first call).
            hooks.checkpoint(&data.transcript).await;
            steering.begin_run(&actor.user_id, &assistant_message_id);
            let mut end =
                steps::run(setup(), &mut data.transcript, &mut hooks, &sink, &cancel).await;
            // The inbox's atomic end of the run: a message accepted after the loop's last
            // boundary keeps the turn going (its first step takes it in); after a stop, what
            // waited is discarded and said so.
            loop {
                match steering.finish_run(end.status == TurnStatus::Stopped) {
                    Finish::More => {
                        // How the loop ended so far is told, not lost.
                        if let Some(error) = end.error.take() {
                            sink.emit(error.to_event());
                        }
                        end = steps::run(setup(), &mut data.transcript, &mut hooks, &sink, &cancel)
                            .await;
                    }
                    Finish::Done { discarded } => {
                        for m in &discarded {
                            sink.emit(steering::discarded_event(m));
                        }
                        break;
                    }
                }
            }
            memory_due |= hooks.memory_due;
            // The last step's snapshot failed after the loop had its answer: not acknowledged.
            if let Some(error) = hooks.unsaved.take()
                && !matches!(end.error, Some(TurnError::Storage { .. }))
            {
                end.status = TurnStatus::Failed;
                end.error = Some(error);
            }
            system = Some(sys);
            end
        }
    };
    // What the turn's tools left running (subagents) is wound up before the turn is saved.
    for c in services.caps.iter() {
        c.end_turn(data.info(), &data.state).await;
    }
    // A question the host asked during the loop is kept with the session.
    if let Some(p) = crate::moviepilot::secret_read::take_asked(&data.state) {
        data.persisted.pending_secret_read = Some(p);
    }
    if let Some(error) = &end.error {
        sink.emit(error.to_event());
    }
    let cause = stop_cause();
    // A compaction during the turn moved this turn's first message.
    let turn_start = data.transcript.rebase(turn_start, compactions_before);
    let usage_after = totals(&data.persisted.usage);
    crate::web::stamp_turn(
        data.transcript.tail_mut(turn_start),
        usage_before,
        usage_after,
    );
    let error_text = end.error.as_ref().map(TurnError::message);
    let saved = end::finish(
        services,
        data,
        turn_start,
        end.status,
        error_text.as_deref(),
        cause,
    )
    .await;
    // Never acknowledge what was not stored: the turn stays in memory (saved with the session's
    // next write, see `SessionData::unsaved`) and ends failed, saying why.
    data.unsaved = saved.is_err();
    let mut status = end.status;
    if let Err(e) = saved {
        status = TurnStatus::Failed;
        if !matches!(end.error, Some(TurnError::Storage { .. })) {
            let error = TurnError::Storage {
                full: e.is_disk_full(),
                lang: error::Lang::of(&input.text),
            };
            sink.emit(error.to_event());
        }
    }
    sink.emit(Event::TurnEnded {
        status,
        final_text: end.final_text,
        halt: end.halt.as_ref().map(crate::tools::gate::Halt::to_event),
    });
    // Reviews follow only model turns whose final answer was delivered and saved (a write it
    // left pending or unknown included); a stopped, failed, partial or guardrail-halted turn
    // keeps its counters, so its work still counts towards the next review.
    let answered = matches!(
        status,
        TurnStatus::Completed | TurnStatus::Waiting | TurnStatus::Unknown
    ) && end.halt.is_none();
    let review = match (answered, system) {
        (true, Some(system)) => {
            let skill_interval = if services.caps.get::<crate::capability::Learning>().is_some() {
                services.cfg.skill_review_interval
            } else {
                0
            };
            let due = Due {
                memory: memory_due,
                skills: data.persisted.review.skills_due(skill_interval),
            };
            due.any().then(|| ReviewStart {
                due,
                system,
                messages: data.transcript.messages().to_vec(),
                tokens: data.transcript.tokens().clone(),
            })
        }
        _ => None,
    };
    TurnOutcome { status, review }
}
