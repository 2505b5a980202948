//! The crate's one error enum: why a kernel could not be started or talked to.

use thiserror::Error;

/// Errors of `mpa-kernel`. Messages are safe to show to users and models: no environment
/// values, tokens or output.
#[derive(Debug, Error)]
pub enum KernelError {
    /// The interpreter could not be found or started.
    #[error("the Python interpreter could not be started ({program}): {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// A file or socket operation failed.
    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The conversation closed while the cell waited for its kernel.
    #[error("the conversation was closed; the cell did not run")]
    ScopeClosed,
    /// The host is shutting down: no new kernel starts.
    #[error("the host is shutting down; no Python kernel can start")]
    ShuttingDown,
}

impl KernelError {
    pub(crate) fn io(context: &'static str, source: std::io::Error) -> Self {
        KernelError::Io { context, source }
    }

    /// A stable code for the error.
    pub fn code(&self) -> &'static str {
        match self {
            KernelError::Spawn { .. } => "kernel_start_failed",
            KernelError::Io { .. } => "kernel_io_error",
            KernelError::ScopeClosed => "conversation_closed",
            KernelError::ShuttingDown => "shutting_down",
        }
    }
}

pub type Result<T> = std::result::Result<T, KernelError>;
