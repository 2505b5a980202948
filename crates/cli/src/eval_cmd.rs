//! `mpagent eval list|run|compare` and `mpagent dev fake-moviepilot`: the evaluation harness. The world,
//! scenarios, trajectories, oracle and reports are `mpa-eval`'s; the host under evaluation is
//! `mpa_core::eval::run_task` (a fresh host per run). This file only joins the two and prints.
//!
//! Exit codes of `eval run`: 0 every run passed, 1 an oracle failure (or a run that could not
//! finish), 2 invalid input (unreadable scenario or trajectory, unknown id, a scenario whose
//! capability the host lacks, conflicting flags). `eval compare`: 0, or 2 for a folder that
//! cannot be read or holds no reports.

use crate::config::Config;
use clap::{Args, Subcommand};
use mpa_eval::runner::{
    self, Aggregate, Budgets, Mode, ModelEndpoint, RunReport, Subject, SubjectRun, SubjectTrace,
    Tokens,
};
use mpa_eval::scenario::{self, Scenario};
use mpa_eval::trajectory::Trajectory;
use mpa_protocol::Outcome;
use serde_json::Value;
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(subcommand)]
    command: EvalCommand,
}

#[derive(Debug, Subcommand)]
enum EvalCommand {
    /// List the scenarios: runnable now, or `needs: <capability>`.
    List(ListArgs),
    /// Run scenarios against a fresh host and the fake MoviePilot, judged by the oracle.
    Run(RunArgs),
    /// One table over the run reports in report folders: pass rate, failure codes, false
    /// completion claims, model calls, tokens and host overhead per model (or label) and
    /// scenario.
    Compare(CompareArgs),
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// Report folders (`eval run --output` folders or their parents; searched recursively).
    #[arg(required = true)]
    reports: Vec<PathBuf>,
    /// Where `comparison.md` and `comparison.json` go (a new folder inside it).
    #[arg(long, default_value = "eval-reports")]
    output: PathBuf,
}

#[derive(Debug, Args)]
struct ListArgs {
    /// Where the scenario files are.
    #[arg(long, env = "MPA_EVAL_SCENARIOS", default_value = "eval/scenarios")]
    scenarios: PathBuf,
    /// One JSON object per line instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Scenario files, or ids of files in --scenarios.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    scenarios_to_run: Vec<String>,
    /// Every runnable scenario in --scenarios (those needing a capability this host lacks are
    /// listed and skipped).
    #[arg(long, conflicts_with = "replay")]
    all: bool,
    /// The name the reports are compared under (`eval compare`); default: the model's name.
    #[arg(long)]
    label: Option<String>,
    /// Offline: a scripted model answers from this trajectory (through the real host).
    #[arg(long, conflicts_with = "live")]
    replay: Option<PathBuf>,
    /// The configured OpenAI-compatible model (LLM_BASE_URL, LLM_MODEL, LLM_API_KEY).
    #[arg(long)]
    live: bool,
    /// Runs per scenario (models are not deterministic; every failure is kept).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// Model calls allowed per run (live budget).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=256))]
    max_model_calls: u32,
    /// Tokens one model answer may have (live budget).
    #[arg(long, default_value_t = 8192)]
    max_output_tokens: u32,
    /// Wall-clock seconds per run before the turn is stopped.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(5..=900))]
    timeout_seconds: u64,
    /// Where the JSON reports go (a new folder per invocation inside it).
    #[arg(long, default_value = "eval-reports")]
    output: PathBuf,
    /// Open each run's host with the product's durability (its stores fsync as in `serve`)
    /// instead of skipping fsync on the run's throwaway data directory; for measuring.
    #[arg(long)]
    durable_host: bool,
    #[arg(long, env = "MPA_EVAL_SCENARIOS", default_value = "eval/scenarios")]
    scenarios: PathBuf,
}

#[derive(Debug, Args)]
pub struct DevArgs {
    #[command(subcommand)]
    command: DevCommand,
}

#[derive(Debug, Subcommand)]
enum DevCommand {
    /// Serve the fake MoviePilot from a world file on --listen until Ctrl-C.
    FakeMoviepilot(FakeArgs),
}

#[derive(Debug, Args)]
struct FakeArgs {
    /// The world file (see eval/worlds/README.md).
    #[arg(long)]
    state: PathBuf,
}

/// Invalid input: printed, exit 2.
fn invalid(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

pub async fn dev(args: DevArgs, config: &Config) -> anyhow::Result<ExitCode> {
    let DevCommand::FakeMoviepilot(a) = args.command;
    let (cfg, state) = match mpa_eval::load_state_file(&a.state, config.listen) {
        Ok(v) => v,
        Err(e) => return Ok(invalid(e)),
    };
    let handle = mpa_eval::FakeMoviePilot::start(cfg, state).await?;
    eprintln!(
        "fake MoviePilot on {} (world {}); Ctrl-C stops it",
        handle.url(),
        a.state.display()
    );
    tokio::signal::ctrl_c().await?;
    handle.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

pub async fn run(args: EvalArgs, config: &Config) -> anyhow::Result<ExitCode> {
    match args.command {
        EvalCommand::List(a) => list(a),
        EvalCommand::Run(a) => run_scenarios(a, config).await,
        EvalCommand::Compare(a) => compare(a),
    }
}

fn compare(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let runs = match mpa_eval::compare::load(&args.reports) {
        Ok(r) => r,
        Err(e) => return Ok(invalid(e)),
    };
    let sources: Vec<String> = args
        .reports
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let table = mpa_eval::compare::compare(&sources, &runs);
    let markdown = mpa_eval::compare::markdown(&table);
    let dir = report_dir(&args.output, "compare-")?;
    for (name, bytes) in [
        ("comparison.md", markdown.clone().into_bytes()),
        ("comparison.json", serde_json::to_vec_pretty(&table)?),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, bytes)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    let mut out = std::io::stdout().lock();
    write!(out, "{markdown}")?;
    writeln!(out, "comparison: {}", dir.display())?;
    Ok(ExitCode::SUCCESS)
}

/// The scenarios `--all` runs: every file in `dir` this host can run; the others are named on
/// stderr.
fn all_runnable(dir: &Path) -> Result<Vec<Scenario>, String> {
    let mut out = Vec::new();
    for path in scenario::scenario_files(dir)? {
        let s = Scenario::load(&path)?;
        let missing = s.missing_capabilities();
        if missing.is_empty() {
            out.push(s);
        } else {
            eprintln!("skipped {} (needs: {})", s.id, missing.join(", "));
        }
    }
    if out.is_empty() {
        return Err(format!("{}: no runnable scenario", dir.display()));
    }
    Ok(out)
}

fn status_of(s: &Scenario) -> String {
    let missing = s.missing_capabilities();
    if missing.is_empty() {
        "runnable".to_string()
    } else {
        format!("needs: {}", missing.join(", "))
    }
}

fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let files = match scenario::scenario_files(&args.scenarios) {
        Ok(f) => f,
        Err(e) => return Ok(invalid(e)),
    };
    let mut out = std::io::stdout().lock();
    if !args.json {
        writeln!(
            out,
            "{:<28} {:<20} {:<9} title",
            "scenario", "status", "contract"
        )?;
    }
    for path in files {
        let s = match Scenario::load(&path) {
            Ok(s) => s,
            Err(e) => return Ok(invalid(e)),
        };
        let contract = serde_json::to_value(s.task.contract)?;
        let contract = contract.as_str().unwrap_or_default();
        if args.json {
            let line = serde_json::json!({"id": s.id, "status": status_of(&s),
                "needs": s.missing_capabilities(), "contract": contract, "title": s.title,
                "file": path.display().to_string()});
            writeln!(out, "{line}")?;
        } else {
            writeln!(
                out,
                "{:<28} {:<26} {:<9} {}",
                s.id,
                status_of(&s),
                contract,
                s.title
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn resolve(arg: &str, dir: &Path) -> PathBuf {
    let p = PathBuf::from(arg);
    if p.exists() || arg.ends_with(".json") || arg.contains('/') {
        p
    } else {
        dir.join(format!("{arg}.json"))
    }
}

/// The host under evaluation: a fresh `mpa-core` host per run.
struct HostSubject {
    agent: mpa_core::AgentConfig,
    /// Where one copy of the operation skills waits between runs (checked before each run
    /// uses it; see `EvalTask::skills_template`).
    skills: tempfile::TempDir,
    /// Each run's data directory is deleted afterwards: `Throwaway` unless `--durable-host`.
    durability: mpa_protocol::Durability,
}

struct GuardAdapter(Arc<mpa_eval::guard::CommandGuard>);

impl mpa_core::eval::CommandGuard for GuardAdapter {
    fn check(&self, tool: &str, args: &Value) -> Result<(), String> {
        self.0.check_tool(tool, args)
    }

    fn refusal(&self, reason: &str) -> Value {
        mpa_eval::guard::CommandGuard::refusal(reason)
    }

    fn record(
        &self,
        tool: &str,
        args: &Value,
        scope: mpa_core::eval::GuardScope,
        receipt: Value,
        outcome: Outcome,
        refused: Option<String>,
    ) {
        let scope = mpa_eval::ToolScope {
            kind: scope.kind,
            task_id: scope.task_id,
        };
        self.0
            .record_tool(tool, args, scope, receipt, outcome, refused);
    }
}

impl Subject for HostSubject {
    fn summary_prompt(&self) -> &str {
        mpa_core::SUMMARY_PROMPT
    }

    fn subagent_prompt(&self) -> &str {
        mpa_core::subagent::SYSTEM_PROMPT
    }

    fn run(&self, run: SubjectRun) -> impl Future<Output = Result<SubjectTrace, String>> + Send {
        let mut agent = self.agent.clone();
        let skills = self.skills.path().to_path_buf();
        let durability = self.durability;
        async move {
            agent.model.base_url = run.model.base_url;
            agent.model.api_key = run.model.api_key;
            agent.model.model = run.model.model;
            agent.model.max_output_tokens = run.budgets.max_output_tokens;
            // The scripted model is in no catalogue: its window is the configured one.
            if let Some(window) = run.context_window_tokens {
                agent.max_context_tokens_k = window.div_ceil(1000);
            }
            let out = mpa_core::eval::run_task(mpa_core::eval::EvalTask {
                data_dir: run.data_dir,
                workdir: run.workdir,
                agent,
                max_model_calls: run.budgets.max_model_calls,
                timeout: Duration::from_secs(run.budgets.timeout_seconds),
                moviepilot_url: run.moviepilot_url,
                moviepilot_secret: run.moviepilot_secret,
                moviepilot_user: run.moviepilot_user,
                guard: Arc::new(GuardAdapter(run.guard)),
                text: run.task_text,
                skills_template: Some(skills),
                program: run.program,
                durability,
                steering: run
                    .steering
                    .into_iter()
                    .map(|s| mpa_core::eval::SteeringInjection {
                        after_operation: s.after_operation,
                        nth: s.nth,
                        message: s.message,
                    })
                    .collect(),
            })
            .await
            .map_err(|e| format!("the host could not run the task: {e}"))?;
            Ok(SubjectTrace {
                turn_status: out.status.as_str().to_string(),
                final_text: out.final_text,
                calls: out
                    .calls
                    .into_iter()
                    .map(|c| mpa_eval::oracle::TraceCall {
                        name: c.name,
                        arguments: c.arguments,
                        outcome: c.outcome.map(|o| o.as_str()).unwrap_or("none").to_string(),
                        replayed: c.replayed,
                        compacted: c.compacted,
                        result: c.result,
                    })
                    .collect(),
                model_calls: out.model_calls,
                tokens: Tokens {
                    input: out.usage.input_tokens,
                    output: out.usage.output_tokens,
                    total: out.usage.total_tokens,
                },
                usage_complete: !out.usage.estimated && out.model_calls > 0,
                errors: out.errors,
                timed_out: out.timed_out,
                setup: out.setup_time,
                turn: out.turn_time,
                context_window_tokens: out.context_window_tokens,
                compactions: out.compactions,
                phases: out
                    .phases
                    .into_iter()
                    .map(|(phase, d)| (phase.to_string(), d))
                    .collect(),
                durable: durability == mpa_protocol::Durability::Durable,
                steering: Some(
                    out.steering
                        .into_iter()
                        .map(|s| mpa_eval::steering::HostSteering {
                            kind: s.kind,
                            message_id: s.message_id,
                        })
                        .collect(),
                ),
            })
        }
    }
}

fn progress(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs {msg}") {
        bar.set_style(style);
    }
    bar
}

/// A line above the bar; plain stderr when the bar is not drawn (not a terminal).
fn say(bar: &indicatif::ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

fn report_dir(root: &Path, prefix: &str) -> anyhow::Result<PathBuf> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let dir = root.join(format!("{prefix}{stamp}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

fn short_codes(codes: &std::collections::BTreeMap<String, u32>) -> String {
    if codes.is_empty() {
        return "-".into();
    }
    codes
        .iter()
        .map(|(c, n)| {
            if *n > 1 {
                format!("{c}×{n}")
            } else {
                c.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

async fn run_scenarios(args: RunArgs, config: &Config) -> anyhow::Result<ExitCode> {
    let mode = match (&args.replay, args.live) {
        (Some(path), false) => match Trajectory::load(path) {
            Ok(t) => Mode::Replay(Box::new(t)),
            Err(e) => return Ok(invalid(e)),
        },
        (None, true) => Mode::Live(ModelEndpoint {
            base_url: config.llm_base_url.clone(),
            api_key: config.llm_api_key.clone().filter(|k| !k.is_empty()),
            model: config.llm_model.clone(),
        }),
        _ => return Ok(invalid("give exactly one of --replay TRAJECTORY or --live")),
    };
    let mut scenarios = Vec::new();
    if args.all {
        match all_runnable(&args.scenarios) {
            Ok(all) => scenarios = all,
            Err(e) => return Ok(invalid(e)),
        }
    }
    for arg in &args.scenarios_to_run {
        let s = match Scenario::load(&resolve(arg, &args.scenarios)) {
            Ok(s) => s,
            Err(e) => return Ok(invalid(e)),
        };
        let missing = s.missing_capabilities();
        if !missing.is_empty() {
            return Ok(invalid(format!(
                "{} cannot run yet: needs: {} (this host does not have it)",
                s.id,
                missing.join(", ")
            )));
        }
        scenarios.push(s);
    }
    let budgets = Budgets {
        max_model_calls: args.max_model_calls,
        max_output_tokens: Some(args.max_output_tokens),
        timeout_seconds: args.timeout_seconds,
    };
    let dir = report_dir(&args.output, "")?;
    let subject = HostSubject {
        agent: config.agent_config(),
        skills: tempfile::tempdir()?,
        durability: if args.durable_host {
            mpa_protocol::Durability::Durable
        } else {
            mpa_protocol::Durability::Throwaway
        },
    };
    let total = u64::from(args.repeat) * scenarios.len() as u64;
    let bar = progress(total);
    let mut aggregates: Vec<Aggregate> = Vec::new();
    let mut rows: Vec<(String, u64, u32, usize)> = Vec::new();
    let mut harness_failed = false;
    for s in &scenarios {
        let mut reports: Vec<RunReport> = Vec::new();
        let mut elapsed = 0u64;
        let mut calls = 0u32;
        let mut host_calls = 0usize;
        for n in 1..=args.repeat {
            bar.set_message(format!("{} #{n}", s.id));
            match runner::run_scenario(&subject, s, &mode, budgets, n).await {
                Ok(mut report) => {
                    report.label = args.label.clone();
                    let path = dir.join(format!("{}-{n}.json", s.id));
                    std::fs::write(&path, serde_json::to_vec_pretty(&report)?)
                        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
                    say(
                        &bar,
                        format!(
                            "{} run {n}: {} ({} ms){}",
                            s.id,
                            if report.passed { "PASS" } else { "FAIL" },
                            report.elapsed_ms,
                            if report.failure_codes.is_empty() {
                                String::new()
                            } else {
                                format!(" {}", report.failure_codes.join(", "))
                            }
                        ),
                    );
                    elapsed += report.elapsed_ms;
                    calls += report.model_calls;
                    host_calls += report.metrics.host_tool_calls;
                    reports.push(report);
                }
                Err(e) => {
                    harness_failed = true;
                    say(&bar, format!("{} run {n}: ERROR {e}", s.id));
                }
            }
            bar.inc(1);
        }
        aggregates.push(runner::aggregate(&s.id, &reports));
        rows.push((s.id.clone(), elapsed, calls, host_calls));
    }
    bar.finish_and_clear();
    let summary = dir.join("summary.json");
    std::fs::write(
        &summary,
        serde_json::to_vec_pretty(&runner::summary_json(&aggregates, args.label.as_deref()))?,
    )
    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", summary.display()))?;
    let mode_name = match mode {
        Mode::Replay(_) => "replay",
        Mode::Live(_) => "live",
    };
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<24} {:<6} {:>4} {:>6} {:>5} {:>6} {:>6} {:>8}  failure codes",
        "scenario", "mode", "runs", "passed", "rate", "model", "tools", "ms"
    )?;
    for (agg, (_, ms, calls, host_calls)) in aggregates.iter().zip(&rows) {
        writeln!(
            out,
            "{:<24} {:<6} {:>4} {:>6} {:>4.0}% {:>6} {:>6} {:>8}  {}",
            agg.scenario,
            mode_name,
            agg.runs,
            agg.passed,
            agg.pass_rate * 100.0,
            calls,
            host_calls,
            ms,
            short_codes(&agg.failure_codes)
        )?;
    }
    writeln!(out, "reports: {}", dir.display())?;
    let all_passed = !harness_failed && aggregates.iter().all(|a| a.passed == a.runs);
    Ok(if all_passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
