//! Helpers shared by the integration tests: hubs in temp dirs, scopes, cursor-driven reading,
//! JSON redaction for whole-object comparisons, and /proc scans for surviving processes.

use mpa_exec::{ExecConfig, ExecHub, ExecLimits, ScopeId, ScopeOwner};
use mpa_protocol::{UserId, UserKey};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

pub struct Fixture {
    pub hub: ExecHub,
    pub dir: tempfile::TempDir,
}

pub fn fixture() -> Fixture {
    fixture_with(ExecLimits::default())
}

pub fn fixture_with(limits: ExecLimits) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ExecConfig {
        workdir: dir.path().to_path_buf(),
        venv_path: None,
        spill_dir: dir.path().join("spill"),
    };
    Fixture {
        hub: ExecHub::with_limits(cfg, limits),
        dir,
    }
}

pub fn owner(user: &str, label: &str) -> ScopeOwner {
    ScopeOwner {
        user_key: UserKey::for_user(&UserId(user.into())),
        label: label.into(),
    }
}

pub fn scope(hub: &ExecHub, user: &str) -> ScopeId {
    hub.open_scope(owner(user, "chat"))
}

/// A unique marker put into a session's environment so its whole process tree can be found.
pub fn marker() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// Pids of live (non-zombie) processes whose environment carries `MPA_TEST_MARK=<mark>`.
pub fn marked_processes(mark: &str) -> Vec<u32> {
    let needle = format!("MPA_TEST_MARK={mark}");
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // Zombies have no environment left; they are dead already.
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

/// Waits (generously) until no marked process is left; returns the survivors.
pub async fn survivors_after_grace(mark: &str) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let left = marked_processes(mark);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Kills leftovers so a failing test does not leak processes into the next one.
pub fn reap(mark: &str) {
    for pid in marked_processes(mark) {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
}

pub async fn exec(hub: &ExecHub, scope: &ScopeId, args: Value) -> Value {
    hub.execute(scope, args).await
}

pub async fn start(
    hub: &ExecHub,
    scope: &ScopeId,
    command: &str,
    use_pty: bool,
    mark: &str,
) -> String {
    let v = exec(
        hub,
        scope,
        json!({"action": "start", "command": command, "use_pty": use_pty, "yield_time_ms": 0,
               "env": {"MPA_TEST_MARK": mark}}),
    )
    .await;
    v["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("start failed: {v}"))
        .to_string()
}

/// Waits until the session is no longer running and its output is complete.
pub async fn wait_finished(hub: &ExecHub, scope: &ScopeId, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = exec(hub, scope, json!({"action": "status", "session_id": id})).await;
        if v["status"] != "running" && v["output_complete"] == true {
            return v;
        }
        assert!(Instant::now() < deadline, "session never finished: {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the session's output (read from the very beginning with explicit cursors)
/// contains `needle`; returns everything read.
pub async fn wait_for_text(hub: &ExecHub, scope: &ScopeId, id: &str, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = String::new();
    let (mut seq, mut offset) = (0u64, 0u64);
    while !seen.contains(needle) {
        assert!(
            Instant::now() < deadline,
            "never saw {needle:?}; got {seen:?}"
        );
        let v = exec(
            hub,
            scope,
            json!({"action": "wait", "session_id": id, "timeout_ms": 1000,
                   "since_seq": seq, "since_offset": offset}),
        )
        .await;
        assert!(v.get("code").is_none(), "wait failed: {v}");
        seen.push_str(v["output"].as_str().unwrap());
        seq = v["output_until_seq"].as_u64().unwrap();
        offset = v["output_until_offset"].as_u64().unwrap();
    }
    seen
}

/// Reads everything from cursor (0, 0) page by page with explicit cursors.
pub async fn read_all(
    hub: &ExecHub,
    scope: &ScopeId,
    id: &str,
    max_bytes: usize,
    partial: bool,
) -> (String, bool) {
    let mut out = String::new();
    let (mut seq, mut offset) = (0u64, 0u64);
    let mut lost = false;
    loop {
        let mut args =
            json!({"action": "read", "session_id": id, "since_seq": seq, "max_bytes": max_bytes});
        if partial {
            args["since_offset"] = json!(offset);
        }
        let v = exec(hub, scope, args).await;
        assert!(v.get("code").is_none(), "read failed: {v}");
        out.push_str(v["output"].as_str().unwrap());
        lost |= v["output_lost"] == true;
        seq = v["output_until_seq"].as_u64().unwrap();
        offset = v["output_until_offset"].as_u64().unwrap();
        if v["output_truncated"] == false {
            return (out, lost);
        }
    }
}

/// Replaces values that differ between runs so whole objects can be compared.
pub fn redact(mut v: Value) -> Value {
    if let Value::Object(obj) = &mut v {
        for key in ["pid", "session_id", "cwd", "shell", "output_file"] {
            if let Some(value) = obj.get_mut(key)
                && !value.is_null()
            {
                *value = json!(format!("[{key}]"));
            }
        }
    }
    v
}

pub fn has(program: &str) -> bool {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    mpa_test_support::external_program(program, found)
}
