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

fn hub(ctx: &CliContext) -> HistoryHub {
    // One-shot commands leave index building to the foreground `backfill` and to the host.
    let mut cfg = HistoryConfig::new(&ctx.data_dir);
    cfg.background_backfill = false;
    HistoryHub::new(cfg)
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
        HistoryCommand::Backfill {
            user,
            batch_size,
            no_pause,
            rebuild,
        } => {
            let key = user_key(ctx, &user).await?;
            let opts = mpa_history::BackfillOptions {
                batch: usize::from(batch_size),
                paced: !no_pause,
                rebuild,
            };
            let bar = indicatif::ProgressBar::with_draw_target(
                None,
                indicatif::ProgressDrawTarget::stderr(),
            );
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} message ids indexed ({per_sec}) eta {eta}",
            ) {
                bar.set_style(style);
            }
            let b = bar.clone();
            let summary = hub
                .backfill(&key, opts, move |p| {
                    b.set_length(p.total);
                    b.set_position(p.done);
                })
                .await;
            bar.finish_and_clear();
            print_json(&summary?)?;
            Ok(ExitCode::SUCCESS)
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

/// `mpagent bench history`: generate a deterministic corpus, import it, rebuild all three
/// indexes through the backfill (unpaced), then time the four `session_search` modes
/// in-process (warm) and 2-character CJK discover against the LIKE scan it replaces.
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
    /// Timed LIKE scans in the 2-character CJK comparison (default: --iterations).
    #[arg(long)]
    like_iterations: Option<usize>,
    /// Rows per batch of the measured backfill (rebuild of all three indexes, unpaced).
    #[arg(long, default_value_t = 500)]
    backfill_batch: usize,
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

/// 2-character CJK queries: common (订阅, 下载, 字幕), medium, rare (续期) and absent from the
/// corpus (蓝光: a LIKE scan must read every row to say so).
const CJK2_QUERIES: [&str; 10] = [
    "订阅", "字幕", "下载", "证书", "站点", "网络", "超时", "续期", "狂飙", "蓝光",
];

/// `/proc/loadavg`'s three load averages, to read wall times on a shared machine.
fn load_average() -> Value {
    let s = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let v: Vec<f64> = s
        .split_whitespace()
        .take(3)
        .filter_map(|x| x.parse().ok())
        .collect();
    json!(v)
}

/// The LIKE scan that a 2-character CJK discover ran before the cjk index existed: the
/// library's LIKE route for a one-term query with the default roles (user, assistant), visible
/// rows only, hidden sources excluded, newest first, at most 300 candidates. With
/// `role_first: true` it is `like_query` in mpa-history's search.rs (filters before text, so
/// tool bodies are never read); `role_first: false` is the order it had before issue 5's fix
/// (text first: SQLite evaluated the LIKEs on every tool body before rejecting the row).
fn like_scan_sql(role_first: bool) -> String {
    let hidden = mpa_history::store::HIDDEN_SOURCES
        .map(|h| format!("'{h}'"))
        .join(",");
    let text = "(((m.content LIKE ?1 ESCAPE '\\' OR m.tool_name LIKE ?1 ESCAPE '\\' \
                OR m.tool_calls LIKE ?1 ESCAPE '\\')))";
    let roles = "m.role IN ('user','assistant')";
    let (first, last) = if role_first {
        (roles, text)
    } else {
        (text, roles)
    };
    format!(
        "SELECT m.id, m.session_id, m.role, m.active, m.compacted, m.timestamp, s.source \
         FROM messages m JOIN sessions s ON s.id = m.session_id \
         WHERE {first} AND (m.active = 1 OR m.compacted = 1) AND s.source NOT IN ({hidden}) \
         AND {last} ORDER BY m.timestamp DESC, m.id DESC LIMIT 300"
    )
}

/// One LIKE scan, timed: returns its wall time and adds its CPU seconds to `cpu`.
fn timed_scan(
    st: &mut rusqlite::Statement<'_>,
    pattern: &str,
    cpu: &mut f64,
) -> anyhow::Result<Duration> {
    let c = cpu_seconds();
    let t = Instant::now();
    like_scan(st, pattern)?;
    let el = t.elapsed();
    *cpu += cpu_seconds() - c;
    Ok(el)
}

/// Run the LIKE scan once and read every candidate row as the library does; returns how many.
fn like_scan(st: &mut rusqlite::Statement<'_>, pattern: &str) -> anyhow::Result<usize> {
    let rows = st.query_map([pattern], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, i64>(4)?,
            r.get::<_, f64>(5)?,
            r.get::<_, String>(6)?,
        ))
    })?;
    let mut n = 0usize;
    for row in rows {
        std::hint::black_box(row?);
        n += 1;
    }
    Ok(n)
}

/// One 2-character CJK query's timings: discover through the cjk index, and the two LIKE scans.
#[derive(Default)]
struct Cjk2Timings {
    info: Value,
    cjk: Vec<Duration>,
    like: Vec<Duration>,
    like_role_first: Vec<Duration>,
}

fn percentiles(name: &str, mut t: Vec<Duration>) -> Value {
    t.sort();
    json!({"query": name, "calls": t.len(), "p50_ms": percentile(&t, 0.5),
           "p95_ms": percentile(&t, 0.95), "max_ms": percentile(&t, 1.0)})
}

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
    let load_start = load_average();
    // The measured backfill runs alone: no background task may race it.
    let mut cfg = HistoryConfig::new(dir.join("data"));
    cfg.background_backfill = false;
    let hub = HistoryHub::new(cfg);
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

    // Backfill of all three indexes from the message rows (what a tokenizer upgrade, a repair
    // or a first start on an old file does), flat out: the host-idle rate.
    let backfill = {
        let load = load_average();
        let cpu = cpu_seconds();
        let opts = mpa_history::BackfillOptions {
            batch: args.backfill_batch,
            paced: false,
            rebuild: true,
        };
        let bar =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        let b = bar.clone();
        let sum = hub
            .backfill(&key, opts, move |p| {
                b.set_length(p.total);
                b.set_position(p.done);
            })
            .await?;
        bar.finish_and_clear();
        let cpu = cpu_seconds() - cpu;
        let msgs = stats.inserted as f64;
        eprintln!(
            "backfill: {:.0} messages/s ({:.1}s wall, {:.1}s busy, {:.1}s CPU)",
            msgs / sum.seconds.max(1e-9),
            sum.seconds,
            sum.busy_seconds,
            cpu
        );
        json!({
            "batch": args.backfill_batch, "batches": sum.batches, "messages": stats.inserted,
            "rows_indexed": sum.rows_indexed, "seconds": sum.seconds,
            "busy_seconds": sum.busy_seconds, "cpu_seconds": cpu,
            "messages_per_second": msgs / sum.seconds.max(1e-9),
            "messages_per_busy_second": msgs / sum.busy_seconds.max(1e-9),
            "messages_per_cpu_second": msgs / cpu.max(1e-9),
            "rows_indexed_per_second": sum.rows_indexed as f64 / sum.seconds.max(1e-9),
            "load_average_before": load, "load_average_after": load_average(),
            "indexes": sum.indexes,
        })
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

    // 2-character CJK discover through the cjk index vs the LIKE scan it replaces, interleaved
    // so both see the same machine load. The LIKE side is the candidate scan alone (no
    // hydration, no snippets): a lower bound of what the LIKE route cost a discover.
    let cjk2 = {
        let like_iterations = args.like_iterations.unwrap_or(args.iterations);
        let conn = rusqlite::Connection::open_with_flags(
            hub.db_path(&key),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.execute_batch("PRAGMA temp_store = MEMORY;")?;
        let mut st = conn.prepare(&like_scan_sql(false))?;
        let mut st_rf = conn.prepare(&like_scan_sql(true))?;
        let mut cjk_paths: std::collections::BTreeMap<String, usize> = Default::default();
        let mut per_query: Vec<Cjk2Timings> = Vec::new();
        // Warm-up, and what each query matches.
        for q in CJK2_QUERIES {
            let r = hub.session_search(&key, &sctx, json!({"query": q})).await;
            let rows = like_scan(&mut st, &mpa_history::like_pattern(q))?;
            anyhow::ensure!(
                like_scan(&mut st_rf, &mpa_history::like_pattern(q))? == rows,
                "the two LIKE scans disagree on {q}"
            );
            let matching: i64 = conn.query_row(
                "SELECT COUNT(*) FROM messages WHERE role IN ('user','assistant') \
                 AND content LIKE ?1 ESCAPE '\\'",
                [mpa_history::like_pattern(q)],
                |r| r.get(0),
            )?;
            per_query.push(Cjk2Timings {
                info: json!({"query": q, "search_path": r["search_path"], "sessions": r["count"],
                       "like_candidates": rows, "matching_user_assistant_rows": matching}),
                ..Default::default()
            });
        }
        let (mut all_cjk, mut all_like, mut all_rf) = (Vec::new(), Vec::new(), Vec::new());
        let (mut cjk_cpu, mut like_cpu, mut rf_cpu) = (0.0, 0.0, 0.0);
        for i in 0..args.iterations.max(like_iterations) {
            let k = i % CJK2_QUERIES.len();
            let q = CJK2_QUERIES[k];
            if i < args.iterations {
                let c = cpu_seconds();
                let t = Instant::now();
                let r = hub.session_search(&key, &sctx, json!({"query": q})).await;
                let el = t.elapsed();
                cjk_cpu += cpu_seconds() - c;
                let path = r["search_path"].as_str().unwrap_or("error").to_owned();
                *cjk_paths.entry(path).or_default() += 1;
                all_cjk.push(el);
                per_query[k].cjk.push(el);
            }
            if i < like_iterations {
                let pattern = mpa_history::like_pattern(q);
                let el = timed_scan(&mut st, &pattern, &mut like_cpu)?;
                all_like.push(el);
                per_query[k].like.push(el);
                let el = timed_scan(&mut st_rf, &pattern, &mut rf_cpu)?;
                all_rf.push(el);
                per_query[k].like_role_first.push(el);
            }
        }
        let per_query: Vec<Value> = per_query
            .into_iter()
            .map(|t| {
                let mut info = t.info;
                info["cjk_discover"] = percentiles("cjk", t.cjk);
                info["like_scan"] = percentiles("like", t.like);
                info["like_scan_role_first"] = percentiles("like_role_first", t.like_role_first);
                info
            })
            .collect();
        let (n_cjk, n_like) = (all_cjk.len().max(1) as f64, all_like.len().max(1) as f64);
        json!({
            "queries": CJK2_QUERIES, "search_paths": cjk_paths,
            "cjk_discover": percentiles("all", all_cjk),
            "cjk_discover_cpu_ms_per_call": cjk_cpu * 1000.0 / n_cjk,
            "like_scan": percentiles("all", all_like),
            "like_scan_cpu_ms_per_call": like_cpu * 1000.0 / n_like,
            "like_sql": like_scan_sql(false),
            "like_scan_role_first": percentiles("all", all_rf),
            "like_scan_role_first_cpu_ms_per_call": rf_cpu * 1000.0 / n_like,
            "like_sql_role_first": like_scan_sql(true),
            "per_query": per_query,
        })
    };

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
        "backfill": backfill, "cjk2_vs_like": cjk2,
        "load_average_start": load_start, "load_average_end": load_average(),
    }))?;
    if !args.keep && args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(ExitCode::SUCCESS)
}
