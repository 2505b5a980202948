//! The crate's one error enum. Tool-facing failures become JSON results (see `hub`), so these
//! errors are what the host-facing API (`open_child_scope`) and internal plumbing report.

use thiserror::Error;

/// Errors of `mpa-exec`. Messages are safe to show to users and models: they never contain
/// command output, environment values or secrets.
#[derive(Debug, Error)]
pub enum ExecError {
    /// A tool argument was malformed or out of its allowed set.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The working directory does not exist or is not a directory.
    #[error("cwd is not an existing directory: {0}")]
    InvalidCwd(String),
    /// The interpreter is unknown, missing or cannot run the command as asked.
    #[error("unsupported shell: {0}")]
    UnsupportedShell(String),
    /// The scope is missing or sealed.
    #[error("terminal scope is closed or unknown")]
    ScopeClosed,
    /// A grant for a subtask was refused (not owned by the parent, bad action set, ...).
    #[error("terminal grant rejected: {0}")]
    GrantRejected(String),
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
            ExecError::Io { .. } => true,
            ExecError::InvalidArgument(_)
            | ExecError::InvalidCwd(_)
            | ExecError::UnsupportedShell(_)
            | ExecError::ScopeClosed
            | ExecError::GrantRejected(_) => false,
        }
    }

    /// Stable machine-readable code used in tool result JSON.
    pub fn code(&self) -> &'static str {
        match self {
            ExecError::InvalidArgument(_) => "invalid_arguments",
            ExecError::InvalidCwd(_) => "invalid_cwd",
            ExecError::UnsupportedShell(_) => "unsupported_shell",
            ExecError::ScopeClosed => "terminal_access_denied",
            ExecError::GrantRejected(_) => "terminal_grant_rejected",
            ExecError::Io { .. } => "spawn_failed",
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = ExecError> = std::result::Result<T, E>;
