//! What the binary-driving tests share: an `mpagent` command with a clean environment pointed at
//! the mock model server and a private data directory.
#![allow(dead_code, reason = "each test crate uses a subset of these helpers")]

use mpa_test_support::MockModelServer;
use std::path::Path;
use std::process::Stdio;
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
