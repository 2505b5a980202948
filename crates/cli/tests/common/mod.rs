//! What the binary-driving tests share: an `mpagent` command with a clean environment pointed at
//! the mock model server and a private data directory.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's panic is its failure report"
)]
#![allow(dead_code, reason = "each test crate uses a subset of these helpers")]

use mpa_test_support::MockModelServer;
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

pub const API_KEY: &str = "sk-test-SECRETKEY1234567890abcdef";

pub fn mpagent(data: &Path, mock: &MockModelServer) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mpagent"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", data)
        .env("LLM_BASE_URL", &mock.base_url)
        .env("LLM_API_KEY", API_KEY)
        .env("LLM_MODEL", "gpt-4o")
        .env("MPA_ENABLE_TEST_TOOLS", "true")
        .arg("--data-dir")
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    c
}

/// The static admin token (`MPA_ADMIN_TOKEN`) of [`serve_command`].
pub const ADMIN_TOKEN: &str = "admin-SECRET-token-0123456789abcdef";

/// [`mpagent`] set up for `serve`: a free port, [`ADMIN_TOKEN`], info logs.
pub fn serve_command(data: &Path, mock: &MockModelServer) -> Command {
    let mut c = mpagent(data, mock);
    c.env("MPA_LISTEN", "127.0.0.1:0")
        .env("MPA_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("MPA_LOG", "info");
    c
}

/// Runs `mpagent --data-dir DATA ARGS…` to completion (for commands that need no model).
pub fn mpagent_sync(data: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_mpagent"))
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("MPA_DATA_DIR")
        .output()
        .unwrap_or_else(|e| panic!("cannot run mpagent: {e}"))
}

/// Sends `sig` (`libc::SIGINT`, `libc::SIGTERM`, …) to a child the test spawned.
pub fn send_signal(child: &Child, sig: libc::c_int) {
    let pid = i32::try_from(child.id().expect("the child has not been reaped")).unwrap();
    // SAFETY: kill(2) on the id of a child process we spawned and still own; no memory is touched.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// A running `mpagent serve` with its address and everything it logged so far.
pub struct Serve {
    pub child: Child,
    pub addr: String,
    pub stderr: Arc<Mutex<String>>,
}

/// Spawns `cmd serve` and waits for its "listening on" line.
pub async fn serve(mut cmd: Command) -> Serve {
    cmd.arg("serve");
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let stderr = Arc::new(Mutex::new(String::new()));
    let addr = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            stderr.lock().unwrap().push_str(&format!("{l}\n"));
            if let Some(a) = l.split("listening on http://").nth(1) {
                return a.trim().to_string();
            }
        }
        panic!("serve exited early: {}", stderr.lock().unwrap());
    })
    .await
    .expect("serve never became ready");
    let sink = Arc::clone(&stderr);
    tokio::spawn(async move {
        while let Ok(Some(l)) = lines.next_line().await {
            sink.lock().unwrap().push_str(&format!("{l}\n"));
        }
    });
    Serve {
        child,
        addr,
        stderr,
    }
}

/// A minimal HTTP/1.1 request over a raw socket; returns a line reader over the response.
pub async fn request(
    addr: &str,
    method: &str,
    path: &str,
    token: &str,
    body: &Value,
) -> BufReader<tokio::net::TcpStream> {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = body.to_string();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body.as_bytes()).await.unwrap();
    BufReader::new(s)
}

/// The next SSE `data:` frame (frames are written one per chunk, so lines stay whole).
pub async fn next_frame(r: &mut BufReader<tokio::net::TcpStream>) -> Option<Value> {
    let mut line = String::new();
    loop {
        line.clear();
        let n = tokio::time::timeout(Duration::from_secs(30), r.read_line(&mut line))
            .await
            .expect("no SSE frame in time")
            .unwrap();
        if n == 0 {
            return None;
        }
        if let Some(d) = line.trim().strip_prefix("data: ") {
            return Some(serde_json::from_str(d).unwrap());
        }
    }
}

/// The agent messages of a session's saved chat snapshot, read straight from `agent.db`: the
/// last full snapshot followed by a running (or killed) turn's journal.
pub fn chat_messages(data: &Path, session: &str) -> Vec<Value> {
    let c = rusqlite::Connection::open(data.join("agent.db")).unwrap();
    let (s, journal): (String, Option<String>) = c
        .query_row(
            "SELECT c.agent_messages, j.journal FROM chats c
             LEFT JOIN chat_journals j ON j.session_id = c.session_id WHERE c.session_id = ?1",
            [session],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("snapshot row");
    let mut messages: Vec<Value> = serde_json::from_str(&s).unwrap();
    if let Some(j) = journal {
        let j: Value = serde_json::from_str(&j).unwrap();
        messages.extend(j["messages"].as_array().unwrap().iter().cloned());
    }
    messages
}

/// `cmd user add NAME --password-stdin` with `password` on its standard input; panics on failure.
pub async fn add_user(mut cmd: Command, name: &str, password: &str) {
    cmd.args(["user", "add", name, "--password-stdin"])
        .stdin(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n").as_bytes())
        .await
        .unwrap();
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What a finished `mpagent` run left: exit code and output.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` to completion (60 s at most).
pub async fn run(mut cmd: Command) -> Run {
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), cmd.output())
        .await
        .expect("mpagent did not finish in 60 s")
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The fake MoviePilot's demo world (`eval/worlds/demo.json`).
pub fn demo_world() -> mpa_eval::WorldState {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../eval/worlds/demo.json");
    let (_, world) = mpa_eval::load_state_file(&path, "127.0.0.1:0".parse().unwrap()).unwrap();
    world
}
