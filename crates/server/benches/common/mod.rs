//! What the `mpagent serve` benchmarks share: finding and starting the release binary, and
//! reading a process's RSS, peak RSS, descriptors and CPU from /proc.
#![allow(dead_code, reason = "each bench uses a subset of these helpers")]

use mpa_test_support::MockModelServer;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const ADMIN_TOKEN: &str = "bench-admin-token-0123456789abcdef";

pub fn bin() -> PathBuf {
    if let Ok(p) = std::env::var("MPA_BIN") {
        return p.into();
    }
    // <target>/release/deps/sse_load-xxxx -> <target>/release/mpagent
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("mpagent")
}

pub fn env_num(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

/// Starts `mpagent serve` on a free port with `extra_env` set; returns the process, its address
/// and the time from spawn to the first answered `/healthz`.
pub async fn start(
    data: &std::path::Path,
    mock: &MockModelServer,
    extra_env: &[(&str, &str)],
) -> (Child, String, Duration) {
    let t0 = Instant::now();
    let mut cmd = Command::new(bin());
    cmd.env_clear();
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("LLM_BASE_URL", &mock.base_url)
        .env("LLM_MODEL", "gpt-4o")
        .env("MPA_LISTEN", "127.0.0.1:0")
        .env("MPA_ADMIN_TOKEN", ADMIN_TOKEN)
        .arg("--data-dir")
        .arg(data)
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e} (set MPA_BIN)", bin().display()));
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let l = lines.next_line().await.unwrap().expect("serve exited");
        if let Some(a) = l.split("listening on http://").nth(1) {
            break a.trim().to_string();
        }
    };
    // Ready = answering HTTP, not just bound.
    let http = reqwest::Client::new();
    loop {
        if http
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let ready = t0.elapsed();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr, ready)
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:` = peak RSS since start).
pub fn status_kb(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

pub fn rss_kb(pid: u32) -> u64 {
    status_kb(pid, "VmRSS:")
}

/// Open file descriptors of a process.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// utime + stime of a process, in seconds.
pub fn cpu_secs(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = s.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / clk_tck()
}

/// Clock ticks per second of /proc times (`getconf CLK_TCK`; 100 on Linux when unknown).
pub fn clk_tck() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}

pub fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}
