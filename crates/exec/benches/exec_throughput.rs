#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]
//! Capture, memory and latency benchmarks of `mpa-exec` (results: docs/benchmarks/exec.md).
//!
//! `cargo bench -p mpa-exec --bench exec_throughput` — env `MPA_BENCH_BYTES` (default 1 GiB of
//! input to `base64`) and `MPA_BENCH_ITERS` (default 200) tune the size.

use mpa_exec::{
    CommandSpec, ExecConfig, OutputCursor, Processes, ScopeId, ScopeOwner, SessionAction,
    SessionReport, SessionRequest, SessionStatus, Signal, StartRequest,
};
use mpa_protocol::UserId;
use mpa_redact::UserKey;
use std::time::{Duration, Instant};

fn start_req(command: &str, use_pty: bool, yield_time: Duration) -> StartRequest {
    StartRequest {
        spec: CommandSpec {
            command: command.into(),
            ..CommandSpec::default()
        },
        use_pty,
        yield_time,
        since_offset: None,
        max_bytes: 10_240,
    }
}

fn request(id: &str, cursor: OutputCursor, action: SessionAction) -> SessionRequest {
    SessionRequest {
        session_id: id.into(),
        cursor,
        max_bytes: 10_240,
        action,
    }
}

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

async fn finished(p: &Processes, scope: &ScopeId, id: &str) -> SessionReport {
    loop {
        let v = p
            .session_action(
                scope,
                request(id, OutputCursor::default(), SessionAction::Status),
            )
            .await
            .unwrap();
        if v.status != SessionStatus::Running && v.output_complete {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn capture(p: &Processes, scope: &ScopeId, bytes: u64, use_pty: bool) -> (f64, f64) {
    let command = format!("head -c {bytes} /dev/zero | base64");
    // base64 wraps at 76 columns: 4/3 expansion plus one newline per 76 characters.
    let encoded = bytes.div_ceil(3) * 4;
    let produced = encoded + encoded.div_ceil(76) * if use_pty { 2 } else { 1 };
    let t0 = Instant::now();
    let v = p
        .start(scope, start_req(&command, use_pty, Duration::ZERO))
        .await
        .unwrap();
    let done = finished(p, scope, &v.session_id).await;
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(done.exit_code, Some(0), "{done:?}");
    (produced as f64 / secs / 1e6, secs)
}

/// One session fed `bytes` of output: RSS growth of the process while it runs (the retained
/// window is 1 MiB per session), and that reading from the start reports the loss.
async fn retained_window(p: &Processes, scope: &ScopeId, bytes: u64) -> (u64, u64) {
    let before = status_kib("VmRSS:");
    let command = format!("head -c {bytes} /dev/zero | tr '\\0' a");
    let v = p
        .start(scope, start_req(&command, false, Duration::ZERO))
        .await
        .unwrap();
    let mut peak = before;
    let done = loop {
        let v = p
            .session_action(
                scope,
                request(
                    &v.session_id,
                    OutputCursor::default(),
                    SessionAction::Status,
                ),
            )
            .await
            .unwrap();
        peak = peak.max(status_kib("VmRSS:"));
        if v.status != SessionStatus::Running && v.output_complete {
            break v;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(done.exit_code, Some(0));
    assert!(done.last_seq >= bytes / 4096);
    let first = OutputCursor {
        since_seq: Some(0),
        since_offset: Some(0),
    };
    let read = p
        .session_action(scope, request(&done.session_id, first, SessionAction::Read))
        .await
        .unwrap();
    assert!(read.output_lost && read.output_complete);
    (before, peak)
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

async fn first_output(p: &Processes, scope: &ScopeId, use_pty: bool, iters: u64) -> Vec<Duration> {
    let mut samples = Vec::new();
    for _ in 0..iters {
        let t0 = Instant::now();
        let v = p
            .start(scope, start_req("echo hi", use_pty, Duration::from_secs(5)))
            .await
            .unwrap();
        let elapsed = t0.elapsed();
        assert!(v.output.contains("hi"), "{v:?}");
        samples.push(elapsed);
        finished(p, scope, &v.session_id).await;
    }
    samples
}

async fn wait_wakeup(p: &Processes, scope: &ScopeId, iters: u64) -> Vec<Duration> {
    let v = p
        .start(scope, start_req("cat", false, Duration::ZERO))
        .await
        .unwrap();
    let id = v.session_id;
    let mut samples = Vec::new();
    for _ in 0..iters {
        let status = p
            .session_action(
                scope,
                request(&id, OutputCursor::default(), SessionAction::Status),
            )
            .await
            .unwrap();
        let seen = OutputCursor {
            since_seq: Some(status.last_seq),
            since_offset: Some(0),
        };
        let waiter = {
            let (p, scope, id) = (p.clone(), scope.clone(), id.clone());
            tokio::spawn(async move {
                let wait = SessionAction::Wait {
                    timeout: Duration::from_secs(5),
                };
                let v = p
                    .session_action(&scope, request(&id, seen, wait))
                    .await
                    .unwrap();
                (Instant::now(), v)
            })
        };
        // Let the waiter park before producing output.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let t0 = Instant::now();
        let write = SessionAction::Write {
            input: "x\n".into(),
            close_stdin: false,
        };
        let mut req = request(&id, OutputCursor::default(), write);
        req.max_bytes = 1;
        p.session_action(scope, req).await.unwrap();
        let (woke, v) = waiter.await.unwrap();
        if v.wait_reason == Some(mpa_exec::WaitReason::Output) {
            samples.push(woke.saturating_duration_since(t0));
        }
    }
    let kill = SessionAction::Kill {
        signal: Signal::TERM,
    };
    p.session_action(scope, request(&id, OutputCursor::default(), kill))
        .await
        .unwrap();
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
    let p = Processes::new(ExecConfig::new(dir.clone(), dir.clone()));
    let scope = p.open_scope(ScopeOwner {
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
        // First, before the capture runs inflate the baseline: one session, 1 GiB of output.
        let (before, peak) = retained_window(&p, &scope, 1 << 30).await;
        println!(
            "retained window (1 GiB through one pipe session): RSS before {before} KiB, peak {peak} KiB, growth {} KiB; output_lost reported on an old cursor",
            peak.saturating_sub(before)
        );
        let (pipe_mbs, pipe_s) = capture(&p, &scope, bytes, false).await;
        println!("pipe capture: {pipe_mbs:.0} MB/s ({pipe_s:.2} s)");
        let (pty_mbs, pty_s) = capture(&p, &scope, bytes, true).await;
        println!("pty capture: {pty_mbs:.0} MB/s ({pty_s:.2} s)");
        println!(
            "RSS before {rss_before} KiB, peak (VmHWM) {} KiB, now {} KiB",
            status_kib("VmHWM:"),
            status_kib("VmRSS:")
        );
        for use_pty in [false, true] {
            let mut samples = first_output(&p, &scope, use_pty, iters.min(100)).await;
            println!(
                "start→first output (echo hi, {}): p50 {:?} p90 {:?} (n={})",
                if use_pty { "pty" } else { "pipe" },
                percentile(&mut samples, 0.5),
                percentile(&mut samples, 0.9),
                samples.len()
            );
        }
        let mut samples = wait_wakeup(&p, &scope, iters).await;
        println!(
            "write→wait wake-up (cat echo round trip): p50 {:?} p90 {:?} (n={})",
            percentile(&mut samples, 0.5),
            percentile(&mut samples, 0.9),
            samples.len()
        );
        // The orphan reaper scans /proc once per SIGCHLD: what one pass costs on this machine.
        let processes = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
            .count();
        let mut passes: Vec<Duration> = (0..200)
            .map(|_| {
                let t0 = Instant::now();
                mpa_exec::reap_orphans();
                t0.elapsed()
            })
            .collect();
        println!(
            "orphan reaper pass over {processes} processes: p50 {:?} p90 {:?} (n=200)",
            percentile(&mut passes, 0.5),
            percentile(&mut passes, 0.9)
        );
        p.shutdown().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}
