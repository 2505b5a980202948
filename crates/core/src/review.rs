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

use crate::agent::Services;
use crate::tools::{ToolContext, ToolOutput};
use mpa_model::ChatRequest;
use mpa_protocol::{Actor, Message, Outcome, ReviewToken, ToolCall, Usage};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const MAX_REVIEW_ITERATIONS: u32 = 16;
/// How long a new user turn waits for a cancelled review to acknowledge.
pub const CANCEL_WAIT: Duration = Duration::from_secs(2);

/// Per-session review counters.
#[derive(Debug, Default, Clone)]
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

    /// Called once per model response that contains tool calls.
    pub fn on_tool_response(&mut self, calls: &[ToolCall]) {
        if calls.iter().any(|c| c.name == "skill_manage") {
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
    pub async fn cancel(self) {
        self.sealed.cancel();
        self.cancel.cancel();
        let mut task = self.task;
        if tokio::time::timeout(CANCEL_WAIT, &mut task).await.is_err() {
            tracing::warn!("background review did not stop within 2 s; continuing");
            task.abort();
        }
    }

    pub async fn wait(self) -> Option<ReviewReport> {
        self.task.await.ok()
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
    pub error: Option<String>,
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

/// Starts a review in the background. `system` and `messages` are the parent's final request
/// context (same system prompt, same transcript).
pub fn spawn(
    services: Arc<Services>,
    actor: Actor,
    session_id: String,
    system: String,
    messages: Vec<Message>,
    due: Due,
    on_done: Box<dyn FnOnce() + Send>,
) -> RunningReview {
    let cancel = CancellationToken::new();
    let sealed = ReviewToken::new(format!("review-{}", uuid::Uuid::new_v4().simple()));
    let ctx = sealed.clone();
    let token = cancel.clone();
    let task = tokio::spawn(async move {
        let report = run(
            services, actor, session_id, system, messages, due, token, ctx,
        )
        .await;
        on_done();
        report
    });
    RunningReview {
        cancel,
        sealed,
        task,
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "one call site, all parts of one review"
)]
async fn run(
    services: Arc<Services>,
    actor: Actor,
    session_id: String,
    system: String,
    mut messages: Vec<Message>,
    due: Due,
    cancel: CancellationToken,
    review: ReviewToken,
) -> ReviewReport {
    let mut report = ReviewReport::default();
    let tools = services.tools.specs_for(&actor);
    let budget = input_budget(&services);
    messages.insert(0, Message::system(system));
    messages.push(Message::user(review_prompt(due)));
    let state = Arc::new(Mutex::new(crate::tools::SessionState::default()));
    while report.model_calls < MAX_REVIEW_ITERATIONS && report.usage.input_tokens < budget {
        if cancel.is_cancelled() {
            break;
        }
        let req = ChatRequest::new(&messages, &tools);
        let estimate = mpa_model::estimate_tokens(req.messages.iter().copied(), req.tools);
        report.model_calls += 1;
        let result = services.model.stream_chat(&req, &cancel, &mut |_| {}).await;
        drop(req);
        let completion = match result {
            Ok(c) => c,
            Err(e) => {
                report.usage.input_tokens += estimate;
                report.error = Some(e.code().to_string());
                break;
            }
        };
        match completion.usage {
            Some(u) if u.input_tokens > 0 => report.usage.add(&u),
            Some(u) => {
                report.usage.add(&u);
                report.usage.input_tokens += estimate;
            }
            None => report.usage.input_tokens += estimate,
        }
        let calls = completion.tool_calls.clone();
        messages.push(Message::assistant(completion.content, calls.clone()));
        if calls.is_empty() {
            break;
        }
        let inv = crate::turn::dispatch::invoker(&services);
        for call in &calls {
            let out = if cancel.is_cancelled() {
                ToolOutput::failure("review_cancelled", "the review was cancelled")
            } else {
                let ctx = ToolContext {
                    actor: actor.clone(),
                    session_id: session_id.clone(),
                    call_id: call.id.clone(),
                    cancel: cancel.child_token(),
                    session: Arc::clone(&state),
                    review: Some(review.clone()),
                };
                let origin = crate::tools::policy::Origin::Review {
                    memory_due: due.memory,
                };
                let same = calls.iter().filter(|c| c.name == call.name).count();
                crate::tools::invoke::invoke(inv, ctx, origin, call, same)
                    .await
                    .output
            };
            if is_review_denial(&out) {
                report.denied.push(call.name.clone());
            }
            if out.outcome == Outcome::Succeeded
                && services
                    .tools
                    .get(&call.name)
                    .is_some_and(|t| !t.meta.effect.is_read())
                && !reports_no_change(&out.content)
            {
                report.actions.push((
                    call.name.clone(),
                    crate::redaction::redact(&call.arguments).into_owned(),
                ));
            }
            messages.push(Message::tool(
                call.id.clone(),
                call.name.clone(),
                out.content,
                out.outcome,
            ));
        }
    }
    if let Some(m) = &services.caps.memory {
        m.end_review(&actor, &review);
    }
    if let Some(s) = &services.caps.skills {
        s.end_review(&actor, &review);
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

fn is_review_denial(out: &ToolOutput) -> bool {
    serde_json::from_str::<serde_json::Value>(&out.content)
        .is_ok_and(|v| v.get("error").and_then(|e| e.as_str()) == Some("review_tool_denied"))
}

/// Whether a learning tool's JSON result says it changed nothing (`"changed": false`, e.g. a
/// duplicate entry or a proposal staged for approval): such calls are not reported as actions.
fn reports_no_change(content: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(content)
        .is_ok_and(|v| v.get("changed") == Some(&serde_json::Value::Bool(false)))
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

    #[test]
    fn skill_counter_resets_on_skill_manage() {
        let call = |n: &str| ToolCall {
            id: "c".into(),
            name: n.into(),
            arguments: "{}".into(),
        };
        let mut c = ReviewCounters::default();
        for _ in 0..9 {
            c.on_tool_response(&[call("a"), call("b")]);
        }
        assert!(!c.skills_due(10));
        c.on_tool_response(&[call("skill_manage")]);
        for _ in 0..9 {
            c.on_tool_response(&[call("a")]);
        }
        assert!(!c.skills_due(10));
        c.on_tool_response(&[call("a")]);
        assert!(c.skills_due(10));
        assert!(!c.skills_due(10), "reset after due");
    }
}
