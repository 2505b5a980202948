//! `mpagent history …` (import, search, status, delete-session, cleanup, check, backfill) and
//! `mpagent bench history`. Thin front ends over the history API that mpa-core re-exports
//! ([`mpa_core::history`]): every search prints exactly the JSON the model would see.

use crate::context::CliContext;
use anyhow::Context as _;
use mpa_core::UserKey;
use mpa_core::history::{self as history, History, HistoryConfig, bench, import};
use serde_json::{Value, json};
use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    #[command(subcommand)]
    cmd: HistoryCommand,
}

#[derive(Debug, clap::Subcommand)]
enum HistoryCommand {
    /// Import messages from a JSONL file (one message per line: session_id, message_id, role,
    /// content, ts, optional source/parent_session_id/title/tool_name/tool_call_id/tool_calls).
    /// Re-running is idempotent. Malformed lines are reported with their line number and
    /// skipped; the exit code is then 1.
    Import {
        /// Owner of the imported history (created on first use).
        #[arg(long)]
        user: String,
        /// The JSONL file.
        file: PathBuf,
    },
    /// Run `session_search` exactly as the agent would and print its JSON
    /// (exit 0 on success, 1 on a failed search, 2 on invalid arguments).
    Search(Box<SearchArgs>),
    /// Show counts, index state and file size of a user's history.
    Status {
        #[arg(long)]
        user: String,
    },
    /// Delete one session's evidence and leave a tombstone (late appends are ignored).
    DeleteSession {
        #[arg(long)]
        user: String,
        #[arg(long)]
        session: String,
    },
    /// Expire sessions whose last activity is older than DATA_CLEANUP_AGENT_CHAT_DAYS
    /// (0 or DATA_CLEANUP_ENABLE=false: nothing is expired). All users unless --user is given.
    Cleanup {
        #[arg(long)]
        user: Option<String>,
        /// Override DATA_CLEANUP_AGENT_CHAT_DAYS for this run.
        #[arg(long)]
        days: Option<u32>,
    },
    /// Import a MoviePilot installation's evidence: its per-user state.db files and the
    /// agentchat snapshots in its main database (resumable, idempotent, marked legacy_snapshot).
    ImportMoviepilot(crate::legacy_cmd::ImportMoviePilotArgs),
    /// Import a Hermes state.db for one user (resumable, idempotent, marked legacy_snapshot).
    ImportHermes(crate::legacy_cmd::ImportHermesArgs),
    /// Run FTS integrity-check on every index and SQLite's structural check (exit 1 when
    /// unhealthy); --repair rebuilds a failing index from the message rows.
    Check {
        #[arg(long)]
        user: String,
        /// Rebuild indexes that fail the check (message rows are never touched).
        #[arg(long)]
        repair: bool,
    },
    /// Build the full-text indexes that are missing, detached after a corruption, or written
    /// by another tokenizer version, in the foreground with a progress bar. Resumes where an
    /// interrupted run (or the host's background task) stopped; safe while `serve` runs.
    Backfill {
        #[arg(long)]
        user: String,
        /// Message ids per batch (one transaction each), 1-2000.
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u16).range(1..=2000))]
        batch_size: u16,
        /// Do not pause between batches (by default it pauses max(0.2 s, 4 x batch time) so a
        /// running host keeps most of the write time).
        #[arg(long)]
        no_pause: bool,
        /// Drop and rebuild all three indexes from the message rows first.
        #[arg(long)]
        rebuild: bool,
    },
}

/// One flag per `session_search` parameter.
#[derive(Debug, clap::Args)]
struct SearchArgs {
    #[arg(long)]
    user: String,
    /// Search terms (discover mode; with --session-id: search inside that session).
    #[arg(long)]
    query: Option<String>,
    /// Read this session, or scroll in it with --around-message-id.
    #[arg(long)]
    session_id: Option<String>,
    #[arg(long)]
    around_message_id: Option<i64>,
    /// Messages on each side of the anchor (1-20).
    #[arg(long)]
    window: Option<i64>,
    /// Sessions to return (1-10).
    #[arg(long)]
    limit: Option<i64>,
    /// newest or oldest (default: relevance).
    #[arg(long)]
    sort: Option<String>,
    /// adaptive, full or index.
    #[arg(long)]
    detail: Option<String>,
    /// Comma-separated roles: user, assistant, tool.
    #[arg(long)]
    role_filter: Option<String>,
    /// Session start time lower bound (inclusive): ISO date/datetime or 12h, 3d, 2w.
    #[arg(long)]
    after: Option<String>,
    /// Session start time upper bound (exclusive).
    #[arg(long)]
    before: Option<String>,
    /// Exclude this session's lineage (repeatable).
    #[arg(long = "exclude-session-id")]
    exclude_session_ids: Vec<String>,
    /// Act as if this session were the current one (its live context is excluded).
    #[arg(long)]
    current_session: Option<String>,
}

impl SearchArgs {
    fn tool_args(&self) -> Value {
        let mut m = serde_json::Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.to_owned(), v);
            }
        };
        put("query", self.query.clone().map(Value::from));
        put("session_id", self.session_id.clone().map(Value::from));
        put("around_message_id", self.around_message_id.map(Value::from));
        put("window", self.window.map(Value::from));
        put("limit", self.limit.map(Value::from));
        put("sort", self.sort.clone().map(Value::from));
        put("detail", self.detail.clone().map(Value::from));
        put("role_filter", self.role_filter.clone().map(Value::from));
        put("after", self.after.clone().map(Value::from));
        put("before", self.before.clone().map(Value::from));
        if !self.exclude_session_ids.is_empty() {
            put("exclude_session_ids", Some(json!(self.exclude_session_ids)));
        }
        Value::Object(m)
    }
}

fn hub(ctx: &CliContext) -> History {
    // One-shot commands leave index building to the foreground `backfill` and to the host.
    let mut cfg = HistoryConfig::new(&ctx.data_dir);
    cfg.background_backfill = false;
    History::new(cfg)
}

async fn user_key(ctx: &CliContext, name: &str) -> anyhow::Result<UserKey> {
    Ok(UserKey::for_user(&ctx.local_actor(name).await?.user_id))
}

fn print_json(v: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, v)?;
    writeln!(out)?;
    Ok(())
}

pub async fn run(args: HistoryArgs, ctx: &CliContext) -> anyhow::Result<ExitCode> {
    let hub = hub(ctx);
    match args.cmd {
        HistoryCommand::Import { user, file } => {
            let key = user_key(ctx, &user).await?;
            import_file(&hub, &key, &user, &file).await
        }
        HistoryCommand::Search(a) => {
            let key = user_key(ctx, &a.user).await?;
            let out =
                history::search_json(&hub, &key, a.current_session.clone(), a.tool_args()).await;
            print_json(&out)?;
            Ok(match (out["success"].as_bool(), out["error"].as_str()) {
                (Some(true), _) => ExitCode::SUCCESS,
                (_, Some("invalid_arguments")) => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            })
        }
        HistoryCommand::Status { user } => {
            let key = user_key(ctx, &user).await?;
            print_json(&hub.status(&key).await?)?;
            Ok(ExitCode::SUCCESS)
        }
        HistoryCommand::DeleteSession { user, session } => {
            let key = user_key(ctx, &user).await?;
            print_json(&hub.delete_session(&key, &session).await?)?;
            Ok(ExitCode::SUCCESS)
        }
        HistoryCommand::Cleanup { user, days } => {
            let days = if ctx.config.data_cleanup_enable {
                days.unwrap_or(ctx.config.data_cleanup_agent_chat_days)
            } else {
                0
            };
            let users = match user {
                Some(name) => vec![user_key(ctx, &name).await?],
                None => hub.known_users(),
            };
            let mut reports = Vec::new();
            for key in users {
                let r = hub.cleanup(&key, days).await?;
                reports.push(json!({"user_key": key.as_str(), "report": r}));
            }
            print_json(&json!({"days": days, "users": reports}))?;
            Ok(ExitCode::SUCCESS)
        }
        HistoryCommand::Check { user, repair } => {
            let key = user_key(ctx, &user).await?;
            let report = hub.check(&key, repair).await?;
            print_json(&report)?;
            Ok(if report.healthy() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        HistoryCommand::Backfill {
            user,
            batch_size,
            no_pause,
            rebuild,
        } => {
            let key = user_key(ctx, &user).await?;
            let opts = history::BackfillOptions {
                batch: usize::from(batch_size),
                paced: !no_pause,
                rebuild,
            };
            let bar = styled_bar(
                None,
                "{bar:30} {pos}/{len} message ids indexed ({per_sec}) eta {eta}",
            );
            let b = bar.clone();
            let summary = hub
                .backfill(&key, opts, move |p| {
                    b.set_length(p.total);
                    b.set_position(p.done);
                })
                .await;
            bar.finish_and_clear();
            let mut out = serde_json::to_value(summary?)?;
            // Then the ranking statistics of complete id segments (what discover's early stop
            // reads), which the background task would otherwise build paced.
            let bar = styled_bar(None, "{bar:30} {pos}/{len} segment statistics eta {eta}");
            let b = bar.clone();
            let ranking = hub
                .build_ranking(&key, move |done, total| {
                    b.set_length(total as u64);
                    b.set_position(done as u64);
                })
                .await;
            bar.finish_and_clear();
            out["ranking"] = serde_json::to_value(ranking?)?;
            print_json(&out)?;
            Ok(ExitCode::SUCCESS)
        }
        HistoryCommand::ImportMoviepilot(a) => crate::legacy_cmd::import_moviepilot(a, ctx).await,
        HistoryCommand::ImportHermes(a) => crate::legacy_cmd::import_hermes(a, ctx).await,
    }
}

fn progress_bar(total: u64) -> indicatif::ProgressBar {
    styled_bar(
        Some(total),
        "{bar:30} {bytes}/{total_bytes} ({bytes_per_sec}) {msg} eta {eta}",
    )
}

/// A progress bar on stderr drawn with `template`.
fn styled_bar(total: Option<u64>, template: &str) -> indicatif::ProgressBar {
    let bar =
        indicatif::ProgressBar::with_draw_target(total, indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
}

async fn import_file(
    hub: &History,
    key: &UserKey,
    owner: &str,
    file: &PathBuf,
) -> anyhow::Result<ExitCode> {
    let f = std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    let total = f.metadata().map(|m| m.len()).unwrap_or(0);
    let bar = progress_bar(total);
    let started = Instant::now();
    let stats = import::import_reader(hub, key, owner, BufReader::with_capacity(1 << 20, f), |p| {
        bar.set_position(p.bytes);
        let secs = started.elapsed().as_secs_f64().max(1e-3);
        bar.set_message(format!(
            "{} msgs, {:.0} msg/s",
            p.inserted,
            p.lines as f64 / secs
        ));
    })
    .await?;
    bar.finish_and_clear();
    for (line, reason) in &stats.skipped {
        eprintln!("line {line}: skipped: {reason}");
    }
    let secs = started.elapsed().as_secs_f64();
    print_json(&json!({
        "lines": stats.lines, "inserted": stats.inserted, "duplicates": stats.duplicates,
        "tombstoned": stats.tombstoned,
        "skipped": stats.skipped.iter().map(|(l, r)| json!({"line": l, "reason": r})).collect::<Vec<_>>(),
        "seconds": secs, "messages_per_second": stats.lines as f64 / secs.max(1e-9),
    }))?;
    Ok(if stats.skipped.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `mpagent bench history`: without `--corpus`, generate a deterministic corpus, import it,
/// rebuild all three indexes through the backfill (unpaced), then time the four recall modes
/// in-process (warm) and 2-character CJK discover against the LIKE scan it replaces. With
/// `--corpus FILE.jsonl --queries FILE.jsonl`, import your own data (the `history import` format)
/// and run your queries: import rate, recall@k and p50/p95 per query kind.
#[derive(Debug, clap::Args)]
pub struct BenchHistoryArgs {
    /// Corpus size in messages (generated corpus).
    #[arg(long, default_value_t = 200_000)]
    messages: usize,
    /// Corpus seed (same seed, same corpus).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Timed calls per mode (generated corpus) or per query (--queries).
    #[arg(long)]
    iterations: Option<usize>,
    /// Timed LIKE scans in the 2-character CJK comparison (default: --iterations).
    #[arg(long)]
    like_iterations: Option<usize>,
    /// Rows per batch of the measured backfill (rebuild of all three indexes, unpaced).
    #[arg(long, default_value_t = 500)]
    backfill_batch: usize,
    /// Your corpus in the import format (one message per line); requires --queries.
    #[arg(long, requires = "queries")]
    corpus: Option<PathBuf>,
    /// Your queries, one JSON object per line: {"query", "kind"?, "expected_session_ids"?,
    /// "role_filter"?}.
    #[arg(long, requires = "corpus")]
    queries: Option<PathBuf>,
    /// Sessions per discover, and the k of recall@k (1-10).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u8).range(1..=10))]
    k: u8,
    /// Work directory (default: a fresh directory under the system temp dir, removed afterwards).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the work directory.
    #[arg(long)]
    keep: bool,
    /// Reuse the database a `--keep` run left in `--dir` (generated corpus): time the searches
    /// only.
    #[arg(long, requires = "dir")]
    reuse: bool,
}

/// Progress of the benchmark on stderr: one bar per phase, notes as lines.
fn bench_reporter() -> impl Fn(bench::BenchEvent) + Send + Sync {
    let bar = styled_bar(None, "{msg} {bar:30} {pos}/{len} eta {eta}");
    move |e| match e {
        bench::BenchEvent::Progress { phase, done, total } => {
            bar.set_message(phase);
            bar.set_length(total);
            bar.set_position(done);
        }
        bench::BenchEvent::Note(line) => bar.suspend(|| eprintln!("{line}")),
    }
}

pub async fn bench(args: BenchHistoryArgs, _ctx: &CliContext) -> anyhow::Result<ExitCode> {
    let dir = args.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("mpa-bench-history-{}", std::process::id()))
    });
    let report = bench_reporter();
    let result = match (&args.corpus, &args.queries) {
        (Some(corpus), Some(queries)) => {
            let opts = bench::FileOptions {
                corpus: corpus.clone(),
                queries: queries.clone(),
                k: usize::from(args.k),
                iterations: args.iterations.unwrap_or(5),
                dir: dir.clone(),
            };
            bench::from_files(&opts, &report).await
        }
        _ => {
            let opts = bench::SyntheticOptions {
                messages: args.messages,
                seed: args.seed,
                iterations: args.iterations.unwrap_or(200),
                like_iterations: args.like_iterations,
                backfill_batch: args.backfill_batch,
                dir: dir.clone(),
                reuse: args.reuse,
            };
            bench::synthetic(&opts, &report).await
        }
    };
    if !args.keep && args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    print_json(&result?)?;
    Ok(ExitCode::SUCCESS)
}
