//! Background learning review (spec learning-guardrails.md §4, MP variant).
//!
//! Counters live in the session: the memory counter advances once per user turn (modulo the
//! interval, initialised from the human messages already in the session) and the review is due
//! when it wraps to 0; the skill counter advances once per model response with tool calls, is
//! reset by a response that calls `skill_manage`, and is due at the interval. A review starts only
//! after a completed turn's reply was delivered and saved, never after a stop or a failure, and
//! never while another one runs. It replays the session with the same system prompt and tool
//! specs, but executes only the learning tools (`memory` only when the memory review is due);
//! every other call gets the whitelist refusal and nothing runs. It makes at most 16 model calls
//! within an input budget, sends nothing to the user, and is cancelled by the next user turn
//! (its later writes are sealed by the shared cancel flag).

use crate::handle::{AgentHandle, EventSink};
use crate::services::Services;
use crate::tools::ReviewUse;
use crate::tools::policy::Origin;
use crate::tools::registry::ToolView;
use crate::transcript::Transcript;
use crate::turn::TurnError;
use crate::turn::steps::{self, Limits, LoopSetup, Offer, StepHooks};
use crate::turn::tool_calls::ToolStage;
use mpa_learning::ReviewToken;
use mpa_protocol::{Actor, Message, ToolCall, Usage};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const MAX_REVIEW_ITERATIONS: u32 = 16;
/// How long a new user turn waits for a cancelled review to acknowledge.
pub const CANCEL_WAIT: Duration = Duration::from_secs(2);

/// Per-session review counters, persisted with the chat snapshot.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewCounters {
    initialised: bool,
    turns: u32,
    tool_iterations: u32,
}

/// Which reviews are due after a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Due {
    pub memory: bool,
    pub skills: bool,
}

impl Due {
    pub fn any(self) -> bool {
        self.memory || self.skills
    }
}

impl ReviewCounters {
    /// Called at the start of every real user turn (host commands excluded).
    pub fn on_user_turn(&mut self, interval: u32, prior_user_messages: usize) -> bool {
        if interval == 0 {
            return false;
        }
        if !self.initialised {
            self.initialised = true;
            self.turns = (prior_user_messages as u32) % interval;
        }
        self.turns = (self.turns + 1) % interval;
        self.turns == 0
    }

    /// Called once per model response that contains tool calls. A response that already
    /// maintains skills (a skills-review tool that writes) resets the count.
    pub fn on_tool_response(&mut self, tools: &ToolView, calls: &[ToolCall]) {
        let maintains_skills = calls.iter().any(|c| {
            tools
                .get(&c.name)
                .is_some_and(|t| t.meta.review == ReviewUse::Always && !t.meta.effect.is_read())
        });
        if maintains_skills {
            self.tool_iterations = 0;
        } else {
            self.tool_iterations += 1;
        }
    }

    /// Checked at turn end; resets the skill counter when due.
    pub fn skills_due(&mut self, interval: u32) -> bool {
        if interval > 0 && self.tool_iterations >= interval {
            self.tool_iterations = 0;
            return true;
        }
        false
    }
}

/// A review to start after a turn: the parent's system message and transcript, as the turn's
/// last model call saw them.
pub struct ReviewStart {
    pub due: Due,
    pub system: Message,
    pub messages: Vec<Message>,
    /// The session's token counts, so the review does not tokenize the conversation again.
    pub tokens: mpa_model::TokenCache,
}

/// The background review of a session: running, or how the last one ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewState {
    /// None has run yet.
    Idle,
    Running,
    /// The last one ended on its own.
    Finished,
    /// The last one was cancelled (by a new user turn, or the session closing) and stopped
    /// within [`CANCEL_WAIT`].
    Cancelled,
    /// The last one did not stop within [`CANCEL_WAIT`] of its cancellation and was aborted.
    Abandoned,
}

/// A running review, owned by the session actor.
pub struct RunningReview {
    cancel: CancellationToken,
    sealed: ReviewToken,
    task: JoinHandle<ReviewReport>,
}

impl RunningReview {
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Cancels the review and waits at most [`CANCEL_WAIT`]; later writes are sealed either way.
    /// The report of a review that stopped in time carries what it used until then.
    pub async fn cancel(self) -> (ReviewState, Option<ReviewReport>) {
        self.sealed.cancel();
        self.cancel.cancel();
        let mut task = self.task;
        match tokio::time::timeout(CANCEL_WAIT, &mut task).await {
            Ok(report) => (ReviewState::Cancelled, report.ok()),
            Err(_) => {
                tracing::warn!("background review did not stop within 2 s; continuing");
                task.abort();
                (ReviewState::Abandoned, None)
            }
        }
    }

    /// Waits for the review to end on its own (`None`: it panicked). Not to be awaited again
    /// once it returned.
    pub async fn done(&mut self) -> Option<ReviewReport> {
        (&mut self.task).await.ok()
    }
}

/// What a review did (logged; never sent to the user).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReviewReport {
    pub model_calls: u32,
    pub usage: Usage,
    /// Successful memory/skill writes: `(tool, arguments)`.
    pub actions: Vec<(String, String)>,
    pub denied: Vec<String>,
    pub error: Option<TurnError>,
}

const MEMORY_PROMPT: &str = "Review the conversation above and decide whether anything deserves a place \
in stable memory. Look for what the user revealed about themselves — preferences, corrections, how they \
want the agent to behave — and for durable facts about this MoviePilot setup. Route each fact to \
exactly one store: target \"user\" (USER.md, who the user is and what they prefer) or target \"memory\" \
(MEMORY.md, facts about the environment). Save only what has durable evidence in the conversation. \
If nothing is worth saving, answer exactly \"Nothing to save.\" and stop.";

const SKILL_PROMPT: &str = "Review the conversation above for reusable know-how. Signals: the user corrected \
style, format or workflow; a non-trivial technique worked; a skill you consulted was wrong. Prefer, in \
order: patching a skill used in this session, patching an existing broader skill, adding a support file \
with a one-line pointer in SKILL.md, and only then creating a new class-level skill. Write procedures \
first and pitfalls as short general rules with one clause of why. Do not capture environment-specific \
failures, transient errors, one-off stories or unresolved failures. Read a skill with skill_view before \
changing it. If nothing is worth saving, answer exactly \"Nothing to save.\" and stop.";

const WHITELIST_NOTE: &str = "You can only call memory and skill management tools. Other tools will be \
denied at runtime — do not attempt them.";

fn review_prompt(due: Due) -> String {
    let body = match (due.memory, due.skills) {
        (true, true) => format!("{MEMORY_PROMPT}\n\nThen: {SKILL_PROMPT}"),
        (true, false) => MEMORY_PROMPT.to_string(),
        _ => SKILL_PROMPT.to_string(),
    };
    format!("{body}\n\n{WHITELIST_NOTE}")
}

/// Input budget of one review: min(600k, 75 % of the window), 120k when the window is unknown.
pub fn input_budget(services: &Services) -> u64 {
    match mpa_model::model_profile(&services.cfg.model.model).context_window_tokens {
        Some(w) => (w * 3 / 4).clamp(1, 600_000),
        None => 120_000,
    }
}

/// Starts a review in the background.
pub fn spawn(
    services: Arc<Services>,
    actor: Actor,
    session_id: String,
    start: ReviewStart,
) -> RunningReview {
    let cancel = CancellationToken::new();
    let sealed = ReviewToken::new(format!("review-{}", uuid::Uuid::new_v4().simple()));
    let ctx = sealed.clone();
    let token = cancel.clone();
    let task =
        tokio::spawn(async move { run(services, actor, session_id, start, token, ctx).await });
    RunningReview {
        cancel,
        sealed,
        task,
    }
}

/// The review runs the turn's own loop: same system message, same tool specs, its own policy
/// origin (the whitelist), its own limits, no events and no evidence capture of its own.
async fn run(
    services: Arc<Services>,
    actor: Actor,
    session_id: String,
    start: ReviewStart,
    cancel: CancellationToken,
    review: ReviewToken,
) -> ReviewReport {
    let mut transcript = Transcript::restored(start.messages).with_tokens(start.tokens);
    transcript.push(Message::user(review_prompt(start.due)));
    // The turn's own specs (`search_tools` is a turn's, offered only with discovery on).
    let specs: Vec<_> = services
        .tools
        .view()
        .specs_for(&actor)
        .into_iter()
        .filter(|s| {
            s.name != <crate::tools::search_tools::SearchTools as crate::tools::TypedTool>::NAME
        })
        .collect();
    let state = Arc::new(crate::tools::SessionState::new());
    let origin = Origin::Review {
        memory_due: start.due.memory,
    };
    let setup = LoopSetup {
        services: &services,
        tools: ToolStage {
            invoker: services.invoker(),
            origin,
            // One call at a time: learning writes of one review are ordered.
            max_parallel: 1,
            actor: &actor,
            session_id: &session_id,
            channel: "review",
            request_id: review.id(),
            state: &state,
            review: Some(&review),
            handle: AgentHandle::new(&services, origin, review.id()),
        },
        system: &start.system,
        offer: Offer::fixed(specs),
        limits: Limits {
            max_model_calls: MAX_REVIEW_ITERATIONS,
            input_token_budget: Some(input_budget(&services)),
        },
        budget: services.budget_limits(),
        acting_note: None,
    };
    let mut watch = Watch {
        view: services.tools.view(),
        report: ReviewReport::default(),
    };
    let end = steps::run(
        setup,
        &mut transcript,
        &mut watch,
        &EventSink::none(),
        &cancel,
    )
    .await;
    let mut report = watch.report;
    report.model_calls = end.model_calls;
    report.usage = end.usage;
    report.error = match end.status {
        mpa_protocol::TurnStatus::Failed => end.error,
        _ => None,
    };
    if let Some(learning) = services.caps.get::<crate::capability::Learning>() {
        learning.memory().end_review(&actor, &review);
        learning.skills().end_review(&actor, &review);
    }
    tracing::info!(
        session = %session_id,
        model_calls = report.model_calls,
        input_tokens = report.usage.input_tokens,
        output_tokens = report.usage.output_tokens,
        actions = report.actions.len(),
        denied = report.denied.len(),
        "background review finished"
    );
    report
}

/// What a review did, as its tool results arrive: denials by their error code, successful
/// learning writes with their (redacted) arguments.
struct Watch {
    view: ToolView,
    report: ReviewReport,
}

#[async_trait::async_trait]
impl StepHooks for Watch {
    fn on_tool_result(&mut self, call: &ToolCall, output: &crate::tools::ToolOutput) {
        if output.error.as_deref() == Some("review_tool_denied") {
            self.report.denied.push(call.name.clone());
            return;
        }
        let writes = self
            .view
            .get(&call.name)
            .is_some_and(|t| !t.meta.effect.is_read());
        if output.outcome == mpa_protocol::Outcome::Succeeded
            && writes
            && output.changed != Some(false)
        {
            let args = crate::redaction::redact(&call.arguments).into_owned();
            self.report.actions.push((call.name.clone(), args));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_counter_wraps_every_interval_and_hydrates_once() {
        let mut c = ReviewCounters::default();
        let due: Vec<bool> = (0..20).map(|_| c.on_user_turn(10, 0)).collect();
        assert_eq!(due.iter().filter(|d| **d).count(), 2);
        assert!(due[9] && due[19]);
        let mut c = ReviewCounters::default();
        // A session loaded with 7 earlier user messages is due at its 3rd new turn.
        let due: Vec<bool> = (0..3).map(|_| c.on_user_turn(10, 7)).collect();
        assert_eq!(due, vec![false, false, true]);
        assert!(!ReviewCounters::default().on_user_turn(0, 0));
    }

    struct Stub(&'static str, crate::tools::ToolMeta);

    #[async_trait::async_trait]
    impl crate::tools::JsonTool for Stub {
        fn spec(&self) -> mpa_protocol::ToolSpec {
            mpa_protocol::ToolSpec {
                name: self.0.into(),
                description: String::new(),
                parameters: serde_json::json!({"type": "object"}),
            }
        }
        fn meta(&self) -> crate::tools::ToolMeta {
            self.1
        }
        async fn call(
            &self,
            _ctx: crate::tools::ToolContext,
            _args: serde_json::Value,
        ) -> crate::tools::ToolOutput {
            crate::tools::ToolOutput::failure("stub", "stub")
        }
    }

    #[test]
    fn skill_counter_resets_on_a_skill_maintaining_response() {
        use crate::tools::ToolMeta;
        use mpa_protocol::EffectClass;
        let mut tools = crate::tools::ToolRegistry::new();
        tools.register(crate::tools::json_tool(Stub(
            "skill_manage",
            ToolMeta::new(EffectClass::ReversibleWrite).review(ReviewUse::Always),
        )));
        tools.register(crate::tools::json_tool(Stub(
            "skill_view",
            ToolMeta::read().review(ReviewUse::Always),
        )));
        let call = |n: &str| ToolCall {
            id: "c".into(),
            name: n.into(),
            arguments: "{}".into(),
        };
        let tools = crate::tools::registry::Tools::from(tools).view();
        let mut c = ReviewCounters::default();
        for _ in 0..9 {
            c.on_tool_response(&tools, &[call("a"), call("skill_view")]);
        }
        assert!(!c.skills_due(10));
        c.on_tool_response(&tools, &[call("skill_manage")]);
        for _ in 0..9 {
            c.on_tool_response(&tools, &[call("a")]);
        }
        assert!(!c.skills_due(10));
        c.on_tool_response(&tools, &[call("a")]);
        assert!(c.skills_due(10));
        assert!(!c.skills_due(10), "reset after due");
    }

    #[test]
    fn a_review_write_that_changed_nothing_is_not_reported_as_an_action() {
        use crate::tools::{ToolMeta, ToolOutput};
        use mpa_protocol::{EffectClass, Outcome};
        let mut tools = crate::tools::ToolRegistry::new();
        tools.register(crate::tools::json_tool(Stub(
            "memory",
            ToolMeta::new(EffectClass::ReversibleWrite),
        )));
        let mut watch = Watch {
            view: crate::tools::registry::Tools::from(tools).view(),
            report: ReviewReport::default(),
        };
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "memory".into(),
            arguments: format!(r#"{{"id":"{id}"}}"#),
        };
        let ok = |changed| {
            let mut out =
                ToolOutput::json(&serde_json::json!({"success": true}), Outcome::Succeeded);
            out.changed = changed;
            out
        };
        watch.on_tool_result(&call("dup"), &ok(Some(false)));
        watch.on_tool_result(&call("new"), &ok(Some(true)));
        watch.on_tool_result(&call("unsaid"), &ok(None));
        watch.on_tool_result(
            &call("denied"),
            &ToolOutput::failure("review_tool_denied", "not in a review"),
        );
        let acted: Vec<&str> = watch
            .report
            .actions
            .iter()
            .map(|(_, a)| a.as_str())
            .collect();
        assert_eq!(acted, vec![r#"{"id":"new"}"#, r#"{"id":"unsaid"}"#]);
        assert_eq!(watch.report.denied, vec!["memory".to_string()]);
    }
}
