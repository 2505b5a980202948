//! `mpa-exec` — the host's processes: one-shot runs and long-lived pipe/PTY sessions with
//! resumable output cursors, signals, terminal scopes and sharing (spec runtime.md §5). It knows
//! nothing of tool JSON or the model: core's `execute_command` tool parses the arguments into
//! the typed requests below and serialises the typed reports as its reply.
//!
//! Public API:
//! - [`Processes`] — one per host. Scopes: [`Processes::open_scope`] (the same live scope for
//!   the same [`ScopeOwner`]), [`Processes::open_child_scope`], [`Processes::close_scope`],
//!   [`Processes::close_idle_scopes`] (also run in the background), [`Processes::shutdown`].
//!   Actions: [`Processes::run`] ([`RunRequest`] → [`RunReport`]), [`Processes::start`]
//!   ([`StartRequest`] → [`SessionReport`]), [`Processes::session_action`] ([`SessionRequest`]
//!   with a [`SessionAction`] → [`SessionReport`]), [`Processes::list`] → [`ListReport`].
//! - Requests: [`CommandSpec`], [`OutputCursor`], [`Signal`], [`Action`], [`MAX_PAGE_BYTES`];
//!   reports: [`RunStatus`], [`SessionStatus`], [`WaitReason`], [`OutputError`], [`Access`],
//!   [`ListedSession`], and [`clip_json_escaped`] (the clipping the reports use).
//! - [`ExecConfig`] (workdir, venv, spill dir, idle-scope TTL) and [`ExecLimits`] (defaults
//!   from the spec); [`ExecError`] with a stable [`ExecError::code`].
//! - [`ScopeOwner`], [`ScopeId`], [`TerminalGrant`], [`GrantAction`], [`CloseReport`].
//! - [`become_subreaper`] (the binary calls it at start) and [`reap_orphans`].
//!
//! Invariants:
//! - Every process is the leader of its own session and process group; every signal targets
//!   the group, and kill/timeout/close end with SIGKILL to the group so no grandchild survives.
//!   With [`become_subreaper`], orphans of those trees are re-parented to the host and reaped:
//!   nothing is left in `/proc`, zombie or not.
//! - Output is an append-only chunk log with absolute sequence numbers; cursors never reset, and
//!   output that fell out of the 1 MiB retained window is reported as `output_lost`.
//! - Outcomes are honest: exit 0 → `succeeded`; non-zero, killed, timed out → `failed`; no exit
//!   code → `unknown`; running → `pending`. Having printed something is never success.
//! - Scopes come from the host, never from tool arguments. A scope belongs to a conversation
//!   (found again by owner after its actor was reloaded) and ends when the host closes it or it
//!   stays idle past the TTL. Missing, closed, expired and foreign sessions all produce one
//!   identical [`ExecError::AccessDenied`].
//! - A session report serialised as pretty JSON fits [`ExecLimits::report_budget_chars`].
//! - Every `unsafe` block lives in `process` and states its `SAFETY:` argument.

mod actions;
mod danger;
mod error;
mod launch;
mod output_log;
mod process;
mod processes;
mod reaper;
mod reports;
mod requests;
mod run;
mod scope;
mod session;
mod utf8_stream;

pub use error::{ExecError, Result};
pub use processes::Processes;
pub use reaper::{become_subreaper, reap_orphans};
pub use reports::{
    Access, ListReport, ListedSession, OutputError, RunReport, RunStatus, SessionReport,
    SessionStatus, WaitReason, clip_json_escaped,
};
pub use requests::{
    Action, CommandSpec, MAX_PAGE_BYTES, OutputCursor, RunRequest, SessionAction, SessionRequest,
    Signal, StartRequest,
};
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use danger::dangerous_reason;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use launch::{Launch, resolve};
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use output_log::{CHUNK_BYTES, Cursor, OutputLog, Page, PageError, Stream};
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use reaper::{Stat, parse_stat};
// public for the crate's tests (tests/all.rs); not part of the API
pub use scope::{CloseReport, GrantAction, ScopeId, ScopeOwner, TerminalGrant};
#[doc(hidden)]
pub use utf8_stream::Utf8Stream;

use std::path::PathBuf;
use std::time::Duration;

/// How long a terminal scope may stay idle before it is closed with its processes (24 h).
pub const DEFAULT_IDLE_SCOPE_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Host configuration of the processes.
#[derive(Debug, Clone)]
pub struct ExecConfig {
    /// Default and base directory for `cwd` (`MPA_WORKDIR`; default: where the host started).
    pub workdir: PathBuf,
    /// `VENV_PATH`: a Python environment put first on every child's PATH. When `None`,
    /// `<workdir>/venv` is used if it exists.
    pub venv_path: Option<PathBuf>,
    /// Where a long `run` output is spilled in full (`output_file`).
    pub spill_dir: PathBuf,
    /// A scope with no tool call through it and no output from its sessions for this long is
    /// closed, its processes terminated ([`DEFAULT_IDLE_SCOPE_TTL`]; `None`: only the host
    /// closes scopes). A quiet background process does not count as activity.
    pub idle_scope_ttl: Option<Duration>,
}

impl ExecConfig {
    /// The spec's defaults for everything but the directories.
    pub fn new(workdir: PathBuf, spill_dir: PathBuf) -> Self {
        Self {
            workdir,
            venv_path: None,
            spill_dir,
            idle_scope_ttl: Some(DEFAULT_IDLE_SCOPE_TTL),
        }
    }
}

/// Limits of the processes; the defaults are the spec's values.
#[derive(Debug, Clone)]
pub struct ExecLimits {
    /// Running sessions per host, in-flight starts included (4).
    pub max_running_sessions: usize,
    /// Concurrent one-shot runs (2).
    pub run_concurrency: usize,
    /// How long a finished session stays readable (30 min).
    pub finished_retention: Duration,
    /// Output retained per session (1 MiB); older chunks are dropped.
    pub max_retained_bytes: usize,
    /// Characters a session report may take serialised as pretty JSON (65 536, the tool's reply
    /// budget); the page shrinks until it fits.
    pub report_budget_chars: usize,
}

impl Default for ExecLimits {
    fn default() -> Self {
        Self {
            max_running_sessions: 4,
            run_concurrency: 2,
            finished_retention: Duration::from_secs(30 * 60),
            max_retained_bytes: 1 << 20,
            report_budget_chars: 65_536,
        }
    }
}

// Compile-time guarantees (they cannot fail at run time, so they are not tests): the table is
// shared across tasks, and its futures may move between worker threads.
const _: fn(&Processes, &ScopeId) = |processes, scope| {
    fn shared<T: Send + Sync + Clone + 'static>(_: &T) {}
    fn sendable<T: Send>(_: T) {}
    shared(processes);
    sendable(processes.run(
        scope,
        RunRequest {
            spec: CommandSpec::default(),
            timeout: Duration::ZERO,
        },
    ));
    sendable(processes.start(
        scope,
        StartRequest {
            spec: CommandSpec::default(),
            use_pty: false,
            yield_time: Duration::ZERO,
            since_offset: None,
            max_bytes: 1,
        },
    ));
    sendable(processes.session_action(
        scope,
        SessionRequest {
            session_id: String::new(),
            cursor: OutputCursor::default(),
            max_bytes: 1,
            action: SessionAction::Read,
        },
    ));
    sendable(processes.close_scope(scope));
    sendable(processes.close_idle_scopes());
    sendable(processes.shutdown());
};
