#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Capture and latency benchmarks of `mpa-exec` (results: docs/benchmarks/exec.md).
//!
//! `cargo bench -p mpa-exec --bench exec_throughput` — env `MPA_BENCH_BYTES` (default 1 GiB of
//! input to `base64`) and `MPA_BENCH_ITERS` (default 200) tune the size.

use mpa_exec::{ExecConfig, ExecHub, ScopeId, ScopeOwner};
use mpa_protocol::{UserId, UserKey};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

async fn finished(hub: &ExecHub, scope: &ScopeId, id: &str) -> Value {
    loop {
        let v = hub
            .execute(scope, json!({"action": "status", "session_id": id}))
            .await;
        if v["status"] != "running" && v["output_complete"] == true {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn capture(hub: &ExecHub, scope: &ScopeId, bytes: u64, use_pty: bool) -> (f64, f64) {
    let command = format!("head -c {bytes} /dev/zero | base64");
    // base64 wraps at 76 columns: 4/3 expansion plus one newline per 76 characters.
    let encoded = bytes.div_ceil(3) * 4;
    let produced = encoded + encoded.div_ceil(76) * if use_pty { 2 } else { 1 };
    let t0 = Instant::now();
    let v = hub
        .execute(
            scope,
            json!({"action": "start", "command": command, "use_pty": use_pty, "yield_time_ms": 0}),
        )
        .await;
    let id = v["session_id"].as_str().unwrap().to_string();
    let done = finished(hub, scope, &id).await;
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(done["exit_code"], 0, "{done}");
    (produced as f64 / secs / 1e6, secs)
}

fn producer_only(bytes: u64) -> f64 {
    let t0 = Instant::now();
    let status = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("head -c {bytes} /dev/zero | base64 > /dev/null"),
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let encoded = bytes.div_ceil(3) * 4;
    (encoded + encoded.div_ceil(76)) as f64 / t0.elapsed().as_secs_f64() / 1e6
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

async fn first_output(hub: &ExecHub, scope: &ScopeId, use_pty: bool, iters: u64) -> Vec<Duration> {
    let mut samples = Vec::new();
    for _ in 0..iters {
        let t0 = Instant::now();
        let v = hub
            .execute(
                scope,
                json!({"action": "start", "command": "echo hi", "use_pty": use_pty, "yield_time_ms": 5000}),
            )
            .await;
        let elapsed = t0.elapsed();
        assert!(v["output"].as_str().unwrap().contains("hi"), "{v}");
        samples.push(elapsed);
        finished(hub, scope, v["session_id"].as_str().unwrap()).await;
    }
    samples
}

async fn wait_wakeup(hub: &ExecHub, scope: &ScopeId, iters: u64) -> Vec<Duration> {
    let v = hub
        .execute(
            scope,
            json!({"action": "start", "command": "cat", "use_pty": false, "yield_time_ms": 0}),
        )
        .await;
    let id = v["session_id"].as_str().unwrap().to_string();
    let mut samples = Vec::new();
    for _ in 0..iters {
        let status = hub
            .execute(scope, json!({"action": "status", "session_id": id}))
            .await;
        let seen = status["last_seq"].as_u64().unwrap();
        let waiter = {
            let hub = hub.clone();
            let scope = scope.clone();
            let id = id.clone();
            tokio::spawn(async move {
                let v = hub
                    .execute(
                        &scope,
                        json!({"action": "wait", "session_id": id, "timeout_ms": 5000,
                               "since_seq": seen, "since_offset": 0}),
                    )
                    .await;
                (Instant::now(), v)
            })
        };
        // Let the waiter park before producing output.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let t0 = Instant::now();
        hub.execute(
            scope,
            json!({"action": "write", "session_id": id, "input_text": "x\n", "max_bytes": 1}),
        )
        .await;
        let (woke, v) = waiter.await.unwrap();
        if v["wait_reason"] == "output" {
            samples.push(woke.saturating_duration_since(t0));
        }
    }
    hub.execute(scope, json!({"action": "kill", "session_id": id}))
        .await;
    samples
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("mpa-exec-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hub = ExecHub::new(ExecConfig {
        workdir: dir.clone(),
        venv_path: None,
        spill_dir: dir.clone(),
    });
    let scope = hub.open_scope(ScopeOwner {
        user_key: UserKey::for_user(&UserId("bench".into())),
        label: "bench".into(),
    });
    let bytes = env_u64("MPA_BENCH_BYTES", 1 << 30);
    let iters = env_u64("MPA_BENCH_ITERS", 200);
    runtime.block_on(async {
        let rss_before = status_kib("VmRSS:");
        println!(
            "producer alone (head -c {bytes} /dev/zero | base64 > /dev/null): {:.0} MB/s",
            producer_only(bytes)
        );
        let (pipe_mbs, pipe_s) = capture(&hub, &scope, bytes, false).await;
        println!("pipe capture: {pipe_mbs:.0} MB/s ({pipe_s:.2} s)");
        let (pty_mbs, pty_s) = capture(&hub, &scope, bytes, true).await;
        println!("pty capture: {pty_mbs:.0} MB/s ({pty_s:.2} s)");
        println!(
            "RSS before {rss_before} KiB, peak (VmHWM) {} KiB, now {} KiB",
            status_kib("VmHWM:"),
            status_kib("VmRSS:")
        );
        for use_pty in [false, true] {
            let mut samples = first_output(&hub, &scope, use_pty, iters.min(100)).await;
            println!(
                "start→first output (echo hi, {}): p50 {:?} p90 {:?} (n={})",
                if use_pty { "pty" } else { "pipe" },
                percentile(&mut samples, 0.5),
                percentile(&mut samples, 0.9),
                samples.len()
            );
        }
        let mut samples = wait_wakeup(&hub, &scope, iters).await;
        println!(
            "write→wait wake-up (cat echo round trip): p50 {:?} p90 {:?} (n={})",
            percentile(&mut samples, 0.5),
            percentile(&mut samples, 0.9),
            samples.len()
        );
        hub.shutdown().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}
