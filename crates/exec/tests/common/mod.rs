//! Helpers shared by the integration tests: process tables in temp dirs, scopes, typed requests,
//! cursor-driven reading, and /proc scans for surviving processes.
#![allow(dead_code, reason = "each test binary uses a part of these helpers")]
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_exec::{
    CommandSpec, ExecConfig, ExecLimits, OutputCursor, Processes, Result, RunReport, RunRequest,
    ScopeId, ScopeOwner, SessionAction, SessionReport, SessionRequest, SessionStatus, StartRequest,
};
use mpa_protocol::UserId;
use mpa_redact::UserKey;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub struct Fixture {
    pub p: Processes,
    pub dir: tempfile::TempDir,
}

pub fn fixture() -> Fixture {
    fixture_with(ExecLimits::default())
}

pub fn fixture_with(limits: ExecLimits) -> Fixture {
    fixture_full(limits, |_| {})
}

pub fn fixture_full(limits: ExecLimits, tweak: impl FnOnce(&mut ExecConfig)) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ExecConfig::new(dir.path().to_path_buf(), dir.path().join("spill"));
    tweak(&mut cfg);
    Fixture {
        p: Processes::with_limits(cfg, limits),
        dir,
    }
}

pub fn owner(user: &str, label: &str) -> ScopeOwner {
    ScopeOwner {
        user_key: UserKey::for_user(&UserId(user.into())),
        label: label.into(),
    }
}

/// A new conversation scope of `user` (a fresh label each call: scopes are found by owner).
pub fn scope(p: &Processes, user: &str) -> ScopeId {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    p.open_scope(owner(user, &format!("session:test-{n}")))
}

pub fn spec(command: &str) -> CommandSpec {
    CommandSpec {
        command: command.into(),
        ..CommandSpec::default()
    }
}

/// A spec whose whole process tree carries `MPA_TEST_MARK=<mark>` in its environment.
pub fn marked(command: &str, mark: &str) -> CommandSpec {
    CommandSpec {
        env: vec![("MPA_TEST_MARK".into(), mark.into())],
        ..spec(command)
    }
}

pub fn run_req(spec: CommandSpec) -> RunRequest {
    RunRequest {
        spec,
        timeout: Duration::from_secs(60),
    }
}

pub async fn run(p: &Processes, s: &ScopeId, command: &str) -> RunReport {
    p.run(s, run_req(spec(command))).await.unwrap()
}

pub fn start_req(spec: CommandSpec, use_pty: bool) -> StartRequest {
    StartRequest {
        spec,
        use_pty,
        yield_time: Duration::from_millis(250),
        since_offset: None,
        max_bytes: 10_240,
    }
}

/// Starts `command` without waiting for output; returns the session id.
pub async fn start(p: &Processes, s: &ScopeId, command: &str, use_pty: bool, mark: &str) -> String {
    let req = StartRequest {
        yield_time: Duration::ZERO,
        ..start_req(marked(command, mark), use_pty)
    };
    p.start(s, req).await.unwrap().session_id
}

pub fn request(id: &str, action: SessionAction) -> SessionRequest {
    SessionRequest {
        session_id: id.into(),
        cursor: OutputCursor::default(),
        max_bytes: 10_240,
        action,
    }
}

/// `action` with no cursor (continue where this scope's last reply ended) and a 10 KiB page.
pub async fn act(
    p: &Processes,
    s: &ScopeId,
    id: &str,
    action: SessionAction,
) -> Result<SessionReport> {
    p.session_action(s, request(id, action)).await
}

pub fn at(since_seq: u64, since_offset: Option<u64>) -> OutputCursor {
    OutputCursor {
        since_seq: Some(since_seq),
        since_offset,
    }
}

pub async fn status(p: &Processes, s: &ScopeId, id: &str) -> SessionReport {
    act(p, s, id, SessionAction::Status).await.unwrap()
}

pub fn wait(ms: u64) -> SessionAction {
    SessionAction::Wait {
        timeout: Duration::from_millis(ms),
    }
}

pub fn write(input: &str, close_stdin: bool) -> SessionAction {
    SessionAction::Write {
        input: input.into(),
        close_stdin,
    }
}

/// Waits until the session is no longer running and its output is complete.
pub async fn wait_finished(p: &Processes, s: &ScopeId, id: &str) -> SessionReport {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = status(p, s, id).await;
        if v.status != SessionStatus::Running && v.output_complete {
            return v;
        }
        assert!(Instant::now() < deadline, "session never finished: {v:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the session's output (read from the very beginning with explicit cursors)
/// contains `needle`; returns everything read.
pub async fn wait_for_text(p: &Processes, s: &ScopeId, id: &str, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = String::new();
    let (mut seq, mut offset) = (0u64, 0u64);
    while !seen.contains(needle) {
        assert!(
            Instant::now() < deadline,
            "never saw {needle:?}; got {seen:?}"
        );
        let v = p
            .session_action(
                s,
                SessionRequest {
                    cursor: at(seq, Some(offset)),
                    ..request(id, wait(1000))
                },
            )
            .await
            .unwrap();
        seen.push_str(&v.output);
        seq = v.output_until_seq;
        offset = v.output_until_offset as u64;
    }
    seen
}

/// Reads everything from cursor (0, 0) page by page with explicit cursors.
pub async fn read_all(
    p: &Processes,
    s: &ScopeId,
    id: &str,
    max_bytes: usize,
    partial: bool,
) -> (String, bool) {
    let mut out = String::new();
    let (mut seq, mut offset) = (0u64, 0u64);
    let mut lost = false;
    loop {
        let v = p
            .session_action(
                s,
                SessionRequest {
                    cursor: at(seq, partial.then_some(offset)),
                    max_bytes,
                    ..request(id, SessionAction::Read)
                },
            )
            .await
            .unwrap();
        out.push_str(&v.output);
        lost |= v.output_lost;
        seq = v.output_until_seq;
        offset = v.output_until_offset as u64;
        if !v.output_truncated {
            return (out, lost);
        }
    }
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

/// Polls `probe` (generously) until it finds nothing; returns what it found last.
pub async fn until_gone<T>(probe: impl Fn() -> Vec<T>) -> Vec<T> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = probe();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until no marked process is left; returns the survivors.
pub async fn survivors_after_grace(mark: &str) -> Vec<u32> {
    until_gone(|| marked_processes(mark)).await
}

/// Kills leftovers so a failing test does not leak processes into the next one.
pub fn reap(mark: &str) {
    for pid in marked_processes(mark) {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
}

pub fn has(program: &str) -> bool {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    mpa_test_support::external_program(program, found)
}
