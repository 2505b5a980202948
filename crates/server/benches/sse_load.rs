//! Load benchmark of `mpagent serve` (run with `cargo bench -p mpa-server --bench sse_load`):
//! start-to-ready, idle RSS, and N concurrent SSE chats against an instant mock model, reporting
//! p50/p99 time to first delta and the host's CPU per turn (from /proc, so only the server process
//! is counted, not this load generator or the mock model).
//!
//! Env: `MPA_BIN` (default: the `mpagent` next to this bench in the target dir; build it with
//! `cargo build --release -p mpa-cli`), `MPA_BENCH_CHATS` (500), `MPA_BENCH_ROUNDS` (2).
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's panic is its failure report"
)]

mod common;

use common::*;
use futures_util::StreamExt;
use mpa_test_support::{MockModelServer, MockReply};
use std::time::{Duration, Instant};

/// The chats all come from 127.0.0.1, beyond the default per-address connection limit.
const ENV: &[(&str, &str)] = &[("MPA_MAX_CONNECTIONS_PER_IP", "100000")];

/// One chat: returns time to first delta, or an error description.
async fn chat(
    http: reqwest::Client,
    addr: String,
    i: usize,
    round: usize,
) -> Result<Duration, String> {
    let t0 = Instant::now();
    let r = http
        .post(format!("http://{addr}/api/v1/agent/stream"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&serde_json::json!({"text": format!("hello {i}"), "session_id": format!("bench-{round}-{i}")}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!("status {}", r.status()));
    }
    let mut body = r.bytes_stream();
    let mut buf = String::new();
    let mut first = None;
    while let Some(chunk) = body.next().await {
        buf.push_str(&String::from_utf8_lossy(&chunk.map_err(|e| e.to_string())?));
        while let Some(i) = buf.find("\n\n") {
            let frame: String = buf.drain(..i + 2).collect();
            if frame.contains("\"type\":\"delta\"") && first.is_none() {
                first = Some(t0.elapsed());
            }
            if frame.contains("\"type\":\"error\"") {
                return Err(frame.trim().to_string());
            }
            if frame.contains("\"type\":\"done\"") {
                return first.ok_or_else(|| "done without a delta".to_string());
            }
        }
    }
    Err("stream ended without done".into())
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let chats = env_num("MPA_BENCH_CHATS", 500);
        let rounds = env_num("MPA_BENCH_ROUNDS", 2);
        let mock = MockModelServer::start().await;
        mock.set_default(MockReply::text("Hello from the instant mock model, streamed in pieces."));
        println!("binary: {}", bin().display());

        let mut readies = Vec::new();
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let (mut child, _, ready) = start(dir.path(), &mock, ENV).await;
            readies.push(ready);
            child.kill().await.unwrap();
        }
        readies.sort();
        println!("start to ready (spawn -> /healthz 200), 5 runs: median {:?}, max {:?}", pct(&readies, 0.5), readies[4]);

        let dir = tempfile::tempdir().unwrap();
        let (mut child, addr, _) = start(dir.path(), &mock, ENV).await;
        let pid = child.id().unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        println!("idle RSS after start: {:.1} MB", rss_kb(pid) as f64 / 1024.0);

        let http = reqwest::Client::builder().pool_max_idle_per_host(chats).build().unwrap();
        for round in 0..rounds {
            let cpu0 = cpu_secs(pid);
            let t0 = Instant::now();
            let tasks: Vec<_> = (0..chats)
                .map(|i| tokio::spawn(chat(http.clone(), addr.clone(), i, round)))
                .collect();
            let mut ok = Vec::new();
            let mut errors = Vec::new();
            for t in tasks {
                match t.await.unwrap() {
                    Ok(d) => ok.push(d),
                    Err(e) => errors.push(e),
                }
            }
            let wall = t0.elapsed();
            let cpu = cpu_secs(pid) - cpu0;
            ok.sort();
            println!(
                "round {round}: {chats} concurrent chats, {} ok, {} errors, wall {:?}; time to first delta p50 {:?} p99 {:?} max {:?}; host CPU {:.3} s = {:.2} ms/turn; RSS {:.1} MB",
                ok.len(),
                errors.len(),
                wall,
                pct(&ok, 0.5),
                pct(&ok, 0.99),
                ok.last().copied().unwrap_or_default(),
                cpu,
                cpu * 1000.0 / chats as f64,
                rss_kb(pid) as f64 / 1024.0
            );
            if let Some(e) = errors.first() {
                println!("  first error: {e}");
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        println!("RSS after load, idle again: {:.1} MB", rss_kb(pid) as f64 / 1024.0);
        child.kill().await.unwrap();
    });
}
