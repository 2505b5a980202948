//! `mpagent history …` (import, search, status, delete-session, cleanup) and
//! `mpagent bench history`. Thin front ends over `mpa-history`: every search prints exactly the
//! JSON the model would see.

use crate::context::CliContext;
use anyhow::Context as _;
use mpa_history::{HistoryConfig, HistoryHub, SearchContext, corpus, import};
use mpa_protocol::{UserId, UserKey};
use serde_json::{Value, json};
use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

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

fn hub(ctx: &CliContext) -> HistoryHub {
    HistoryHub::new(HistoryConfig::new(&ctx.data_dir))
}

async fn user_key(ctx: &CliContext, name: &str) -> anyhow::Result<UserKey> {
    Ok(ctx.local_actor(name).await?.user_key())
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
            let sctx = SearchContext {
                current_session_id: a.current_session.clone(),
            };
            let out = hub.session_search(&key, &sctx, a.tool_args()).await;
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
        HistoryCommand::ImportMoviepilot(a) => crate::legacy_cmd::import_moviepilot(a, ctx).await,
        HistoryCommand::ImportHermes(a) => crate::legacy_cmd::import_hermes(a, ctx).await,
    }
}

fn progress_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bar:30} {bytes}/{total_bytes} ({bytes_per_sec}) {msg} eta {eta}",
    ) {
        bar.set_style(style);
    }
    bar
}

async fn import_file(
    hub: &HistoryHub,
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

/// `mpagent bench history`: generate a deterministic corpus, import it, then time the four
/// `session_search` modes in-process (warm).
#[derive(Debug, clap::Args)]
pub struct BenchHistoryArgs {
    /// Corpus size in messages.
    #[arg(long, default_value_t = 200_000)]
    messages: usize,
    /// Corpus seed (same seed, same corpus).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Timed calls per mode.
    #[arg(long, default_value_t = 200)]
    iterations: usize,
    /// Work directory (default: a fresh directory under the system temp dir, removed afterwards).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the work directory.
    #[arg(long)]
    keep: bool,
}

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// User + system CPU seconds of this process (from /proc/self/stat, clock ticks of 10 ms), so
/// rates can be judged on a shared, loaded machine.
fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ut: f64 = f.get(11)?.parse().ok()?;
            let st: f64 = f.get(12)?.parse().ok()?;
            Some((ut + st) / 100.0)
        })
        .unwrap_or(0.0)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

fn summary(name: &str, mut t: Vec<Duration>) -> Value {
    t.sort();
    json!({"mode": name, "calls": t.len(), "p50_ms": percentile(&t, 0.5), "p95_ms": percentile(&t, 0.95),
           "max_ms": percentile(&t, 1.0)})
}

const BENCH_QUERIES: [&str; 16] = [
    "docker networking",
    "tracker 403",
    "subscription status",
    "Dune",
    "TLS certificate expired",
    "rename plex library",
    "REMUX",
    "better release",
    "订阅",
    "下载失败",
    "站点证书",
    "中文字幕",
    "三体 订阅",
    "Severance OR Shogun",
    "download NOT failed",
    "dolby vision",
];

pub async fn bench(args: BenchHistoryArgs, _ctx: &CliContext) -> anyhow::Result<ExitCode> {
    let dir = args.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("mpa-bench-history-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let corpus_path = dir.join("corpus.jsonl");
    let gen_started = Instant::now();
    let sessions = {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&corpus_path)?);
        let mut err: Option<std::io::Error> = None;
        let n = corpus::generate(args.messages, args.seed, |line| {
            if err.is_none()
                && let Err(e) = writeln!(w, "{line}")
            {
                err = Some(e);
            }
        });
        if let Some(e) = err {
            return Err(e.into());
        }
        w.flush()?;
        n
    };
    let corpus_bytes = std::fs::metadata(&corpus_path)?.len();
    eprintln!(
        "corpus: {} messages, {sessions} sessions, {:.1} MB, generated in {:.1}s",
        args.messages,
        corpus_bytes as f64 / 1e6,
        gen_started.elapsed().as_secs_f64()
    );
    // Redaction cost alone: parse every line twice, once also redacting its text; the CPU
    // difference is what redaction adds to an import.
    let pass = |redact: bool| -> anyhow::Result<f64> {
        let cpu = cpu_seconds();
        let f = BufReader::with_capacity(1 << 20, std::fs::File::open(&corpus_path)?);
        let mut changed = 0usize;
        for l in std::io::BufRead::lines(f).map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&l)
                && redact
                && let Some(c) = v["content"].as_str()
                && matches!(mpa_history::redact(c), std::borrow::Cow::Owned(_))
            {
                changed += 1;
            }
        }
        std::hint::black_box(changed);
        Ok(cpu_seconds() - cpu)
    };
    let redact_cpu = (pass(true)? - pass(false)?).max(0.0);
    let hub = HistoryHub::new(HistoryConfig::new(dir.join("data")));
    let key = UserKey::for_user(&UserId("bench-history".into()));
    let rss_before = peak_rss_kb();
    let bar = progress_bar(corpus_bytes);
    let started = Instant::now();
    let cpu_started = cpu_seconds();
    let reader = BufReader::with_capacity(1 << 20, std::fs::File::open(&corpus_path)?);
    let stats = import::import_reader(&hub, &key, "bench-history", reader, |p| {
        bar.set_position(p.bytes);
        let secs = started.elapsed().as_secs_f64().max(1e-3);
        bar.set_message(format!("{:.0} msg/s", p.lines as f64 / secs));
    })
    .await?;
    bar.finish_and_clear();
    let import_secs = started.elapsed().as_secs_f64();
    let import_cpu = cpu_seconds() - cpu_started;
    let rss_after = peak_rss_kb();
    let db_bytes = {
        let db = hub.db_path(&key);
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        size(&db) + size(std::path::Path::new(&wal))
    };

    // Warm up, and collect scroll anchors from real hits.
    let sctx = SearchContext::default();
    let mut anchors: Vec<(String, i64)> = Vec::new();
    for q in BENCH_QUERIES {
        let r = hub
            .session_search(
                &key,
                &sctx,
                json!({"query": q, "limit": 10, "detail": "index"}),
            )
            .await;
        for res in r["results"].as_array().into_iter().flatten() {
            if let (Some(s), Some(id)) =
                (res["session_id"].as_str(), res["match_message_id"].as_i64())
            {
                anchors.push((s.to_owned(), id));
            }
        }
    }
    let mut rng = corpus::Rng::new(args.seed ^ 0x9E37);
    let mut timings: Vec<Value> = Vec::new();
    let mut paths: std::collections::BTreeMap<String, usize> = Default::default();
    let discover_cpu = cpu_seconds();
    let mut discover = Vec::with_capacity(args.iterations);
    let mut per_query: std::collections::BTreeMap<&str, (String, Vec<Duration>)> =
        Default::default();
    for i in 0..args.iterations {
        let q = BENCH_QUERIES[i % BENCH_QUERIES.len()];
        let t = Instant::now();
        let r = hub.session_search(&key, &sctx, json!({"query": q})).await;
        let el = t.elapsed();
        discover.push(el);
        let path = r["search_path"].as_str().unwrap_or("error").to_owned();
        *paths.entry(path.clone()).or_default() += 1;
        per_query
            .entry(q)
            .or_insert_with(|| (path, Vec::new()))
            .1
            .push(el);
    }
    let discover_cpu_ms = (cpu_seconds() - discover_cpu) * 1000.0 / args.iterations.max(1) as f64;
    timings.push(summary("discover", discover));
    let per_query: Vec<Value> = per_query
        .into_iter()
        .map(|(q, (path, mut t))| {
            t.sort();
            json!({"query": q, "search_path": path, "p50_ms": percentile(&t, 0.5), "max_ms": percentile(&t, 1.0)})
        })
        .collect();
    let mut read = Vec::with_capacity(args.iterations);
    for _ in 0..args.iterations {
        let sid = format!("s{:07}", 1 + rng.below(sessions as u64));
        let t = Instant::now();
        let _ = hub
            .session_search(&key, &sctx, json!({"session_id": sid}))
            .await;
        read.push(t.elapsed());
    }
    timings.push(summary("read", read));
    let mut scroll = Vec::with_capacity(args.iterations);
    for i in 0..args.iterations {
        let Some((sid, id)) = anchors.get(i % anchors.len().max(1)) else {
            break;
        };
        let t = Instant::now();
        let _ = hub
            .session_search(
                &key,
                &sctx,
                json!({"session_id": sid, "around_message_id": id}),
            )
            .await;
        scroll.push(t.elapsed());
    }
    timings.push(summary("scroll", scroll));
    let mut browse = Vec::with_capacity(args.iterations);
    for _ in 0..args.iterations {
        let t = Instant::now();
        let _ = hub.session_search(&key, &sctx, json!({"limit": 10})).await;
        browse.push(t.elapsed());
    }
    timings.push(summary("browse", browse));

    print_json(&json!({
        "messages": args.messages, "sessions": sessions, "corpus_mb": corpus_bytes as f64 / 1e6,
        "import": {"seconds": import_secs, "messages_per_second": stats.lines as f64 / import_secs,
                   "inserted": stats.inserted, "skipped": stats.skipped.len(), "cpu_seconds": import_cpu,
                   "redaction_cpu_seconds": redact_cpu,
                   "redaction_share_of_import_cpu": redact_cpu / import_cpu.max(1e-9),
                   "messages_per_cpu_second": stats.lines as f64 / import_cpu.max(1e-9),
                   "peak_rss_mb_before": rss_before as f64 / 1024.0, "peak_rss_mb": rss_after as f64 / 1024.0},
        "db_mb": db_bytes as f64 / 1e6,
        "search_paths": paths, "timings": timings, "discover_per_query": per_query,
        "discover_cpu_ms_per_call": discover_cpu_ms,
    }))?;
    if !args.keep && args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(ExitCode::SUCCESS)
}
