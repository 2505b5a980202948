//! What the actions report (spec runtime.md §5.3–5.4): typed, `Serialize` reports whose field
//! order and names are the `execute_command` reply. Long metadata strings are clipped by their
//! JSON-escaped length with a `*_truncated` flag; outcomes follow the honesty rules.

use crate::output_log::{Cursor, Page};
use crate::requests::Action;
use crate::scope::GrantAction;
use crate::session::{Session, SessionState};
use mpa_protocol::Outcome;
use serde::Serialize;

/// How a one-shot run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Exited,
    TimedOut,
    /// The exit status could not be observed.
    Unknown,
    /// The scope was closed (before or while it ran).
    Cancelled,
}

/// The result of [`Processes::run`](crate::Processes::run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunReport {
    /// Always [`Action::Run`].
    pub action: Action,
    /// True only for exit code 0 without a timeout.
    pub success: bool,
    pub execution_outcome: Outcome,
    pub status: RunStatus,
    /// `-signal` when a signal ended the command.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// The timeout in seconds.
    pub timeout: u64,
    pub cwd: String,
    pub shell: String,
    pub login: bool,
    pub stdin_closed: bool,
    /// The preview is head + tail of a longer output.
    pub output_truncated: bool,
    /// Where the full output was spilled (long outputs only).
    pub output_file: Option<String>,
    pub output: String,
    /// A human summary; never claims success for a non-zero exit.
    pub message: String,
}

/// The state of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionStatus {
    Running,
    Exited,
    Killed,
    Error,
}

impl SessionStatus {
    /// Pending while running, failed for error/killed/non-zero, unknown without an exit code,
    /// succeeded only for exit 0.
    pub fn outcome(self, exit_code: Option<i32>) -> Outcome {
        match (self, exit_code) {
            (SessionStatus::Running, _) => Outcome::Pending,
            (SessionStatus::Killed | SessionStatus::Error, _) => Outcome::Failed,
            (_, Some(0)) => Outcome::Succeeded,
            (_, Some(_)) => Outcome::Failed,
            (_, None) => Outcome::Unknown,
        }
    }
}

/// Why a start or wait returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitReason {
    Output,
    Completed,
    Timeout,
}

/// The action happened but its page could not be built: the cursor was left unconsumed, so the
/// caller reads instead of repeating the action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutputError {
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum_read_bytes: Option<usize>,
}

/// The result of every session action (start, read, wait, write, interrupt, kill, status).
/// `output_until_seq` / `output_until_offset` are the cursor to pass back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionReport {
    pub action: Action,
    pub session_id: String,
    pub command: String,
    pub command_truncated: bool,
    pub command_total_chars: usize,
    pub cwd: String,
    pub cwd_truncated: bool,
    pub pid: u32,
    pub status: SessionStatus,
    pub exit_code: Option<i32>,
    pub execution_outcome: Outcome,
    pub use_pty: bool,
    pub shell: String,
    pub shell_truncated: bool,
    pub login: bool,
    pub stdin_closed: bool,
    pub last_seq: u64,
    pub retained_from_seq: u64,
    /// Every reader reached EOF (process exit alone does not set it).
    pub output_complete: bool,
    pub error: Option<String>,
    pub error_truncated: bool,
    pub output: String,
    pub output_until_seq: u64,
    pub output_until_offset: usize,
    /// Output was lost or more remains after this page.
    pub output_truncated: bool,
    /// The cursor fell behind the retained window, or a reader failed.
    pub output_lost: bool,
    /// start only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub yield_time_ms: Option<u64>,
    /// wait only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_timeout_ms: Option<u64>,
    /// start and wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_reason: Option<WaitReason>,
    /// write only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written_bytes: Option<usize>,
    /// interrupt and kill: `SIGINT`, `SIGTERM`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal_sent: Option<bool>,
    /// kill only: SIGKILL followed the requested signal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill_escalated: Option<bool>,
    /// The action partly failed (a write cut short, a group that did not exit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_error: Option<OutputError>,
}

/// Per-action fields of a [`SessionReport`], filled by the action before the page is built.
#[derive(Debug, Clone, Default)]
pub(crate) struct ActionDetail {
    pub yield_time_ms: Option<u64>,
    pub wait_timeout_ms: Option<u64>,
    pub wait_reason: Option<WaitReason>,
    pub written_bytes: Option<usize>,
    pub signal: Option<&'static str>,
    pub signal_sent: Option<bool>,
    pub kill_escalated: Option<bool>,
    pub action_error: Option<String>,
}

impl SessionReport {
    /// The report of `session` in state `st`. With `page == None` no output is delivered and the
    /// cursor handed back is the one that came in.
    pub(crate) fn build(
        session: &Session,
        st: &SessionState,
        action: Action,
        page: Option<&Page>,
        cursor: Cursor,
        detail: &ActionDetail,
    ) -> Self {
        let (command, command_truncated) = clip_json_escaped(&session.command, 1024);
        let (cwd, cwd_truncated) = clip_json_escaped(&session.cwd, 1024);
        let (shell, shell_truncated) = clip_json_escaped(&session.shell, 256);
        let (error, error_truncated) = match &st.error {
            Some(e) => {
                let (e, t) = clip_json_escaped(e, 512);
                (Some(e), t)
            }
            None => (None, false),
        };
        let (output, until_seq, until_offset, more, lost) = match page {
            Some(p) => (p.text.clone(), p.until_seq, p.until_offset, p.more, p.lost),
            None => (
                String::new(),
                cursor.seq,
                if cursor.partial { cursor.offset } else { 0 },
                st.log.has_unread(cursor),
                false,
            ),
        };
        let detail = detail.clone();
        SessionReport {
            action,
            session_id: session.id.clone(),
            command,
            command_truncated,
            command_total_chars: session.command.chars().count(),
            cwd,
            cwd_truncated,
            pid: session.pid,
            status: st.status,
            exit_code: st.exit_code,
            execution_outcome: st.status.outcome(st.exit_code),
            use_pty: session.use_pty,
            shell,
            shell_truncated,
            login: session.login,
            stdin_closed: st.stdin_closed,
            last_seq: st.log.last_seq(),
            retained_from_seq: st.log.retained_from_seq(),
            output_complete: st.output_complete(),
            error,
            error_truncated,
            output,
            output_until_seq: until_seq,
            output_until_offset: until_offset,
            output_truncated: more || lost,
            output_lost: lost || st.reader_failed,
            yield_time_ms: detail.yield_time_ms,
            wait_timeout_ms: detail.wait_timeout_ms,
            wait_reason: detail.wait_reason,
            written_bytes: detail.written_bytes,
            signal: detail.signal,
            signal_sent: detail.signal_sent,
            kill_escalated: detail.kill_escalated,
            action_error: detail.action_error,
            output_error: None,
        }
    }
}

/// Whether the caller owns a listed session or holds a grant on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    Owner,
    Granted,
}

/// One row of a [`ListReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedSession {
    pub session_id: String,
    pub access: Access,
    /// `None` for the owner (who may do everything).
    pub granted_actions: Option<Vec<GrantAction>>,
    pub command: String,
    pub command_truncated: bool,
    pub pid: u32,
    pub status: SessionStatus,
    pub exit_code: Option<i32>,
    pub execution_outcome: Outcome,
    pub use_pty: bool,
    pub last_seq: u64,
    pub output_complete: bool,
}

/// The sessions a scope may see: its own and those granted to it, by session id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListReport {
    /// Always [`Action::List`].
    pub action: Action,
    pub success: bool,
    pub execution_outcome: Outcome,
    pub count: usize,
    pub running: usize,
    pub max_running_sessions: usize,
    pub sessions: Vec<ListedSession>,
}

/// Clips `s` so its JSON-escaped form (non-ASCII kept) is at most `limit` characters.
/// Returns the clipped text and whether anything was cut.
pub fn clip_json_escaped(s: &str, limit: usize) -> (String, bool) {
    let mut used = 0;
    for (index, ch) in s.char_indices() {
        let cost = match ch {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            _ => 1,
        };
        if used + cost > limit {
            return (s[..index].to_string(), true);
        }
        used += cost;
    }
    (s.to_string(), false)
}

/// Characters of the report as pretty-printed JSON, as the reply budget counts them.
pub(crate) fn pretty_json_chars<T: Serialize>(value: &T) -> usize {
    serde_json::to_string_pretty(value)
        .map(|text| text.chars().count())
        .unwrap_or(usize::MAX)
}
