//! The crate's one error type. Messages are shown to models and users: they name a file by its
//! store label, never contain entry text, file contents or secrets.

/// Why a learning operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another writer holds the store's mutation lock (after the bounded wait).
    #[error("{store} is busy: another write is in progress, retry shortly")]
    Busy { store: &'static str },
    /// A file operation failed; `context` says which (e.g. `cannot read agent/memory/MEMORY.md`).
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// The request is invalid for the current state; the message says how to fix it.
    #[error("{0}")]
    Invalid(String),
    /// The request is valid but the rules forbid it (public skill, name taken, …).
    #[error("{0}")]
    Refused(String),
    /// A background review was cancelled while the change was being applied.
    #[error("the skill batch was cancelled; nothing was changed")]
    Cancelled,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// A failure to take a store's mutation lock: `WouldBlock` means another writer holds it.
    pub(crate) fn lock(store: &'static str, context: impl Into<String>, e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            Error::Busy { store }
        } else {
            Error::io(context, e)
        }
    }
}
