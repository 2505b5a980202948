//! One turn, in order (DESIGN.md §2). Each stage is a module called explicitly here:
//! [`begin`] (restore the plan), the model ⇄ tools loop ([`request`], [`dispatch`]) and [`end`]
//! (interruption notice, plan snapshot, chat snapshot).

pub mod begin;
pub mod capture;
pub mod dispatch;
pub mod end;
pub mod request;

use crate::agent::Services;
use crate::session::SessionData;
use mpa_model::{ModelError, StreamEvent};
use mpa_protocol::{Actor, Event, Message, TurnStatus};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub struct TurnInput {
    pub actor: Actor,
    pub text: String,
    pub images: Vec<String>,
}

/// Sends a turn's events; a consumer that went away is ignored (the turn keeps running).
pub struct EventSink<'a>(&'a mpsc::UnboundedSender<Event>);

impl EventSink<'_> {
    pub fn emit(&self, e: Event) {
        let _ = self.0.send(e);
    }
}

/// A review to start after the turn (its reply was delivered and saved).
pub struct ReviewStart {
    pub due: crate::review::Due,
    pub system: String,
    pub messages: Vec<Message>,
}

pub struct TurnOutcome {
    pub status: TurnStatus,
    pub review: Option<ReviewStart>,
}

pub async fn run_turn(
    services: &Services,
    data: &mut SessionData,
    input: TurnInput,
    events: &mpsc::UnboundedSender<Event>,
    cancel: CancellationToken,
) -> TurnOutcome {
    let sink = EventSink(events);
    let actor = input.actor.clone();
    begin::restore_plan(data);
    let turn_start = data.messages.len();
    data.messages
        .push(begin::user_message(services, &input.text, &input.images));
    let assistant_message_id = uuid::Uuid::new_v4().simple().to_string();
    sink.emit(Event::TurnStarted {
        session_id: data.session_id.clone(),
        assistant_message_id,
    });
    if let Some(reply) = begin::user_command(services, &actor, &input.text).await {
        sink.emit(Event::Delta {
            content: reply.clone(),
        });
        let mut m = Message::assistant(reply.clone(), vec![]);
        m.metadata
            .insert("host_command".into(), serde_json::Value::Bool(true));
        data.messages.push(m);
        end::finish(services, data, turn_start, TurnStatus::Completed, None).await;
        sink.emit(Event::TurnEnded {
            status: TurnStatus::Completed,
            final_text: reply,
        });
        return TurnOutcome {
            status: TurnStatus::Completed,
            review: None,
        };
    }
    let prior_user_messages = data.messages[..turn_start]
        .iter()
        .filter(|m| m.role == mpa_protocol::Role::User)
        .count();
    let memory_interval = if services.caps.memory.is_some() {
        services.cfg.memory_review_interval
    } else {
        0
    };
    let memory_due = data
        .review_counters
        .on_user_turn(memory_interval, prior_user_messages);
    let blocks = begin::capability_blocks(services, &actor, data).await;
    // Evidence is captured as the turn goes, so a crash loses at most the step in flight.
    capture::capture(services, data, turn_start, Vec::new()).await;
    let mut captured = data.messages.len();

    let mut status = TurnStatus::IterationLimit;
    let mut final_text = String::new();
    let mut error: Option<(String, String)> = None;
    for _ in 0..services.cfg.max_iterations {
        if cancel.is_cancelled() {
            status = TurnStatus::Stopped;
            break;
        }
        let system = request::system_message(&actor, data, &blocks);
        let tools = request::tool_specs(services, &actor);
        let req = request::assemble(&system, data, &tools);
        let mut partial = String::new();
        let mut on_event = |ev: StreamEvent| match ev {
            StreamEvent::Content(c) => {
                partial.push_str(&c);
                sink.emit(Event::Delta { content: c });
            }
            StreamEvent::Reasoning(c) => sink.emit(Event::Reasoning { content: c }),
        };
        let result = services
            .model
            .stream_chat(&req, &cancel, &mut on_event)
            .await;
        drop(req);
        let completion = match result {
            Ok(c) => c,
            Err(e) => {
                // What was received before the stop or the failure is kept, marked as such.
                if !partial.is_empty() {
                    let mut m = Message::assistant(partial, vec![]);
                    m.metadata
                        .insert("interrupted".into(), serde_json::Value::Bool(true));
                    data.messages.push(m);
                    capture::capture(services, data, captured, Vec::new()).await;
                }
                if matches!(e, ModelError::Cancelled) {
                    status = TurnStatus::Stopped;
                } else {
                    error = Some((e.code().to_string(), e.to_string()));
                    status = TurnStatus::Failed;
                }
                break;
            }
        };
        if let Some(u) = completion.usage {
            sink.emit(Event::Usage { usage: u });
        }
        let calls = completion.tool_calls.clone();
        data.messages.push(Message::assistant(
            completion.content.clone(),
            calls.clone(),
        ));
        capture::capture(services, data, captured, Vec::new()).await;
        captured = data.messages.len();
        if calls.is_empty() {
            final_text = completion.content;
            status = TurnStatus::Completed;
            break;
        }
        data.review_counters.on_tool_response(&calls);
        let outcome =
            dispatch::run_tool_calls(services, data, &actor, &calls, &sink, &cancel).await;
        data.messages.extend(outcome.results);
        capture::capture(services, data, captured, outcome.full_contents).await;
        captured = data.messages.len();
        if outcome.stopped {
            status = TurnStatus::Stopped;
            break;
        }
    }
    if status == TurnStatus::IterationLimit {
        error = Some((
            "iteration_limit".into(),
            format!(
                "the turn reached LLM_MAX_ITERATIONS ({}) model calls without a final answer; the work may be incomplete",
                services.cfg.max_iterations
            ),
        ));
    }
    if let Some((code, message)) = &error {
        sink.emit(Event::Error {
            code: code.clone(),
            message: message.clone(),
        });
    }
    end::finish(
        services,
        data,
        turn_start,
        status,
        error.as_ref().map(|e| e.1.as_str()),
    )
    .await;
    sink.emit(Event::TurnEnded { status, final_text });
    let skill_interval = if services.caps.skills.is_some() {
        services.cfg.skill_review_interval
    } else {
        0
    };
    let due = crate::review::Due {
        memory: memory_due,
        skills: data.review_counters.skills_due(skill_interval),
    };
    // Reviews follow only completed turns whose reply was delivered and saved.
    let review = (status == TurnStatus::Completed && due.any()).then(|| {
        let system = request::system_message(&actor, data, &blocks).text();
        let messages = data.messages.clone();
        ReviewStart {
            due,
            system,
            messages,
        }
    });
    TurnOutcome { status, review }
}
