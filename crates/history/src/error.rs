//! The crate's single error type.

use std::path::PathBuf;

/// Everything that can go wrong in the evidence store. Messages never include message content,
/// so no secret can leak through an error.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The user key is not a 32-hex-digit key, or names an internal (system) user.
    #[error("history is not available for this user (internal or invalid user key)")]
    InvalidUser,
    /// Input rejected before any write (batch too large, bad session id, bad role…).
    #[error("invalid history input: {0}")]
    InvalidInput(String),
    /// The database was written by a newer binary; we refuse to touch it.
    #[error("history database schema version {found} is newer than supported version {supported}")]
    SchemaTooNew { found: i64, supported: i64 },
    /// A path component of the store is a symlink or not a regular file/directory.
    #[error("refusing to use {0}: it is a symlink or not a regular file")]
    UnsafePath(PathBuf),
    #[error("history storage i/o error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("history database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The blocking worker panicked or was cancelled.
    #[error("history worker failed: {0}")]
    Worker(String),
    /// The read ran past the query deadline (also when the time went to ranking or snippets,
    /// which SQLite's progress handler does not see).
    #[error("history query deadline exceeded")]
    DeadlineExceeded,
    /// Nobody waits for the answer any more (the tool timed out, the turn stopped, the host
    /// shuts down); the work was stopped.
    #[error("history query cancelled")]
    Cancelled,
    /// The query has more terms or operators than a search accepts (see
    /// [`crate::MAX_QUERY_TERMS`]); nothing was read.
    #[error(
        "query too complex: {terms} terms and {operators} operators (at most {max} of each); \
         use fewer, more specific terms"
    )]
    QueryTooComplex {
        terms: usize,
        operators: usize,
        max: usize,
    },
    /// The user's database file is damaged or unreadable (truncated, not a database, i/o
    /// failure). Nothing is reset or deleted; the file needs a restore, and every read and
    /// capture fails with this until then.
    #[error("history storage unavailable: {0}")]
    StorageUnavailable(String),
}

pub type Result<T, E = HistoryError> = std::result::Result<T, E>;

/// `map_err` adapter: an I/O error on `path`.
pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> HistoryError + '_ {
    move |source| HistoryError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// How serious a failed read is (spec §9.7, §12.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// The deadline passed or the file was busy: a narrower request may succeed.
    Timeout,
    /// The query or an index could not serve it (e.g. a damaged index being rebuilt).
    Unavailable,
    /// The store itself is unusable (unsafe path, newer schema, structural damage, i/o).
    Storage,
    /// The query asks for more work than a search does (too many terms or operators).
    TooComplex,
}

impl HistoryError {
    /// Structural damage reported by SQLite (a truncated file, a file that is not a database)
    /// as [`HistoryError::StorageUnavailable`], saying what it is; every other error unchanged.
    pub(crate) fn into_storage_unavailable(self) -> Self {
        use rusqlite::ErrorCode;
        match &self {
            HistoryError::Sqlite(rusqlite::Error::SqliteFailure(e, msg))
                if self.classify() == FailureClass::Storage =>
            {
                let what = match e.code {
                    ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => {
                        "the history database file is damaged"
                    }
                    _ => "the history database file cannot be read",
                };
                let detail = msg.clone().unwrap_or_else(|| e.to_string());
                HistoryError::StorageUnavailable(format!("{what} ({detail}); nothing was changed"))
            }
            _ => self,
        }
    }

    pub fn classify(&self) -> FailureClass {
        use rusqlite::ErrorCode;
        match self {
            HistoryError::Sqlite(rusqlite::Error::SqliteFailure(e, msg)) => match e.code {
                ErrorCode::OperationInterrupted
                | ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked => FailureClass::Timeout,
                ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => {
                    let fts = msg.as_deref().is_some_and(|m| m.contains("fts5"))
                        || e.extended_code == 267;
                    if fts {
                        FailureClass::Unavailable
                    } else {
                        FailureClass::Storage
                    }
                }
                ErrorCode::CannotOpen | ErrorCode::SystemIoFailure => FailureClass::Storage,
                _ => FailureClass::Unavailable,
            },
            HistoryError::Sqlite(_) => FailureClass::Unavailable,
            HistoryError::DeadlineExceeded | HistoryError::Cancelled => FailureClass::Timeout,
            HistoryError::QueryTooComplex { .. } => FailureClass::TooComplex,
            HistoryError::SchemaTooNew { .. }
            | HistoryError::UnsafePath(_)
            | HistoryError::Io { .. }
            | HistoryError::StorageUnavailable(_)
            | HistoryError::InvalidUser => FailureClass::Storage,
            HistoryError::InvalidInput(_) | HistoryError::Worker(_) => FailureClass::Unavailable,
        }
    }
}
