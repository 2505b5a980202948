//! What callers ask of [`Processes`](crate::Processes): typed requests for a one-shot run, a
//! session start and the session actions, the output cursor of spec runtime.md §5.4, and the
//! signals a session may be sent. Validation that needs no process (blank command, cursor shape,
//! environment names) happens in the action itself, before anything is spawned or changed.

use crate::error::{ExecError, Result};
use serde::Serialize;
use std::time::Duration;

/// Largest page of output one reply may carry (`TERMINAL_MAX_READ_BYTES`).
pub const MAX_PAGE_BYTES: usize = 65_536;

/// The actions of the terminal tool, as reports name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Start,
    Read,
    Wait,
    Write,
    Interrupt,
    Kill,
    Run,
    List,
    Status,
}

impl Action {
    /// Every action, in the order the tool documents them.
    pub const ALL: [Action; 9] = [
        Action::Start,
        Action::Read,
        Action::Wait,
        Action::Write,
        Action::Interrupt,
        Action::Kill,
        Action::Run,
        Action::List,
        Action::Status,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::Read => "read",
            Action::Wait => "wait",
            Action::Write => "write",
            Action::Interrupt => "interrupt",
            Action::Kill => "kill",
            Action::Run => "run",
            Action::List => "list",
            Action::Status => "status",
        }
    }

    /// The action named exactly `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

/// What to launch (spec runtime.md §5.2), shared by [`RunRequest`] and [`StartRequest`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandSpec {
    /// The shell command; must not be blank.
    pub command: String,
    /// Working directory: relative to the configured workdir, `~` expanded, must exist.
    pub cwd: Option<String>,
    /// Interpreter name or path (a known POSIX shell); default: the child's `SHELL`, else `/bin/sh`.
    pub shell: Option<String>,
    /// Run as a login shell (`-lc`).
    pub login: Option<bool>,
    /// Extra environment variables, applied over the host's.
    pub env: Vec<(String, String)>,
    /// Run it although the guard considers it destructive.
    pub confirm_dangerous: bool,
}

impl CommandSpec {
    pub fn validate(&self) -> Result<()> {
        if self.command.trim().is_empty() {
            return Err(invalid("command is required and must not be blank"));
        }
        for (key, value) in &self.env {
            if key.is_empty() || key.contains(['=', '\0']) {
                return Err(invalid(
                    "env names must be non-empty and contain no '=' or NUL",
                ));
            }
            if value.contains('\0') {
                return Err(invalid(format!("env value of {key} contains NUL")));
            }
        }
        Ok(())
    }
}

/// A one-shot run: stdin at EOF, output previewed head+tail, the group killed at `timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRequest {
    pub spec: CommandSpec,
    /// Reported in whole seconds.
    pub timeout: Duration,
}

/// Starts a background session and waits up to `yield_time` for its first output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartRequest {
    pub spec: CommandSpec,
    /// A PTY (interactive programs) or pipes (separate stdout/stderr, EOF by `close_stdin`).
    pub use_pty: bool,
    /// Zero returns at once.
    pub yield_time: Duration,
    /// `Some(0)` pages the first output by bytes; `None` by whole chunks. Nothing else is valid.
    pub since_offset: Option<u64>,
    /// Page size, clamped to `1..=MAX_PAGE_BYTES`.
    pub max_bytes: usize,
}

impl StartRequest {
    pub fn validate(&self) -> Result<()> {
        self.spec.validate()?;
        if self.since_offset.is_some_and(|o| o != 0) {
            return Err(invalid("since_offset for start may only be 0 or null"));
        }
        Ok(())
    }
}

/// Where a reader stands in a session's output (spec runtime.md §5.4). `since_seq` = the last
/// chunk fully received; `since_offset` = bytes already received of the next chunk. Both `None`:
/// continue where this scope's last reply ended. `since_seq` alone pages by whole chunks; with
/// `since_offset` (or without either) pages are cut at character boundaries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputCursor {
    pub since_seq: Option<u64>,
    pub since_offset: Option<u64>,
}

/// One action on an existing session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRequest {
    /// `term_<12 hex>` from a start.
    pub session_id: String,
    pub cursor: OutputCursor,
    /// Page size, clamped to `1..=MAX_PAGE_BYTES`.
    pub max_bytes: usize,
    pub action: SessionAction,
}

/// What to do with the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionAction {
    /// An immediate page.
    Read,
    /// Returns at once when unread output exists, else when output arrives, the session
    /// finishes, a scope closes or `timeout` passes. Never kills.
    Wait { timeout: Duration },
    /// Input, serialised per session; `close_stdin` sends EOF afterwards (pipe sessions only).
    Write { input: String, close_stdin: bool },
    /// One SIGINT to the foreground group; no escalation.
    Interrupt,
    /// `signal` to the group, SIGKILL after 3 s if it is still alive.
    Kill { signal: Signal },
    /// The session's state, without output.
    Status,
}

impl SessionAction {
    pub fn action(&self) -> Action {
        match self {
            SessionAction::Read => Action::Read,
            SessionAction::Wait { .. } => Action::Wait,
            SessionAction::Write { .. } => Action::Write,
            SessionAction::Interrupt => Action::Interrupt,
            SessionAction::Kill { .. } => Action::Kill,
            SessionAction::Status => Action::Status,
        }
    }
}

/// A signal a session may be sent: those that end or notify a process (no STOP/CONT games).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal {
    number: libc::c_int,
    name: &'static str,
}

impl Signal {
    pub const HUP: Signal = Signal::new(libc::SIGHUP, "SIGHUP");
    pub const INT: Signal = Signal::new(libc::SIGINT, "SIGINT");
    pub const QUIT: Signal = Signal::new(libc::SIGQUIT, "SIGQUIT");
    pub const ABRT: Signal = Signal::new(libc::SIGABRT, "SIGABRT");
    pub const KILL: Signal = Signal::new(libc::SIGKILL, "SIGKILL");
    pub const USR1: Signal = Signal::new(libc::SIGUSR1, "SIGUSR1");
    pub const USR2: Signal = Signal::new(libc::SIGUSR2, "SIGUSR2");
    pub const ALRM: Signal = Signal::new(libc::SIGALRM, "SIGALRM");
    pub const TERM: Signal = Signal::new(libc::SIGTERM, "SIGTERM");

    /// Every supported signal.
    pub const SUPPORTED: [Signal; 9] = [
        Signal::HUP,
        Signal::INT,
        Signal::QUIT,
        Signal::ABRT,
        Signal::KILL,
        Signal::USR1,
        Signal::USR2,
        Signal::ALRM,
        Signal::TERM,
    ];

    const fn new(number: libc::c_int, name: &'static str) -> Self {
        Self { number, name }
    }

    /// `TERM`, `sigterm`, ` SIGTERM ` or `"15"`.
    pub fn from_name(name: &str) -> Option<Signal> {
        let name = name.trim();
        if let Ok(number) = name.parse::<i64>() {
            return Self::from_number(number);
        }
        let upper = name.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        Self::SUPPORTED.into_iter().find(|s| &s.name[3..] == bare)
    }

    pub fn from_number(number: i64) -> Option<Signal> {
        Self::SUPPORTED
            .into_iter()
            .find(|s| i64::from(s.number) == number)
    }

    /// `SIGTERM` style.
    pub fn name(self) -> &'static str {
        self.name
    }

    pub(crate) fn number(self) -> libc::c_int {
        self.number
    }
}

fn invalid(msg: impl Into<String>) -> ExecError {
    ExecError::InvalidArgument(msg.into())
}
