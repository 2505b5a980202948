//! `mpagent`: the MoviePilot agent host — chat on the command line, run tools, manage users and
//! (with `serve`) the HTTP host.

mod chat;
mod config;
mod context;
mod doctor_cmd;
mod eval_cmd;
mod history_cmd;
mod legacy_cmd;
mod mcp_cmd;
mod serve_cmd;
mod tool_cmd;
mod user_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "mpagent",
    version,
    about = "The MoviePilot agent host: chat, tools, accounts and evidence history.",
    long_about = "The MoviePilot agent host. It plans, calls tools and keeps what it saw.\n\n\
Every option can also be set through the environment variable shown in brackets. \
The model is any OpenAI-compatible endpoint (LLM_BASE_URL, LLM_MODEL, LLM_API_KEY)."
)]
struct Cli {
    #[command(flatten)]
    config: config::Config,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Chat with the agent: one turn with MESSAGE, or an interactive REPL without it.
    Chat(chat::ChatArgs),
    /// Run one tool exactly as the agent would and print its JSON result
    /// (exit 0 succeeded/pending, 1 failed/unknown, 2 bad usage).
    Tool(tool_cmd::ToolArgs),
    /// Manage local user accounts.
    User(user_cmd::UserArgs),
    /// External MCP servers (add, list, remove, test) and the agent's tools over MCP stdio.
    Mcp(mcp_cmd::McpArgs),
    /// Run the HTTP host: web page, SSE chat API, OpenAI-compatible endpoint.
    Serve(serve_cmd::ServeArgs),
    /// Evidence history: import, search, status, delete-session, cleanup.
    History(history_cmd::HistoryArgs),
    /// Benchmarks that generate their own data (results go to stdout).
    Bench(BenchArgs),
    /// The evaluation harness: scenarios against the fake MoviePilot, judged by an oracle
    /// (exit 0 pass, 1 oracle failure, 2 invalid input).
    Eval(eval_cmd::EvalArgs),
    /// Development helpers: the fake MoviePilot.
    Dev(eval_cmd::DevArgs),
    /// Check the MoviePilot the agent is configured for: configuration, reachability, its
    /// routes and version, the secret key, the operations offered (exit 0 ok, 1 a check failed).
    Doctor(doctor_cmd::DoctorArgs),
}

#[derive(Debug, clap::Args)]
struct BenchArgs {
    #[command(subcommand)]
    what: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Evidence history: import rate, peak RSS, discover/read/scroll/browse latency.
    History(history_cmd::BenchHistoryArgs),
}

/// Logs go to stderr; `MPA_LOG` overrides the default (request logs for the server, warnings
/// only for the interactive commands, whose stdout is the conversation).
fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MPA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Panic payloads can carry tool arguments or secrets, so only the location is reported; the
/// failure itself reaches the model as a sanitised `failed` tool result.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_else(|| "unknown location".into());
        eprintln!("internal error: a task panicked at {at} (details withheld)");
    }));
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(match cli.command {
        Command::Serve(_) => "warn,mpa_server=info,mpa_core=info",
        _ => "warn",
    });
    install_panic_hook();
    // Before any terminal runs: orphaned grandchildren of terminals are re-parented to the host
    // and reaped, also when it runs as PID 1 in a container (no zombies).
    if let Err(e) = mpa_core::become_subreaper() {
        tracing::warn!(error = %e, "orphaned processes will not be reaped by the host");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes, each said once. Many messages already quote their cause (`cannot
/// create data directory X: Not a directory (os error 20)`), and `{:#}` would append it again.
pub(crate) fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if text.contains(&c) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&c);
    }
    text
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // The harness builds a fresh host per run; neither command opens the data directory.
    let command = match cli.command {
        Command::Eval(a) => return eval_cmd::run(a, &cli.config).await,
        Command::Dev(a) => return eval_cmd::dev(a, &cli.config).await,
        Command::Doctor(a) => return doctor_cmd::run(a, &cli.config).await,
        other => other,
    };
    let ctx = context::CliContext::open(cli.config).await?;
    match command {
        Command::Chat(a) => chat::run(a, &ctx).await,
        Command::Tool(a) => tool_cmd::run(a, &ctx).await,
        Command::User(a) => user_cmd::run(a, &ctx).await,
        Command::Mcp(a) => mcp_cmd::run(a, &ctx).await,
        Command::History(a) => history_cmd::run(a, &ctx).await,
        Command::Bench(BenchArgs {
            what: BenchCommand::History(a),
        }) => history_cmd::bench(a, &ctx).await,
        Command::Serve(a) => serve_cmd::run(a, &ctx).await,
        Command::Eval(_) | Command::Dev(_) | Command::Doctor(_) => Ok(ExitCode::from(2)),
    }
}
