//! One evaluation task through a real host (issue 15): a fresh host on its own data directory,
//! the MoviePilot gateway pointed at the evaluation world, `execute_command` wrapped in the
//! scenario's rules, one user turn with the task text, then the host's own trace of what ran.
//!
//! Core knows nothing of scenarios or the oracle (those live in `mpa-eval`; the binary joins
//! the two): it offers [`run_task`] and the [`CommandGuard`] hook, and reports what the host
//! did — tool calls with their arguments, results and outcomes, model calls and usage.
//!
//! Budgets: model calls per turn (`max_iterations`), no model retries, no background reviews
//! (they would spend model calls the budget does not see), a wall-clock timeout after which the
//! turn is stopped like a user's stop.
//!
//! Steering: a task may send messages into its own running turn ([`steering`]), after the Nth
//! successful call of an operation; what became of each (queued, applied) is in the outcome.
//!
//! Isolation: every task gets a host of its own on an empty data directory (no memory, skills,
//! history or ledger rows from another run). The caller deletes that directory afterwards, so
//! it normally asks for [`Durability::Throwaway`] stores (no fsync); the code the host runs is
//! the product's either way.

use crate::config::AgentConfig;
use crate::error::Result;
use crate::host::{Host, HostConfig, MoviePilotHostConfig};
use crate::moviepilot::identity::{MintingResolver, MoviePilotUser};
use crate::moviepilot::{AuthMode, MoviePilotConfig};
use crate::tools::{PreparedCall, Tool, ToolContext, ToolMeta, ToolOutput};
use async_trait::async_trait;
use mpa_protocol::{
    Actor, Durability, EffectClass, Event, Outcome, Role, ToolSpec, TurnStatus, Usage,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod steering;

pub use steering::{SteeringInjection, SteeringSeen};

/// The tools the guard wraps.
pub const GUARDED_TOOLS: [&str; 2] = ["execute_command", "browse_webpage"];

/// The scope a receipt belongs to, assigned by the host from the call's context (never from
/// its arguments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardScope {
    /// `conversation`, `subagent` (a child's call, in its own session) or `review`.
    pub kind: String,
    /// The conversation's session id.
    pub task_id: String,
}

/// The evaluation's rules for the guarded tools ([`GUARDED_TOOLS`]) and where their receipts go.
pub trait CommandGuard: Send + Sync {
    /// `Err(reason)`: the call of `tool` is outside the rules and must not run.
    fn check(&self, tool: &str, args: &Value) -> std::result::Result<(), String>;
    /// The result a refused call gets.
    fn refusal(&self, reason: &str) -> Value;
    /// Records one call's receipt (refused ones too).
    fn record(
        &self,
        tool: &str,
        args: &Value,
        scope: GuardScope,
        receipt: Value,
        outcome: Outcome,
        refused: Option<String>,
    );
}

struct Guarded {
    name: &'static str,
    inner: Arc<dyn Tool>,
    guard: Arc<dyn CommandGuard>,
}

struct GuardedCall {
    name: &'static str,
    inner: Box<dyn PreparedCall>,
    args: Value,
    guard: Arc<dyn CommandGuard>,
}

impl Tool for Guarded {
    fn spec(&self) -> ToolSpec {
        self.inner.spec()
    }

    fn meta(&self) -> ToolMeta {
        self.inner.meta()
    }

    fn prepare(&self, args: Value) -> std::result::Result<Box<dyn PreparedCall>, ToolOutput> {
        let inner = self.inner.prepare(args.clone())?;
        Ok(Box::new(GuardedCall {
            name: self.name,
            inner,
            args,
            guard: Arc::clone(&self.guard),
        }))
    }
}

#[async_trait]
impl PreparedCall for GuardedCall {
    fn effect(&self) -> EffectClass {
        self.inner.effect()
    }

    fn requires_admin(&self) -> bool {
        self.inner.requires_admin()
    }

    async fn run(self: Box<Self>, ctx: ToolContext) -> ToolOutput {
        let scope = GuardScope {
            kind: if ctx.review.is_some() {
                "review"
            } else if ctx.agent.origin() == crate::tools::policy::Origin::Subagent {
                "subagent"
            } else {
                "conversation"
            }
            .to_string(),
            task_id: ctx.session_id.clone(),
        };
        let GuardedCall {
            name,
            inner,
            args,
            guard,
        } = *self;
        if let Err(reason) = guard.check(name, &args) {
            let reply = guard.refusal(&reason);
            let out = ToolOutput::json(&reply, Outcome::Failed);
            guard.record(name, &args, scope, reply, Outcome::Failed, Some(reason));
            return out;
        }
        let out = inner.run(ctx).await;
        let receipt = serde_json::from_str(&out.content)
            .unwrap_or_else(|_| Value::String(out.content.clone()));
        guard.record(name, &args, scope, receipt, out.outcome, None);
        out
    }
}

/// The evaluation's `execute_code`: the scenario's program, unchanged, or nothing (spec
/// evaluation.md, `code_readonly_report`: "the tool wrapper refuses any code other than the
/// exact program").
struct ProgramOnly {
    inner: Arc<dyn Tool>,
    program: Option<String>,
}

/// The error of a refused program.
pub const CODE_REJECTED: &str = "evaluation_code_rejected";

impl Tool for ProgramOnly {
    fn spec(&self) -> ToolSpec {
        self.inner.spec()
    }

    fn meta(&self) -> ToolMeta {
        self.inner.meta()
    }

    fn prepare(&self, args: Value) -> std::result::Result<Box<dyn PreparedCall>, ToolOutput> {
        let code = args.get("code").and_then(Value::as_str);
        match (&self.program, code) {
            (Some(p), Some(c)) if p == c => self.inner.prepare(args),
            (None, _) => Err(ToolOutput::failure(
                CODE_REJECTED,
                "Python code is not part of this task; nothing ran",
            )),
            _ => Err(ToolOutput::failure(
                CODE_REJECTED,
                "only the task's program may run, unchanged; nothing ran",
            )),
        }
    }
}

/// One evaluation task.
pub struct EvalTask {
    /// A fresh, empty data directory for this run's host.
    pub data_dir: PathBuf,
    /// Where commands start.
    pub workdir: PathBuf,
    /// The model (LLM_* settings); retries, reviews and the call budget are set here.
    pub agent: AgentConfig,
    pub max_model_calls: u32,
    pub timeout: Duration,
    /// The evaluation world (a fake MoviePilot), and the secret it checks tokens with.
    pub moviepilot_url: String,
    pub moviepilot_secret: String,
    /// The world user the host acts as (a superuser).
    pub moviepilot_user: (String, String),
    pub guard: Arc<dyn CommandGuard>,
    /// The only text the model gets as the user's message.
    pub text: String,
    /// A directory kept across runs where one copy of the MoviePilot operation skills waits
    /// between runs: moved into the run's data directory before the host opens and back after
    /// it closes, and checked against a fresh install before every use (a copy that differs in
    /// any way is deleted and the host installs the skills itself). A fresh host would otherwise
    /// create 45 files and folders per run, which is most of its file-system cost.
    pub skills_template: Option<PathBuf>,
    /// How hard the host's stores sync. The harness deletes each run's data directory, so it
    /// passes `Throwaway` (no fsync) unless asked to measure the product's own setting.
    pub durability: Durability,
    /// Messages sent into the running turn after the Nth successful call of an operation.
    pub steering: Vec<SteeringInjection>,
    /// The only Python program `execute_code` may run (code tasks); `None`: none may.
    pub program: Option<String>,
}

fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Moves the pristine operation skills parked in `template` into `data_dir`, where the host's
/// own install finds them current and writes nothing. A parked copy that differs in any way from
/// a fresh install is deleted instead; `false` then (or when nothing is parked): the host
/// installs the skills itself.
fn lend_skills(template: &Path, data_dir: &Path) -> std::io::Result<bool> {
    use crate::moviepilot::guides;
    let parked = template.join(guides::CATEGORY_DIR);
    match guides::is_pristine(&parked, guides::shipped()) {
        Ok(true) => {}
        Ok(false) => {
            std::fs::remove_dir_all(&parked)?;
            return Ok(false);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    }
    let skills_root = data_dir.join("agent/skills");
    private_dir(&skills_root)?;
    std::fs::rename(&parked, skills_root.join(guides::CATEGORY_DIR))?;
    Ok(true)
}

/// After the host has closed: parks the run's operation skills in `template` for the next run
/// (which checks them again before using them).
fn park_skills(template: &Path, data_dir: &Path) -> std::io::Result<()> {
    use crate::moviepilot::guides;
    private_dir(template)?;
    std::fs::rename(
        data_dir.join("agent/skills").join(guides::CATEGORY_DIR),
        template.join(guides::CATEGORY_DIR),
    )
}

/// One tool call as the host ran it.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalCall {
    pub name: String,
    pub arguments: Value,
    pub outcome: Option<Outcome>,
    /// The result the model read (JSON when it was JSON).
    pub result: Value,
    /// The write ledger answered it from an identical earlier call: nothing was sent.
    pub replayed: bool,
    /// A compaction took the call out of the model's context before the turn ended: only its
    /// name and outcome are known here (`arguments` and `result` are null; the evidence
    /// history keeps them).
    pub compacted: bool,
}

/// What the host did in the task's turn.
#[derive(Debug, Clone)]
pub struct EvalOutcome {
    pub status: TurnStatus,
    pub final_text: String,
    pub calls: Vec<EvalCall>,
    /// Completed model calls (one usage report each).
    pub model_calls: u32,
    pub usage: Usage,
    /// Error events (`code: message`), model failures included.
    pub errors: Vec<String>,
    /// The wall-clock budget ran out and the turn was stopped.
    pub timed_out: bool,
    /// From submitting the turn to its end.
    pub turn_time: Duration,
    /// Opening the host before the turn, and shutting it down after.
    pub setup_time: Duration,
    /// The window the host budgeted every request against (from its budget reports; 0 when no
    /// request was budgeted).
    pub context_window_tokens: u64,
    /// Each compaction the turn's requests reported, in order: the budget's `compaction` entry
    /// (`status` `compacted` with `attempts` — one summariser call each —, or `failed` with its
    /// code). A `compacted` entry is committed once the rebuilt request's model call succeeds.
    pub compactions: Vec<Value>,
    /// Where the time went, step by step in order: lending the parked operation skills, each
    /// step of [`Host::open`](crate::host::Host::open), the actor, `turn` (model time
    /// included), the shutdown, reading the trace back, closing the host, parking the skills.
    pub phases: Vec<(&'static str, Duration)>,
    /// The steering messages sent and what became of them, in order.
    pub steering: Vec<SteeringSeen>,
}

/// The calls of `messages` by call id, in transcript order.
fn live_calls(messages: &[mpa_protocol::Message]) -> Vec<(String, EvalCall)> {
    let mut calls = Vec::new();
    for m in messages.iter().filter(|m| m.role == Role::Assistant) {
        for c in &m.tool_calls {
            let result = messages
                .iter()
                .find(|r| r.role == Role::Tool && r.tool_call_id.as_deref() == Some(&c.id));
            let content = result.map(|r| r.text()).unwrap_or_default();
            let result_json: Value =
                serde_json::from_str(&content).unwrap_or(Value::String(content));
            let call = EvalCall {
                name: c.name.clone(),
                arguments: serde_json::from_str(&c.arguments)
                    .unwrap_or_else(|_| Value::String(c.arguments.clone())),
                outcome: result.and_then(|r| r.outcome),
                replayed: result_json.get("replayed") == Some(&Value::Bool(true)),
                result: result_json,
                compacted: false,
            };
            calls.push((c.id.clone(), call));
        }
    }
    calls
}

/// Every call the turn started, in order: from the final transcript when it is still there,
/// else (compacted away) from the tool events. Matched from the end, since a compaction removes
/// the oldest calls and local servers reuse call ids (`call_0`) across responses.
fn trace(messages: &[mpa_protocol::Message], started: &[ToolSeen]) -> Vec<EvalCall> {
    let mut live = live_calls(messages);
    let mut calls = Vec::with_capacity(started.len());
    for seen in started.iter().rev() {
        match live.iter().rposition(|(id, _)| *id == seen.id) {
            Some(i) => calls.push(live.remove(i).1),
            None => calls.push(EvalCall {
                name: seen.name.clone(),
                arguments: Value::Null,
                outcome: seen.outcome,
                result: Value::Null,
                replayed: false,
                compacted: true,
            }),
        }
    }
    calls.reverse();
    // Calls the events never showed (none expected) keep their transcript order, first.
    let mut all: Vec<EvalCall> = live.into_iter().map(|(_, c)| c).collect();
    all.extend(calls);
    all
}

/// A tool call as the turn's events showed it.
struct ToolSeen {
    id: String,
    name: String,
    outcome: Option<Outcome>,
}

/// Runs the task's turn on a fresh host and returns what the host did.
pub async fn run_task(task: EvalTask) -> Result<EvalOutcome> {
    let setup = Instant::now();
    let mut phases = Vec::with_capacity(12);
    if let Some(template) = &task.skills_template {
        if let Err(e) = lend_skills(template, &task.data_dir) {
            tracing::warn!(error = %e, "parked operation skills not used; the host installs them");
        }
        phases.push(("skills_lend", setup.elapsed()));
    }
    let data_dir = task.data_dir.clone();
    let mut agent_cfg = task.agent;
    agent_cfg.max_iterations = task.max_model_calls.max(1);
    agent_cfg.model.max_retries = 0;
    agent_cfg.memory_review_interval = 0;
    agent_cfg.skill_review_interval = 0;
    let mut cfg = HostConfig::new(task.data_dir, agent_cfg);
    cfg.workdir = task.workdir;
    cfg.terminal_idle_ttl = None;
    cfg.durability = task.durability;
    let (id, name) = task.moviepilot_user;
    let user = MoviePilotUser { id, name };
    let resolver = MintingResolver::new(task.moviepilot_secret.clone(), move |_: &Actor| {
        Some(user.clone())
    });
    cfg.moviepilot = Some(MoviePilotHostConfig {
        config: MoviePilotConfig {
            url: task.moviepilot_url,
            secret_key: Some(task.moviepilot_secret),
            auth: AuthMode::Local,
        },
        identity: Some(Arc::new(resolver)),
        account_clock: None,
    });
    let guard = task.guard;
    let program = task.program;
    let injector = Arc::new(steering::Injector::new(task.steering));
    let trigger = Arc::clone(&injector);
    let host = Host::open_with_tools(cfg, move |registry| {
        for name in GUARDED_TOOLS {
            if let Some(t) = registry.get(name) {
                let wrapped = Guarded {
                    name,
                    inner: Arc::clone(&t.tool),
                    guard: Arc::clone(&guard),
                };
                registry.register(Arc::new(wrapped));
            }
        }
        if let Some(t) = registry.get(crate::tools::execute_code::NAME) {
            registry.register(Arc::new(ProgramOnly {
                inner: Arc::clone(&t.tool),
                program,
            }));
        }
        if !trigger.is_empty()
            && let Some(t) = registry.get(steering::TRIGGER_TOOL)
        {
            registry.register(Arc::new(steering::Triggering {
                inner: Arc::clone(&t.tool),
                injector: trigger,
            }));
        }
    })
    .await?;
    phases.extend_from_slice(host.open_phases());
    let actor_started = Instant::now();
    let actor = host.local_actor("admin", true).await?;
    let agent = host.agent().clone();
    injector.connect(agent.clone());
    let session_id = crate::agent::new_session_id();
    phases.push(("local_actor", actor_started.elapsed()));
    let mut setup_time = setup.elapsed();

    let started = Instant::now();
    let mut events = agent
        .submit(&actor, &session_id, "eval", task.text, Vec::new())
        .await?;
    let mut out = EvalOutcome {
        status: TurnStatus::Failed,
        final_text: String::new(),
        calls: Vec::new(),
        model_calls: 0,
        usage: Usage::default(),
        errors: Vec::new(),
        timed_out: false,
        turn_time: Duration::ZERO,
        setup_time: Duration::ZERO,
        context_window_tokens: 0,
        compactions: Vec::new(),
        phases: Vec::new(),
        steering: Vec::new(),
    };
    let mut started_tools: Vec<ToolSeen> = Vec::new();
    let mut deadline = tokio::time::Instant::now() + task.timeout;
    loop {
        let ev = match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(ev) => ev,
            Err(_) if !out.timed_out => {
                out.timed_out = true;
                agent.stop(&session_id);
                // The stop ends the turn promptly; give its last events a little time.
                deadline = tokio::time::Instant::now() + Duration::from_secs(10);
                continue;
            }
            Err(_) => None,
        };
        let Some(ev) = ev else { break };
        match ev {
            Event::Usage { usage } => {
                out.model_calls += 1;
                out.usage.add(&usage);
            }
            Event::ToolStarted { tool_id, name, .. } => started_tools.push(ToolSeen {
                id: tool_id,
                name,
                outcome: None,
            }),
            Event::ToolFinished {
                tool_id, outcome, ..
            } => {
                if let Some(t) = started_tools.iter_mut().rfind(|t| t.id == tool_id) {
                    t.outcome = Some(outcome);
                }
            }
            Event::Budget { budget } => {
                out.context_window_tokens = budget.context_window_tokens;
                if let Some(c) = budget.compaction {
                    out.compactions.push(c);
                }
            }
            Event::Error { code, message, .. } => out.errors.push(format!("{code}: {message}")),
            Event::Steering {
                status, message_id, ..
            } => injector.record(status, &message_id),
            Event::TurnEnded {
                status, final_text, ..
            } => {
                out.status = status;
                out.final_text = final_text;
                break;
            }
            _ => {}
        }
    }
    out.turn_time = started.elapsed();
    phases.push(("turn", out.turn_time));
    let teardown = Instant::now();
    agent.shutdown().await;
    phases.push(("shutdown", teardown.elapsed()));
    let read = Instant::now();
    if let Ok(chat) = agent.chat_for(&actor, &session_id).await {
        out.calls = trace(&chat.agent_messages, &started_tools);
    }
    phases.push(("trace_read", read.elapsed()));
    drop(agent);
    let close = Instant::now();
    drop(host);
    phases.push(("close", close.elapsed()));
    if let Some(template) = &task.skills_template {
        let park = Instant::now();
        if let Err(e) = park_skills(template, &data_dir) {
            tracing::debug!(error = %e, "operation skills not parked for the next run");
        }
        phases.push(("skills_park", park.elapsed()));
    }
    setup_time += teardown.elapsed();
    out.setup_time = setup_time;
    out.steering = std::mem::take(&mut *crate::sync::lock(&injector.seen));
    out.phases = phases;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpa_protocol::{Message, ToolCall};

    fn call(id: &str, page: u64) -> Message {
        Message::assistant(
            "",
            vec![ToolCall {
                id: id.into(),
                name: "moviepilot_api".into(),
                arguments: format!(r#"{{"page": {page}}}"#),
            }],
        )
    }

    fn seen(id: &str) -> ToolSeen {
        ToolSeen {
            id: id.into(),
            name: "moviepilot_api".into(),
            outcome: Some(Outcome::Succeeded),
        }
    }

    #[test]
    fn compacted_calls_stay_in_the_trace_even_when_a_server_reuses_call_ids() {
        // Pages 1 and 2 were compacted away; every response numbered its call `call_0`.
        let messages = vec![
            Message::user("summary"),
            call("call_0", 3),
            Message::tool("call_0", "moviepilot_api", "{}", Outcome::Succeeded),
        ];
        let started = [seen("call_0"), seen("call_0"), seen("call_0")];
        let t = trace(&messages, &started);
        let shown: Vec<(bool, Value)> = t
            .iter()
            .map(|c| (c.compacted, c.arguments["page"].clone()))
            .collect();
        assert_eq!(
            shown,
            [
                (true, Value::Null),
                (true, Value::Null),
                (false, Value::from(3))
            ]
        );
        assert!(t.iter().all(|c| c.outcome == Some(Outcome::Succeeded)));
    }
}
