//! The crate's one error enum: why an action was refused or failed before it could report.

use thiserror::Error;

/// Errors of `mpa-exec`. Messages are safe to show to users and models: they never contain
/// command output, environment values or secrets, and never tell a foreign session from a
/// missing one.
#[derive(Debug, Error)]
pub enum ExecError {
    /// A request field was malformed or out of its allowed set.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The working directory does not exist or is not a directory.
    #[error("cwd is not an existing directory: {0}")]
    InvalidCwd(String),
    /// The interpreter is unknown, missing or cannot run the command as asked.
    #[error("unsupported shell: {0}")]
    UnsupportedShell(String),
    /// The destructive-command guard refused it (the reason says which rule).
    #[error(
        "refused: the command looks destructive ({0}). If this is really intended, repeat with confirm_dangerous=true."
    )]
    DangerousCommand(&'static str),
    /// Too many sessions are running (in-flight starts included).
    #[error(
        "{running} terminal sessions are already running (limit {limit}); wait for one to finish or kill one first"
    )]
    SessionLimit { running: usize, limit: usize },
    /// Missing, purged, foreign, or behind a closed scope — deliberately indistinguishable.
    #[error("terminal session not found or not accessible from this conversation")]
    AccessDenied,
    /// The scope is missing or sealed (host calls such as `open_child_scope`).
    #[error("terminal scope is closed or unknown")]
    ScopeClosed,
    /// A grant for a subtask was refused (not owned by the parent, no actions, ...).
    #[error("terminal grant rejected: {0}")]
    GrantRejected(String),
    /// The output cursor does not name a position of this session's output.
    #[error("{0}")]
    InvalidCursor(String),
    /// Not even the next chunk (whole-chunk paging) or character (byte paging) fits the page or
    /// the report budget.
    #[error(
        "max_bytes is too small for the next output; pass since_offset=0 and a max_bytes of at least {minimum}; do not repeat the action"
    )]
    ReadLimitTooSmall { minimum: usize },
    #[error(
        "close_stdin is only available for pipe sessions (use_pty=false); send \\u0004 for EOF on a PTY"
    )]
    CloseStdinUnsupported,
    #[error("stdin of this session is already closed; no more input can be written")]
    StdinClosed,
    #[error("the session is not running")]
    SessionNotRunning,
    /// Writing input failed before any byte was accepted.
    #[error("{0}")]
    WriteFailed(String),
    /// Spawning or talking to a process failed at the OS level.
    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl ExecError {
    pub(crate) fn io(context: &'static str, source: std::io::Error) -> Self {
        Self::Io { context, source }
    }

    /// Whether repeating the same call unchanged could succeed. Exhaustive on purpose.
    pub fn is_retryable(&self) -> bool {
        match self {
            ExecError::Io { .. } | ExecError::SessionLimit { .. } | ExecError::WriteFailed(_) => {
                true
            }
            ExecError::InvalidArgument(_)
            | ExecError::InvalidCwd(_)
            | ExecError::UnsupportedShell(_)
            | ExecError::DangerousCommand(_)
            | ExecError::AccessDenied
            | ExecError::ScopeClosed
            | ExecError::GrantRejected(_)
            | ExecError::InvalidCursor(_)
            | ExecError::ReadLimitTooSmall { .. }
            | ExecError::CloseStdinUnsupported
            | ExecError::StdinClosed
            | ExecError::SessionNotRunning => false,
        }
    }

    /// Stable machine-readable code (spec runtime.md §5.4 "Error JSON").
    pub fn code(&self) -> &'static str {
        match self {
            ExecError::InvalidArgument(_) => "invalid_arguments",
            ExecError::InvalidCwd(_) => "invalid_cwd",
            ExecError::UnsupportedShell(_) => "unsupported_shell",
            ExecError::DangerousCommand(_) => "dangerous_command_blocked",
            ExecError::SessionLimit { .. } => "terminal_limit_reached",
            ExecError::AccessDenied | ExecError::ScopeClosed => "terminal_access_denied",
            ExecError::GrantRejected(_) => "terminal_grant_rejected",
            ExecError::InvalidCursor(_) => "invalid_output_cursor",
            ExecError::ReadLimitTooSmall { .. } => "read_limit_too_small",
            ExecError::CloseStdinUnsupported => "close_stdin_unsupported",
            ExecError::StdinClosed => "stdin_closed",
            ExecError::SessionNotRunning => "session_not_running",
            ExecError::WriteFailed(_) => "write_failed",
            ExecError::Io { .. } => "spawn_failed",
        }
    }

    /// The page size that would have worked, for `read_limit_too_small`.
    pub fn minimum_read_bytes(&self) -> Option<usize> {
        match self {
            ExecError::ReadLimitTooSmall { minimum } => Some(*minimum),
            _ => None,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = ExecError> = std::result::Result<T, E>;
