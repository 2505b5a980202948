//! One scenario run: the world from the scenario, the model (scripted from a trajectory, or a
//! live endpoint), the subject (a host, given by the caller through [`Subject`]), then the
//! oracle over the world ledger, the states and the host trace, and the JSON report.

use crate::delivery::Delivery;
use crate::guard::CommandGuard;
use crate::oracle::{self, Evidence, Metrics, TraceCall, Violation};
use crate::scenario::Scenario;
use crate::scripted::{SCRIPTED_MODEL, ScriptedModel};
use crate::server::{FakeConfig, FakeMoviePilot};
use crate::state::User;
use crate::tap::ModelTap;
use crate::trajectory::Trajectory;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The world user the subject acts as.
pub const EVAL_USER: (&str, &str) = ("1", "admin");

/// The model endpoint the subject talks to.
#[derive(Clone)]
pub struct ModelEndpoint {
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
}

impl std::fmt::Debug for ModelEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelEndpoint")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// Live-mode limits (replay uses them too, generously).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budgets {
    pub max_model_calls: u32,
    /// `None`: the host's default for the model.
    pub max_output_tokens: Option<u32>,
    pub timeout_seconds: u64,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            max_model_calls: 12,
            max_output_tokens: Some(8192),
            timeout_seconds: 300,
        }
    }
}

/// How the model is driven.
#[derive(Debug, Clone)]
pub enum Mode {
    Replay(Box<Trajectory>),
    Live(ModelEndpoint),
}

/// What the subject gets for one run.
pub struct SubjectRun {
    pub task_text: String,
    pub moviepilot_url: String,
    pub moviepilot_secret: String,
    pub moviepilot_user: (String, String),
    pub model: ModelEndpoint,
    pub budgets: Budgets,
    pub guard: Arc<CommandGuard>,
    /// An empty data directory for the host.
    pub data_dir: PathBuf,
    /// Where commands start.
    pub workdir: PathBuf,
    /// The model's context window when the run fixes it (a replay trajectory's
    /// `context_window_tokens`); `None`: the host's configuration.
    pub context_window_tokens: Option<u64>,
    /// Messages to send into the running turn (the scenario's `steering`).
    pub steering: Vec<crate::scenario::SteeringInjection>,
    /// The only Python program `execute_code` may run (code tasks); `None`: none may.
    pub program: Option<String>,
}

/// Usage as the host saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub total: u64,
}

/// What the subject reports back: the host's own trace.
#[derive(Debug, Clone, Default)]
pub struct SubjectTrace {
    pub turn_status: String,
    pub final_text: String,
    pub calls: Vec<TraceCall>,
    pub model_calls: u32,
    pub tokens: Tokens,
    /// Every model call reported its usage (none estimated).
    pub usage_complete: bool,
    pub errors: Vec<String>,
    pub timed_out: bool,
    /// Host time outside the turn (opening and closing it).
    pub setup: Duration,
    pub turn: Duration,
    /// The window the host budgeted the requests against (0: no request was budgeted).
    pub context_window_tokens: u64,
    /// The host's compaction reports, one per request that compacted (or failed to).
    pub compactions: Vec<Value>,
    /// The host's own steps, in order (named by the subject), for the report.
    pub phases: Vec<(String, Duration)>,
    /// The host's stores synced as the product's do; otherwise the run's throwaway data
    /// directory was written without fsync.
    pub durable: bool,
    /// What the host said of the steering messages it was sent, in order (`None`: the subject
    /// does not report steering).
    pub steering: Option<Vec<crate::steering::HostSteering>>,
}

/// One step of the host's run as the report lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseTime {
    pub phase: String,
    pub ms: f64,
}

/// What the host did with its context window in the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextReport {
    /// The window every request was budgeted against.
    pub window_tokens: u64,
    /// Compactions the host made (a summary replaced older messages).
    pub compactions: usize,
    /// Compactions that did not succeed (the original context was kept).
    pub failed_compactions: usize,
    /// Summariser model calls the host reported (not counted in `model_calls` nor `tokens`).
    pub summariser_calls: u64,
    /// Replay: summariser requests the scripted model answered (`null` live).
    pub scripted_summariser_requests: Option<usize>,
    /// The host's compaction reports as it gave them (tokens before and after, messages
    /// summarised, attempts; or the failure code).
    pub reports: Vec<Value>,
}

impl ContextReport {
    fn of(trace: &SubjectTrace, scripted: Option<usize>) -> Self {
        let status = |c: &Value| c.get("status").and_then(Value::as_str).map(str::to_string);
        let compacted = trace
            .compactions
            .iter()
            .filter(|c| status(c).as_deref() == Some("compacted"));
        ContextReport {
            window_tokens: trace.context_window_tokens,
            compactions: compacted.clone().count(),
            failed_compactions: trace
                .compactions
                .iter()
                .filter(|c| status(c).as_deref() == Some("failed"))
                .count(),
            summariser_calls: compacted
                .filter_map(|c| c.get("attempts").and_then(Value::as_u64))
                .sum(),
            scripted_summariser_requests: scripted,
            reports: trace.compactions.clone(),
        }
    }
}

/// The system under evaluation: runs the task through a host and returns its trace.
pub trait Subject: Sync {
    fn run(&self, run: SubjectRun) -> impl Future<Output = Result<SubjectTrace, String>> + Send;

    /// The system message the host's compaction opens its summariser requests with: a replay's
    /// scripted model answers those with the trajectory's summary.
    fn summary_prompt(&self) -> &str;

    /// The system message the host's subagents open their requests with: a replay's scripted
    /// model answers those from the trajectory's `subagents` (empty: the host has none).
    fn subagent_prompt(&self) -> &str {
        ""
    }
}

/// One attempt as the report lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptSummary {
    pub sequence: u64,
    pub operation_id: Option<String>,
    pub method: String,
    pub outcome: String,
    pub duplicate_attempt: bool,
    pub effects: usize,
    pub observations: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
}

/// The JSON report of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub scenario: String,
    pub scenario_sha256: String,
    pub harness_version: String,
    pub mode: String,
    pub evidence_kind: String,
    pub intelligence_evaluated: bool,
    pub model: String,
    /// The name this run is compared under (`--label`; `null`: the model's name).
    #[serde(default)]
    pub label: Option<String>,
    /// 1-based run number (with `--repeat`).
    pub run: u32,
    pub passed: bool,
    pub failure_codes: Vec<String>,
    pub violations: Vec<Violation>,
    pub answer: Value,
    pub final_text: String,
    pub turn_status: String,
    pub model_calls: u32,
    /// `null` in replay (a script has no tokens).
    pub tokens: Option<Tokens>,
    pub usage_complete: bool,
    pub budgets: Budgets,
    pub timed_out: bool,
    pub elapsed_ms: u64,
    /// Host time for the run without the model's (the scripted model's serving time in replay,
    /// the live endpoint's answer time seen through the tap, subtracted; tool run time is
    /// included; the oracle's time is not).
    pub host_overhead_ms: Option<f64>,
    /// The oracle's own time judging the run (evidence assembly included).
    #[serde(default)]
    pub oracle_ms: f64,
    /// Requests the model received (the host's summariser requests included).
    #[serde(default)]
    pub model_requests: usize,
    /// Opening and closing the host (outside the turn; closing includes dropping it, when its
    /// stores check-point).
    pub host_setup_ms: f64,
    /// The turn itself, model time included.
    pub turn_ms: f64,
    /// Where the host's time went, step by step (opening, the turn, closing), as the subject
    /// timed it.
    #[serde(default)]
    pub host_phases_ms: Vec<PhaseTime>,
    /// Whether the host's stores synced as the product's do (`--durable-host`); by default a
    /// run's data directory is thrown away and written without fsync, and the times above
    /// leave that cost out.
    #[serde(default)]
    pub host_durable: bool,
    pub metrics: Metrics,
    /// The context window, compactions and summariser calls.
    pub context: ContextReport,
    /// Every tool call of the turn in order; a call a compaction took out of the model's
    /// context is `compacted: true` with null arguments and result.
    pub tool_trace: Vec<TraceCall>,
    pub world_attempts: Vec<AttemptSummary>,
    pub tool_events: Vec<crate::ledger::ToolEvent>,
    pub errors: Vec<String>,
    /// The steering evidence the oracle read (queued, and applied as the model requests show
    /// it); empty when the scenario sends none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steering: Vec<oracle::SteeringEvent>,
}

fn secret() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let seed = format!("{}:{}:{n}", std::process::id(), now.as_nanos());
    hex::encode(Sha256::digest(seed.as_bytes()))
}

fn summary(a: &crate::ledger::Attempt) -> AttemptSummary {
    AttemptSummary {
        sequence: a.sequence,
        operation_id: a.operation_id.clone(),
        method: a.method.clone(),
        outcome: a.outcome.as_str().to_string(),
        duplicate_attempt: a.duplicate_attempt,
        effects: a.effects.len(),
        observations: a.observations.len(),
        refusal: a.refusal.as_ref().map(|r| r.message.clone()),
    }
}

/// Runs `scenario` once. `Err` is a harness failure (the world or the model could not start),
/// never an oracle verdict.
pub async fn run_scenario<S: Subject>(
    subject: &S,
    scenario: &Scenario,
    mode: &Mode,
    budgets: Budgets,
    run: u32,
) -> Result<RunReport, String> {
    let started = Instant::now();
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    let workdir = dir.path().join("command-workspace");
    std::fs::create_dir_all(&workdir)
        .map_err(|e| format!("cannot make {}: {e}", workdir.display()))?;
    let mut state = scenario.world.state.clone();
    if state.users.is_empty() {
        state.users.push(User {
            id: 1,
            name: EVAL_USER.1.to_string(),
            password: secret(),
            super_user: true,
            is_active: true,
            avatar: None,
            level: 2,
            permissions: serde_json::Map::new(),
        });
    }
    let key = secret();
    let mut config = FakeConfig::new(key.clone());
    config.faults = scenario.world.faults.clone();
    config.restrictions = scenario.world.restrictions.clone();
    config.duplicate_subscription = scenario.world.duplicate_subscription;
    config.next_ids = scenario.world.next_ids.clone();
    let world = FakeMoviePilot::start(config, state)
        .await
        .map_err(|e| e.to_string())?;
    // A browser task's page is served for this run; the model is told its real address.
    let page = match scenario.task.contract {
        crate::scenario::Contract::Browser => Some(
            crate::page::PageServer::start()
                .await
                .map_err(|e| format!("cannot start the page server: {e}"))?,
        ),
        _ => None,
    };
    let task_text = match &page {
        Some(p) => {
            let mut s = scenario.clone();
            s.task.url = Some(p.url().to_string());
            s.model_input()
        }
        None => scenario.model_input(),
    };
    let guard = Arc::new(
        CommandGuard::new(
            scenario.tools.execute_command.clone(),
            workdir.display().to_string(),
            world.recorder(),
        )
        .with_page(page.as_ref().map(|p| p.url().to_string())),
    );
    let context_window_tokens = match mode {
        Mode::Replay(t) => t.context_window_tokens,
        Mode::Live(_) => None,
    };
    let (scripted, tap, endpoint) = match mode {
        Mode::Replay(t) => {
            let model = ScriptedModel::start(t.script()?, subject.summary_prompt())
                .await
                .map_err(|e| format!("cannot start the scripted model: {e}"))?;
            model.set_subagent_prompt(subject.subagent_prompt());
            let endpoint = ModelEndpoint {
                base_url: model.base_url(),
                api_key: None,
                model: SCRIPTED_MODEL.to_string(),
            };
            (Some(model), None, endpoint)
        }
        Mode::Live(endpoint) => {
            // What the model receives is evidence: the tap records it on the way.
            let tap = ModelTap::start(&endpoint.base_url)
                .await
                .map_err(|e| format!("cannot start the model tap: {e}"))?;
            let through = ModelEndpoint {
                base_url: tap.base_url(),
                ..endpoint.clone()
            };
            (None, Some(tap), through)
        }
    };
    let model_name = endpoint.model.clone();
    let trace = subject
        .run(SubjectRun {
            task_text,
            moviepilot_url: world.url(),
            moviepilot_secret: key,
            moviepilot_user: (EVAL_USER.0.to_string(), EVAL_USER.1.to_string()),
            model: endpoint,
            budgets,
            guard,
            data_dir: dir.path().join("data"),
            workdir,
            context_window_tokens,
            steering: scenario.steering.clone(),
            program: scenario.task.program.clone(),
        })
        .await?;
    let initial = world.initial_snapshot();
    let final_state = world.snapshot();
    let ledger = world.world_ledger();
    world.shutdown().await;
    let requests = match (&scripted, &tap) {
        (Some(model), _) => model.requests(),
        (None, Some(tap)) => tap.requests(),
        (None, None) => Vec::new(),
    };
    let judging = Instant::now();
    let delivery = Delivery::from_requests(&requests, subject.summary_prompt());
    // Replay judges steering by the scripted model's recorded requests; live takes the host's word.
    let steering = trace.steering.as_deref().map(|host| {
        crate::steering::evidence(host, scripted.is_some().then_some(requests.as_slice()))
    });
    let verdict = oracle::evaluate(&Evidence {
        scenario,
        initial: &initial,
        final_state: &final_state,
        ledger: &ledger,
        delivery: &delivery,
        trace: &trace.calls,
        final_text: &trace.final_text,
        steering: steering.as_deref(),
    });
    let oracle_ms = judging.elapsed().as_secs_f64() * 1000.0;
    let replay = matches!(mode, Mode::Replay(_));
    let context = ContextReport::of(
        &trace,
        scripted.as_ref().map(ScriptedModel::summariser_requests),
    );
    let model_busy = match (&scripted, &tap) {
        (Some(model), _) => Some(model.busy()),
        (None, Some(tap)) => Some(tap.busy()),
        (None, None) => None,
    };
    let host_overhead_ms = model_busy
        .map(|busy| (trace.setup + trace.turn.saturating_sub(busy)).as_secs_f64() * 1000.0);
    Ok(RunReport {
        scenario: scenario.id.clone(),
        scenario_sha256: scenario.sha256(),
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        mode: if replay { "replay" } else { "live" }.to_string(),
        evidence_kind: if replay {
            "scripted_replay"
        } else {
            "live_model"
        }
        .to_string(),
        intelligence_evaluated: !replay,
        model: model_name,
        label: None,
        run,
        passed: verdict.passed,
        failure_codes: verdict.failure_codes,
        violations: verdict.violations,
        answer: verdict.answer,
        final_text: trace.final_text,
        turn_status: trace.turn_status,
        model_calls: trace.model_calls,
        tokens: (!replay).then_some(trace.tokens),
        usage_complete: !replay && trace.usage_complete,
        budgets,
        timed_out: trace.timed_out,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        host_overhead_ms,
        oracle_ms,
        model_requests: requests.len(),
        host_setup_ms: trace.setup.as_secs_f64() * 1000.0,
        turn_ms: trace.turn.as_secs_f64() * 1000.0,
        host_phases_ms: trace
            .phases
            .iter()
            .map(|(phase, d)| PhaseTime {
                phase: phase.clone(),
                ms: d.as_secs_f64() * 1000.0,
            })
            .collect(),
        host_durable: trace.durable,
        metrics: verdict.metrics,
        context,
        tool_trace: trace.calls,
        world_attempts: ledger.attempts.iter().map(summary).collect(),
        tool_events: ledger.tool_events,
        errors: trace.errors,
        steering: steering.unwrap_or_default(),
    })
}

/// Pass rate and the failure codes seen, over repeated runs of one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    pub scenario: String,
    pub runs: u32,
    pub passed: u32,
    pub pass_rate: f64,
    /// Code → runs it appeared in.
    pub failure_codes: std::collections::BTreeMap<String, u32>,
}

pub fn aggregate(scenario: &str, reports: &[RunReport]) -> Aggregate {
    let mut codes = std::collections::BTreeMap::new();
    for r in reports {
        for c in &r.failure_codes {
            *codes.entry(c.clone()).or_insert(0u32) += 1;
        }
    }
    let runs = u32::try_from(reports.len()).unwrap_or(u32::MAX);
    let passed = u32::try_from(reports.iter().filter(|r| r.passed).count()).unwrap_or(u32::MAX);
    Aggregate {
        scenario: scenario.to_string(),
        runs,
        passed,
        pass_rate: if runs == 0 {
            0.0
        } else {
            f64::from(passed) / f64::from(runs)
        },
        failure_codes: codes,
    }
}

/// The summary file `--output` gets beside the per-run reports.
pub fn summary_json(aggregates: &[Aggregate], label: Option<&str>) -> Value {
    json!({"harness_version": env!("CARGO_PKG_VERSION"), "label": label, "scenarios": aggregates})
}
