//! What the binary-driving tests share: an `mpagent` command with a clean environment pointed at
//! the mock model server and a private data directory.

use mpa_test_support::MockModelServer;
use std::path::Path;
use std::process::Stdio;
use tokio::process::Command;

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
