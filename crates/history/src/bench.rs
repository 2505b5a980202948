//! The benchmark behind `mpagent bench history`, in two forms:
//!
//! - [`synthetic`]: generate a deterministic corpus ([`crate::corpus`]), import it, rebuild all
//!   three indexes through the backfill (unpaced), then time discover/read/scroll/browse
//!   in-process (warm) and 2-character CJK discover against the LIKE scan it replaces.
//! - [`from_files`]: import the caller's own corpus (the JSONL import format) and run the
//!   caller's queries (JSONL: `query`, optional `kind`, `expected_session_ids`, `role_filter`),
//!   reporting the import rate, recall@k and p50/p95 per query kind.
//!
//! Timings are of [`History::search`] (the typed recall call the host's tool wraps; rendering
//! its JSON is not included). Every result is one JSON document; progress goes to `report`.

use crate::error::{HistoryError, Result};
use crate::recall::{DiscoverRequest, SearchOutcome, SearchRole};
use crate::{
    BackfillOptions, History, HistoryConfig, SearchContext, SearchRequest, corpus, import,
};
use mpa_protocol::UserId;
use mpa_redact::UserKey;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What the benchmark tells its caller while it runs.
#[derive(Debug, Clone)]
pub enum BenchEvent {
    /// `done` of `total` units of `phase` (`import` in bytes, `backfill` in message ids).
    Progress {
        phase: &'static str,
        done: u64,
        total: u64,
    },
    /// A phase finished; one human-readable line.
    Note(String),
}

#[derive(Debug, Clone)]
pub struct SyntheticOptions {
    /// Corpus size in messages.
    pub messages: usize,
    /// Corpus seed (same seed, same corpus).
    pub seed: u64,
    /// Timed calls per mode.
    pub iterations: usize,
    /// Timed LIKE scans in the 2-character CJK comparison (default: `iterations`).
    pub like_iterations: Option<usize>,
    /// Rows per batch of the measured backfill.
    pub backfill_batch: usize,
    /// Work directory (corpus file and data directory).
    pub dir: PathBuf,
    /// Reuse the database a kept earlier run left in `dir` (same size and seed): skip the
    /// corpus, the import and the backfill, and time the searches only.
    pub reuse: bool,
}

#[derive(Debug, Clone)]
pub struct FileOptions {
    /// The corpus in the import format.
    pub corpus: PathBuf,
    /// One query per line.
    pub queries: PathBuf,
    /// Sessions per discover (1..=10): recall is measured at this k.
    pub k: usize,
    /// Timed calls per query (the first also decides recall).
    pub iterations: usize,
    /// Work directory (the data directory goes here).
    pub dir: PathBuf,
}

const OWNER: &str = "bench-history";

fn bench_user() -> UserKey {
    UserKey::for_user(&UserId(OWNER.into()))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> HistoryError + '_ {
    crate::error::io_err(path)
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

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

fn summary(key: &str, name: &str, mut t: Vec<Duration>) -> Value {
    t.sort();
    json!({key: name, "calls": t.len(), "p50_ms": percentile(&t, 0.5), "p95_ms": percentile(&t, 0.95),
           "max_ms": percentile(&t, 1.0)})
}

// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub const BENCH_QUERIES: [&str; 16] = [
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

fn discover(q: &str) -> SearchRequest {
    SearchRequest::Discover(DiscoverRequest::new(q))
}

fn path_of(r: &Result<crate::SearchResponse>) -> String {
    match r {
        Ok(r) => match &r.outcome {
            SearchOutcome::Discover(d) => d.search_path.to_owned(),
            SearchOutcome::InSession(d) => d.search_path.to_owned(),
            _ => "none".to_owned(),
        },
        Err(_) => "error".to_owned(),
    }
}

fn hits_of(r: &Result<crate::SearchResponse>) -> Vec<(String, i64)> {
    match r {
        Ok(crate::SearchResponse {
            outcome: SearchOutcome::Discover(d),
            ..
        }) => d
            .hits
            .iter()
            .map(|h| (h.session_id.clone(), h.match_message_id))
            .collect(),
        _ => Vec::new(),
    }
}

/// A history whose measured work runs alone: no background backfill may race it.
fn quiet_history(data: PathBuf) -> History {
    let mut cfg = HistoryConfig::new(data);
    cfg.background_backfill = false;
    History::new(cfg)
}

fn db_bytes(hub: &History, key: &UserKey) -> u64 {
    let db = hub.db_path(key);
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    size(&db) + size(Path::new(&wal))
}

/// Import `path` for the bench user, timed.
async fn import_file(
    hub: &History,
    key: &UserKey,
    path: &Path,
    report: &(dyn Fn(BenchEvent) + Send + Sync),
) -> Result<(import::ImportStats, Value)> {
    let total = std::fs::metadata(path).map_err(io(path))?.len();
    let rss_before = peak_rss_kb();
    let started = Instant::now();
    let cpu_started = cpu_seconds();
    let reader = BufReader::with_capacity(1 << 20, std::fs::File::open(path).map_err(io(path))?);
    let stats = import::import_reader(hub, key, OWNER, reader, |p| {
        report(BenchEvent::Progress {
            phase: "import",
            done: p.bytes,
            total,
        })
    })
    .await?;
    let secs = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_started;
    report(BenchEvent::Note(format!(
        "import: {} messages in {secs:.1}s ({:.0} msg/s)",
        stats.inserted,
        stats.lines as f64 / secs.max(1e-9)
    )));
    let summary = json!({"seconds": secs, "messages_per_second": stats.lines as f64 / secs.max(1e-9),
        "lines": stats.lines, "inserted": stats.inserted, "duplicates": stats.duplicates,
        "skipped": stats.skipped.len(), "cpu_seconds": cpu,
        "messages_per_cpu_second": stats.lines as f64 / cpu.max(1e-9),
        "peak_rss_mb_before": rss_before as f64 / 1024.0, "peak_rss_mb": peak_rss_kb() as f64 / 1024.0});
    Ok((stats, summary))
}

/// Generate the corpus, import it and rebuild every index (the measured phases).
async fn prepare(
    opts: &SyntheticOptions,
    hub: &History,
    key: &UserKey,
    report: &(dyn Fn(BenchEvent) + Send + Sync),
) -> Result<(usize, u64, Value, u64, Value, Value)> {
    let dir = &opts.dir;
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let corpus_path = dir.join("corpus.jsonl");
    let gen_started = Instant::now();
    let sessions = {
        let f = std::fs::File::create(&corpus_path).map_err(io(&corpus_path))?;
        let mut w = std::io::BufWriter::new(f);
        let mut err: Option<std::io::Error> = None;
        let n = corpus::generate(opts.messages, opts.seed, |line| {
            if err.is_none()
                && let Err(e) = writeln!(w, "{line}")
            {
                err = Some(e);
            }
        });
        if let Some(e) = err {
            return Err(io(&corpus_path)(e));
        }
        w.flush().map_err(io(&corpus_path))?;
        n
    };
    let corpus_bytes = std::fs::metadata(&corpus_path)
        .map_err(io(&corpus_path))?
        .len();
    report(BenchEvent::Note(format!(
        "corpus: {} messages, {sessions} sessions, {:.1} MB, generated in {:.1}s",
        opts.messages,
        corpus_bytes as f64 / 1e6,
        gen_started.elapsed().as_secs_f64()
    )));
    // Redaction cost alone: parse every line twice, once also redacting its text; the CPU
    // difference is what redaction adds to an import.
    let pass = |redact: bool| -> Result<f64> {
        let cpu = cpu_seconds();
        let f = std::fs::File::open(&corpus_path).map_err(io(&corpus_path))?;
        let mut changed = 0usize;
        for l in BufReader::with_capacity(1 << 20, f)
            .lines()
            .map_while(|l| l.ok())
        {
            if let Ok(v) = serde_json::from_str::<Value>(&l)
                && redact
                && let Some(c) = v["content"].as_str()
                && matches!(crate::redact(c), std::borrow::Cow::Owned(_))
            {
                changed += 1;
            }
        }
        std::hint::black_box(changed);
        Ok(cpu_seconds() - cpu)
    };
    let redact_cpu = (pass(true)? - pass(false)?).max(0.0);
    let load_start = load_average();
    let (stats, mut import_summary) = import_file(hub, key, &corpus_path, report).await?;
    let import_cpu = import_summary["cpu_seconds"].as_f64().unwrap_or(0.0);
    import_summary["redaction_cpu_seconds"] = json!(redact_cpu);
    import_summary["redaction_share_of_import_cpu"] = json!(redact_cpu / import_cpu.max(1e-9));
    let db_bytes = db_bytes(hub, key);

    // Backfill of all three indexes from the message rows (what a tokenizer upgrade, a repair
    // or a first start on an old file does), flat out: the host-idle rate.
    let backfill = {
        let load = load_average();
        let cpu = cpu_seconds();
        let bopts = BackfillOptions {
            batch: opts.backfill_batch,
            paced: false,
            rebuild: true,
        };
        let sum = hub
            .backfill(key, bopts, |p| {
                report(BenchEvent::Progress {
                    phase: "backfill",
                    done: p.done,
                    total: p.total,
                })
            })
            .await?;
        let cpu = cpu_seconds() - cpu;
        let msgs = stats.inserted as f64;
        report(BenchEvent::Note(format!(
            "backfill: {:.0} messages/s ({:.1}s wall, {:.1}s busy, {:.1}s CPU)",
            msgs / sum.seconds.max(1e-9),
            sum.seconds,
            sum.busy_seconds,
            cpu
        )));
        json!({
            "batch": opts.backfill_batch, "batches": sum.batches, "messages": stats.inserted,
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

    Ok((
        sessions,
        corpus_bytes,
        import_summary,
        db_bytes,
        backfill,
        load_start,
    ))
}

/// Segment statistics for ranked recall, built in the foreground (what the background task
/// does, paced, after an import): how long they take and how much they store.
async fn ranking_statistics(
    hub: &History,
    key: &UserKey,
    report: &(dyn Fn(BenchEvent) + Send + Sync),
) -> Result<Value> {
    let cpu = cpu_seconds();
    let sum = hub
        .build_ranking(key, |done, total| {
            report(BenchEvent::Progress {
                phase: "ranking statistics",
                done: done as u64,
                total: total as u64,
            })
        })
        .await?;
    let cpu = cpu_seconds() - cpu;
    let sizes = hub.ranking_sizes(key).await?;
    report(BenchEvent::Note(format!(
        "ranking statistics: {} segment summaries in {:.1}s ({:.1}s CPU)",
        sum.segments_written, sum.seconds, cpu
    )));
    Ok(json!({
        "segments_written": sum.segments_written, "seconds": sum.seconds, "cpu_seconds": cpu,
        "tables": sizes,
    }))
}

/// The synthetic benchmark (see the module docs).
pub async fn synthetic(
    opts: &SyntheticOptions,
    report: &(dyn Fn(BenchEvent) + Send + Sync),
) -> Result<Value> {
    let dir = &opts.dir;
    let hub = quiet_history(dir.join("data"));
    let key = bench_user();
    let (sessions, corpus_bytes, import_summary, db_bytes, backfill, load_start) =
        if opts.reuse && hub.db_path(&key).is_file() {
            let status = hub.status(&key).await?;
            let sessions = usize::try_from(status.sessions).unwrap_or(0);
            report(BenchEvent::Note(format!(
                "reusing {}: {} messages, {sessions} sessions",
                hub.db_path(&key).display(),
                status.messages
            )));
            let db = db_bytes(&hub, &key);
            (sessions, 0, Value::Null, db, Value::Null, load_average())
        } else {
            prepare(opts, &hub, &key, report).await?
        };
    let ranking = ranking_statistics(&hub, &key, report).await?;
    // Each query's first call in this process: nothing decoded yet (the store keeps decoded
    // posting lists between searches, so later calls of the same terms skip that part).
    let sctx = SearchContext::default();
    let mut first_calls = Vec::with_capacity(BENCH_QUERIES.len());
    let mut first_per_query = Vec::with_capacity(BENCH_QUERIES.len());
    for q in BENCH_QUERIES {
        let t = Instant::now();
        let _ = hub.search(&key, &sctx, discover(q)).await;
        let el = t.elapsed();
        first_calls.push(el);
        first_per_query.push(json!({"query": q, "ms": el.as_secs_f64() * 1000.0}));
    }
    // Warm up, and collect scroll anchors from real hits.
    let mut anchors: Vec<(String, i64)> = Vec::new();
    for q in BENCH_QUERIES {
        let mut d = DiscoverRequest::new(q);
        d.limit = 10;
        d.detail = crate::recall::Detail::Index;
        let r = hub.search(&key, &sctx, SearchRequest::Discover(d)).await;
        anchors.extend(hits_of(&r));
    }
    let mut rng = corpus::Rng::new(opts.seed ^ 0x9E37);
    let mut timings: Vec<Value> = Vec::new();
    let mut paths: std::collections::BTreeMap<String, usize> = Default::default();
    let discover_cpu = cpu_seconds();
    let mut all = Vec::with_capacity(opts.iterations);
    let mut per_query: std::collections::BTreeMap<&str, (String, Vec<Duration>)> =
        Default::default();
    for i in 0..opts.iterations {
        let q = BENCH_QUERIES[i % BENCH_QUERIES.len()];
        let t = Instant::now();
        let r = hub.search(&key, &sctx, discover(q)).await;
        let el = t.elapsed();
        all.push(el);
        let path = path_of(&r);
        *paths.entry(path.clone()).or_default() += 1;
        per_query
            .entry(q)
            .or_insert_with(|| (path, Vec::new()))
            .1
            .push(el);
    }
    let discover_cpu_ms = (cpu_seconds() - discover_cpu) * 1000.0 / opts.iterations.max(1) as f64;
    timings.push(summary("mode", "discover", all));
    timings.push(summary("mode", "discover_first_call", first_calls));
    let per_query: Vec<Value> = per_query
        .into_iter()
        .map(|(q, (path, mut t))| {
            t.sort();
            json!({"query": q, "search_path": path, "p50_ms": percentile(&t, 0.5), "max_ms": percentile(&t, 1.0)})
        })
        .collect();
    let mut read = Vec::with_capacity(opts.iterations);
    for _ in 0..opts.iterations {
        let session_id = format!("s{:07}", 1 + rng.below(sessions as u64));
        let t = Instant::now();
        let _ = hub
            .search(&key, &sctx, SearchRequest::Read { session_id })
            .await;
        read.push(t.elapsed());
    }
    timings.push(summary("mode", "read", read));
    let mut scroll = Vec::with_capacity(opts.iterations);
    for i in 0..opts.iterations {
        let Some((sid, id)) = anchors.get(i % anchors.len().max(1)) else {
            break;
        };
        let req = SearchRequest::Scroll {
            session_id: sid.clone(),
            around_message_id: *id,
            window: crate::recall::DEFAULT_WINDOW,
        };
        let t = Instant::now();
        let _ = hub.search(&key, &sctx, req).await;
        scroll.push(t.elapsed());
    }
    timings.push(summary("mode", "scroll", scroll));
    let mut browse = Vec::with_capacity(opts.iterations);
    for _ in 0..opts.iterations {
        let t = Instant::now();
        let _ = hub
            .search(&key, &sctx, SearchRequest::Browse { limit: 10 })
            .await;
        browse.push(t.elapsed());
    }
    timings.push(summary("mode", "browse", browse));

    let cjk2 = cjk2_vs_like(&hub, &key, opts).await?;
    Ok(json!({
        "messages": opts.messages, "sessions": sessions, "corpus_mb": corpus_bytes as f64 / 1e6,
        "import": import_summary,
        "db_mb": db_bytes as f64 / 1e6,
        "search_paths": paths, "timings": timings, "discover_per_query": per_query,
        "discover_cpu_ms_per_call": discover_cpu_ms,
        "backfill": backfill, "ranking_statistics": ranking,
        "discover_first_call_per_query": first_per_query, "cjk2_vs_like": cjk2,
        "load_average_start": load_start, "load_average_end": load_average(),
    }))
}

/// The LIKE scan that a 2-character CJK discover ran before the cjk index existed: the LIKE
/// route for a one-term query with the default roles (user, assistant), visible rows only,
/// hidden sources excluded, newest first, at most 300 candidates. With `role_first: true` it is
/// the LIKE route in `search.rs` (filters before text, so tool bodies are never read);
/// `role_first: false` is the order it had before issue 5's fix (text first: SQLite evaluated
/// the LIKEs on every tool body before rejecting the row).
fn like_scan_sql(role_first: bool) -> String {
    let hidden = crate::store::HIDDEN_SOURCES
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

/// Run the LIKE scan once and read every candidate row as the LIKE route does; returns how many.
fn like_scan(st: &mut rusqlite::Statement<'_>, pattern: &str) -> Result<usize> {
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

/// One LIKE scan, timed: returns its wall time and adds its CPU seconds to `cpu`.
fn timed_scan(st: &mut rusqlite::Statement<'_>, pattern: &str, cpu: &mut f64) -> Result<Duration> {
    let c = cpu_seconds();
    let t = Instant::now();
    like_scan(st, pattern)?;
    let el = t.elapsed();
    *cpu += cpu_seconds() - c;
    Ok(el)
}

/// One 2-character CJK query's timings: discover through the cjk index, and the two LIKE scans.
#[derive(Default)]
struct Cjk2Timings {
    info: Value,
    cjk: Vec<Duration>,
    like: Vec<Duration>,
    like_role_first: Vec<Duration>,
}

/// 2-character CJK discover through the cjk index vs the LIKE scan it replaces, interleaved so
/// both see the same machine load. The LIKE side is the candidate scan alone (no hydration, no
/// snippets): a lower bound of what the LIKE route cost a discover.
async fn cjk2_vs_like(hub: &History, key: &UserKey, opts: &SyntheticOptions) -> Result<Value> {
    let sctx = SearchContext::default();
    let like_iterations = opts.like_iterations.unwrap_or(opts.iterations);
    let conn = rusqlite::Connection::open_with_flags(
        hub.db_path(key),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.execute_batch("PRAGMA temp_store = MEMORY;")?;
    let mut st = conn.prepare(&like_scan_sql(false))?;
    let mut st_rf = conn.prepare(&like_scan_sql(true))?;
    let mut cjk_paths: std::collections::BTreeMap<String, usize> = Default::default();
    let mut per_query: Vec<Cjk2Timings> = Vec::new();
    // Warm-up, and what each query matches.
    for q in CJK2_QUERIES {
        let r = hub.search(key, &sctx, discover(q)).await;
        let pattern = crate::query::like_pattern(q);
        let rows = like_scan(&mut st, &pattern)?;
        if like_scan(&mut st_rf, &pattern)? != rows {
            return Err(HistoryError::Worker(format!(
                "the two LIKE scans disagree on {q}"
            )));
        }
        let matching: i64 = conn.query_row(
            "SELECT COUNT(*) FROM messages WHERE role IN ('user','assistant') \
             AND content LIKE ?1 ESCAPE '\\'",
            [&pattern],
            |r| r.get(0),
        )?;
        per_query.push(Cjk2Timings {
            info: json!({"query": q, "search_path": path_of(&r), "sessions": hits_of(&r).len(),
                   "like_candidates": rows, "matching_user_assistant_rows": matching}),
            ..Default::default()
        });
    }
    let (mut all_cjk, mut all_like, mut all_rf) = (Vec::new(), Vec::new(), Vec::new());
    let (mut cjk_cpu, mut like_cpu, mut rf_cpu) = (0.0, 0.0, 0.0);
    for i in 0..opts.iterations.max(like_iterations) {
        let k = i % CJK2_QUERIES.len();
        let q = CJK2_QUERIES[k];
        if i < opts.iterations {
            let c = cpu_seconds();
            let t = Instant::now();
            let r = hub.search(key, &sctx, discover(q)).await;
            let el = t.elapsed();
            cjk_cpu += cpu_seconds() - c;
            *cjk_paths.entry(path_of(&r)).or_default() += 1;
            all_cjk.push(el);
            per_query[k].cjk.push(el);
        }
        if i < like_iterations {
            let pattern = crate::query::like_pattern(q);
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
            info["cjk_discover"] = summary("query", "cjk", t.cjk);
            info["like_scan"] = summary("query", "like", t.like);
            info["like_scan_role_first"] = summary("query", "like_role_first", t.like_role_first);
            info
        })
        .collect();
    let (n_cjk, n_like) = (all_cjk.len().max(1) as f64, all_like.len().max(1) as f64);
    Ok(json!({
        "queries": CJK2_QUERIES, "search_paths": cjk_paths,
        "cjk_discover": summary("query", "all", all_cjk),
        "cjk_discover_cpu_ms_per_call": cjk_cpu * 1000.0 / n_cjk,
        "like_scan": summary("query", "all", all_like),
        "like_scan_cpu_ms_per_call": like_cpu * 1000.0 / n_like,
        "like_sql": like_scan_sql(false),
        "like_scan_role_first": summary("query", "all", all_rf),
        "like_scan_role_first_cpu_ms_per_call": rf_cpu * 1000.0 / n_like,
        "like_sql_role_first": like_scan_sql(true),
        "per_query": per_query,
    }))
}

/// One line of the queries file.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryLine {
    query: String,
    /// Groups the timings (e.g. `exact`, `paraphrase`, `cjk`); default `discover`.
    #[serde(default)]
    kind: Option<String>,
    /// Sessions a good answer contains.
    #[serde(default)]
    expected_session_ids: Vec<String>,
    /// Comma-separated roles (user, assistant, tool); default user,assistant.
    #[serde(default)]
    role_filter: Option<String>,
}

fn parse_roles(text: &str) -> std::result::Result<Vec<SearchRole>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(|r| match r.to_ascii_lowercase().as_str() {
            "user" => Ok(SearchRole::User),
            "assistant" => Ok(SearchRole::Assistant),
            "tool" => Ok(SearchRole::Tool),
            other => Err(format!("unknown role {other:?}")),
        })
        .collect()
}

fn read_queries(path: &Path) -> Result<Vec<QueryLine>> {
    let f = std::fs::File::open(path).map_err(io(path))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = line.map_err(io(path))?;
        if line.trim().is_empty() {
            continue;
        }
        let q: QueryLine = serde_json::from_str(&line).map_err(|e| {
            HistoryError::InvalidInput(format!("{} line {}: {e}", path.display(), i + 1))
        })?;
        if let Some(r) = &q.role_filter {
            parse_roles(r).map_err(|e| {
                HistoryError::InvalidInput(format!("{} line {}: {e}", path.display(), i + 1))
            })?;
        }
        out.push(q);
    }
    Ok(out)
}

/// The benchmark on the caller's own data (see the module docs).
pub async fn from_files(
    opts: &FileOptions,
    report: &(dyn Fn(BenchEvent) + Send + Sync),
) -> Result<Value> {
    let queries = read_queries(&opts.queries)?;
    let dir = &opts.dir;
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let hub = quiet_history(dir.join("data"));
    let key = bench_user();
    let (stats, import_summary) = import_file(&hub, &key, &opts.corpus, report).await?;
    let status = hub.status(&key).await?;
    let k = opts.k.clamp(1, crate::recall::MAX_LIMIT);
    let sctx = SearchContext::default();
    struct Kind {
        times: Vec<Duration>,
        queries: usize,
        judged: usize,
        any_hit: usize,
        recall_sum: f64,
    }
    let mut kinds: std::collections::BTreeMap<String, Kind> = Default::default();
    let mut misses = Vec::new();
    for q in &queries {
        let kind = q.kind.clone().unwrap_or_else(|| "discover".into());
        let mut req = DiscoverRequest::new(q.query.clone());
        req.limit = k;
        req.detail = crate::recall::Detail::Index;
        if let Some(r) = &q.role_filter {
            req.roles = parse_roles(r).map_err(HistoryError::InvalidInput)?;
        }
        let entry = kinds.entry(kind.clone()).or_insert(Kind {
            times: Vec::new(),
            queries: 0,
            judged: 0,
            any_hit: 0,
            recall_sum: 0.0,
        });
        entry.queries += 1;
        let mut found: Vec<String> = Vec::new();
        for i in 0..opts.iterations.max(1) {
            let t = Instant::now();
            let r = hub
                .search(&key, &sctx, SearchRequest::Discover(req.clone()))
                .await;
            entry.times.push(t.elapsed());
            if i == 0 {
                if let Err(e) = &r {
                    return Err(HistoryError::Worker(format!(
                        "query {:?} failed: {e}",
                        q.query
                    )));
                }
                found = hits_of(&r).into_iter().map(|h| h.0).collect();
            }
        }
        if !q.expected_session_ids.is_empty() {
            entry.judged += 1;
            let got = q
                .expected_session_ids
                .iter()
                .filter(|s| found.contains(s))
                .count();
            entry.recall_sum += got as f64 / q.expected_session_ids.len() as f64;
            if got > 0 {
                entry.any_hit += 1;
            } else {
                misses.push(json!({"kind": kind, "query": q.query, "expected": q.expected_session_ids, "found": found}));
            }
        }
    }
    let mut per_kind = Vec::new();
    let (mut judged, mut any_hit, mut recall_sum, mut all) = (0, 0, 0.0, Vec::new());
    for (name, kd) in kinds {
        judged += kd.judged;
        any_hit += kd.any_hit;
        recall_sum += kd.recall_sum;
        all.extend(kd.times.iter().copied());
        let mut v = summary("kind", &name, kd.times);
        v["queries"] = json!(kd.queries);
        v["judged"] = json!(kd.judged);
        v[format!("hit_rate_at_{k}")] = json!(kd.any_hit as f64 / kd.judged.max(1) as f64);
        v[format!("recall_at_{k}")] = json!(kd.recall_sum / kd.judged.max(1) as f64);
        per_kind.push(v);
    }
    let mut overall = summary("kind", "all", all);
    overall["judged"] = json!(judged);
    overall[format!("hit_rate_at_{k}")] = json!(any_hit as f64 / judged.max(1) as f64);
    overall[format!("recall_at_{k}")] = json!(recall_sum / judged.max(1) as f64);
    misses.truncate(20);
    Ok(json!({
        "corpus": opts.corpus, "queries_file": opts.queries, "k": k,
        "messages": status.messages, "sessions": status.sessions, "skipped_lines": stats.skipped.len(),
        "import": import_summary, "db_mb": db_bytes(&hub, &key) as f64 / 1e6,
        "overall": overall, "per_kind": per_kind, "first_misses": misses,
        "load_average": load_average(),
    }))
}
