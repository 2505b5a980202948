//! Hardening benchmark of `mpagent serve` (issue 12): logins under attack and idle connections.
//! Run with `cargo bench -p mpa-server --bench hardening` after
//! `cargo build --release -p mpa-cli`. Every phase starts a fresh host so its peak RSS (`VmHWM`)
//! is that phase's alone; only the server process is measured.
//!
//! - login: 200 parallel logins of unknown users, each from its own loopback address (all reach
//!   argon2: throughput, busy answers and peak RSS under the hashing semaphore); 200 parallel
//!   guesses at one account from one address (the limit answers); sequential right-password
//!   logins per second.
//! - connections: `MPA_BENCH_CONNS` (10,000) keep-alive connections that each send one request
//!   and then idle, spread over loopback addresses below the per-address limit: host RSS and open
//!   descriptors, then how long until the header read timeout has closed them all.
//!
//! - huge messages (issue 24): three 31 MB `text`s on the stream API (under the 32 MiB body
//!   limit): their answers, the host's peak RSS and how much the data directory grew.
//!
//! Env: `MPA_BENCH_PHASES` (comma list of `login`, `connections`, `huge`; default all),
//! `MPA_BIN`, `MPA_BENCH_CONNS`, `MPA_BENCH_HEADER_TIMEOUT` (seconds, default 60 here so
//! that opening all connections on a loaded machine finishes before the first ones time out; the
//! host's default is 30).
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's panic is its failure report"
)]

mod common;

use common::*;
use mpa_test_support::MockModelServer;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

fn client_from(ip: IpAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip)
        .build()
        .unwrap()
}

async fn login(c: &reqwest::Client, addr: &str, name: &str, password: &str) -> u16 {
    c.post(format!("http://{addr}/api/v1/login"))
        .json(&serde_json::json!({"username": name, "password": password}))
        .send()
        .await
        .map_or(0, |r| r.status().as_u16())
}

fn tally(statuses: &[u16]) -> String {
    let mut counts = std::collections::BTreeMap::new();
    for s in statuses {
        *counts.entry(*s).or_insert(0) += 1;
    }
    counts
        .iter()
        .map(|(s, n)| format!("{n}×{s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn add_user(data: &std::path::Path, name: &str, password: &str) {
    let mut c = tokio::process::Command::new(bin());
    c.env_clear()
        .arg("--data-dir")
        .arg(data)
        .args(["user", "add", name, "--password-stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n").as_bytes())
        .await
        .unwrap();
    assert!(child.wait().await.unwrap().success());
}

async fn parallel(
    label: &str,
    mock: &MockModelServer,
    attempts: impl Fn(usize) -> (IpAddr, String, String),
) {
    let dir = tempfile::tempdir().unwrap();
    add_user(dir.path(), "owner", "owner-password").await;
    let (mut child, addr, _) = start(dir.path(), mock, &[]).await;
    let pid = child.id().unwrap();
    let idle = rss_kb(pid);
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let (ip, name, password) = attempts(i);
            let addr = addr.clone();
            tokio::spawn(async move { login(&client_from(ip), &addr, &name, &password).await })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    let wall = t0.elapsed();
    let checked = statuses.iter().filter(|s| **s == 401 || **s == 200).count();
    println!(
        "{label}: {} in {wall:.2?} ({:.0} checked/s); RSS idle {:.1} MB, peak {:.1} MB",
        tally(&statuses),
        checked as f64 / wall.as_secs_f64(),
        mb(idle),
        mb(status_kb(pid, "VmHWM:")),
    );
    child.kill().await.unwrap();
}

async fn sequential_logins(mock: &MockModelServer) {
    let dir = tempfile::tempdir().unwrap();
    add_user(dir.path(), "owner", "owner-password").await;
    let (mut child, addr, _) = start(dir.path(), mock, &[]).await;
    let c = reqwest::Client::new();
    let n = 50;
    let t0 = Instant::now();
    for _ in 0..n {
        assert_eq!(login(&c, &addr, "owner", "owner-password").await, 200);
    }
    let wall = t0.elapsed();
    println!(
        "sequential right-password logins: {n} in {wall:.2?} = {:.1} logins/s ({:.1} ms each)",
        n as f64 / wall.as_secs_f64(),
        wall.as_secs_f64() * 1000.0 / n as f64
    );
    child.kill().await.unwrap();
}

/// Opens a connection from `ip`, sends one keep-alive request and reads its answer.
async fn idle_connection(ip: IpAddr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let sock = TcpSocket::new_v4()?;
    sock.bind(SocketAddr::new(ip, 0))?;
    let mut s = sock.connect(addr).await?;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n")
        .await?;
    let mut buf = [0u8; 512];
    let mut got = 0;
    // The whole answer is small; read until the JSON body's closing brace.
    while !buf[..got].ends_with(b"}") {
        let n = s.read(&mut buf[got..]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got += n;
    }
    Ok(s)
}

async fn connections(mock: &MockModelServer) {
    let n = env_num("MPA_BENCH_CONNS", 10_000);
    let timeout = env_num("MPA_BENCH_HEADER_TIMEOUT", 60);
    let per_ip = 250;
    let dir = tempfile::tempdir().unwrap();
    let timeout_s = timeout.to_string();
    let (mut child, addr, _) = start(
        dir.path(),
        mock,
        &[("MPA_HEADER_TIMEOUT_SECS", timeout_s.as_str())],
    )
    .await;
    let pid = child.id().unwrap();
    let (idle_rss, idle_fds) = (rss_kb(pid), fd_count(pid));
    let target: SocketAddr = addr.parse().unwrap();
    let t0 = Instant::now();
    let mut open = Vec::with_capacity(n);
    let mut failed = 0;
    for batch in (0..n).collect::<Vec<_>>().chunks(1000) {
        let tasks: Vec<_> = batch
            .iter()
            .map(|i| {
                let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 3, (1 + i / per_ip) as u8));
                tokio::spawn(idle_connection(ip, target))
            })
            .collect();
        for t in tasks {
            match t.await.unwrap() {
                Ok(s) => open.push(s),
                Err(_) => failed += 1,
            }
        }
    }
    let opened = t0.elapsed();
    let all_open = Instant::now();
    println!(
        "{} idle keep-alive connections ({} failed) over {} addresses, opened in {opened:.2?}: host RSS {:.1} MB (idle {:.1}), peak {:.1} MB, open fds {} (idle {})",
        open.len(),
        failed,
        n.div_ceil(per_ip),
        mb(rss_kb(pid)),
        mb(idle_rss),
        mb(status_kb(pid, "VmHWM:")),
        fd_count(pid),
        idle_fds
    );
    // Wait for the header read timeout to close them (the host's descriptors fall back).
    let deadline = Instant::now() + Duration::from_secs(timeout as u64 * 3 + 30);
    while fd_count(pid) > idle_fds + 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let closed_after = all_open.elapsed();
    let mut eof = 0;
    for s in &mut open {
        let mut b = [0u8; 1];
        if matches!(
            tokio::time::timeout(Duration::from_millis(50), s.read(&mut b)).await,
            Ok(Ok(0) | Err(_))
        ) {
            eof += 1;
        }
    }
    println!(
        "  header read timeout {timeout} s: host fds back to {} after {closed_after:.1?} (from the last connection's request); {eof}/{} client sockets saw the close; RSS then {:.1} MB",
        fd_count(pid),
        open.len(),
        mb(rss_kb(pid))
    );
    child.kill().await.unwrap();
}

/// Bytes of every file under `dir` (the databases with their WAL files).
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => dir_bytes(&e.path()),
                Ok(_) => e.metadata().map_or(0, |m| m.len()),
                Err(_) => 0,
            })
            .sum()
    })
}

async fn huge_messages(mock: &MockModelServer) {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr, _) = start(dir.path(), mock, &[]).await;
    let pid = child.id().unwrap();
    let (idle, before) = (rss_kb(pid), dir_bytes(dir.path()));
    let text = "a".repeat(31 * 1024 * 1024);
    let body = serde_json::json!({"text": text, "session_id": "huge"}).to_string();
    drop(text);
    let c = reqwest::Client::new();
    let mut answers = Vec::new();
    for _ in 0..3 {
        let r = c
            .post(format!("http://{addr}/api/v1/agent/stream"))
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let answer = r.text().await.unwrap_or_default();
        let code = serde_json::from_str::<serde_json::Value>(&answer)
            .ok()
            .and_then(|v| v["error"]["code"].as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("{} bytes of SSE", answer.len()));
        answers.push(format!("{status} {code}"));
    }
    // A turn that was accepted writes its snapshot when it ends; give it the time to.
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "3 × 31 MB text on /api/v1/agent/stream: {}; RSS idle {:.1} MB, peak {:.1} MB, after {:.1} MB; \
         data dir grew {:.1} MB",
        answers.join(", "),
        mb(idle),
        mb(status_kb(pid, "VmHWM:")),
        mb(rss_kb(pid)),
        (dir_bytes(dir.path()).saturating_sub(before)) as f64 / 1_048_576.0,
    );
    child.kill().await.unwrap();
}

#[tokio::main]
async fn main() {
    let mock = MockModelServer::start().await;
    println!("binary: {}", bin().display());
    let phases =
        std::env::var("MPA_BENCH_PHASES").unwrap_or_else(|_| "login,connections,huge".into());
    let run = |p: &str| phases.split(',').any(|x| x.trim() == p);
    if run("login") {
        logins(&mock).await;
    }
    if run("connections") {
        connections(&mock).await;
    }
    if run("huge") {
        huge_messages(&mock).await;
    }
}

async fn logins(mock: &MockModelServer) {
    let own_address = |i: usize| IpAddr::V4(Ipv4Addr::new(127, 0, 1, 1 + i as u8));
    parallel(
        "200 parallel unknown-user logins, each from its own address",
        mock,
        |i| (own_address(i), format!("nobody{i}"), "some-password".into()),
    )
    .await;
    parallel(
        "200 parallel guesses at one account from one address",
        mock,
        |i| {
            (
                IpAddr::V4(Ipv4Addr::new(127, 0, 2, 1)),
                "owner".into(),
                format!("guess-{i}"),
            )
        },
    )
    .await;
    sequential_logins(mock).await;
}
