//! Stable memory for moviepilot-agent: curated `MEMORY.md` / `USER.md` entries, budgets,
//! background-review proposals, threat scanning and `search_memory`.
//!
//! Public API (core's tool adapters stay thin: JSON in, JSON out):
//! - [`MemoryHub::new`] with a [`MemoryConfig`] (the data directory; files live under
//!   `agent/memory/` as DESIGN.md §3 lays out).
//! - [`MemoryHub::memory_tool`] — the `memory` tool (add / replace / remove / batch
//!   `operations` / `pending`), [`MemoryHub::search_memory_tool`] — `search_memory`.
//! - [`MemoryHub::snapshot`] → [`MemorySnapshot`], frozen by the caller once per session;
//!   [`MemorySnapshot::render`] is the system-prompt text.
//! - [`MemoryHub::user_command`] — `/memory pending|approve|discard`, parsed from the user's own
//!   latest text only (never from tool arguments): the model can never approve a proposal.
//! - [`MemoryHub::begin_user_turn`] resets the consolidation failure cap.
//! - [`WriteOrigin`] / [`ReviewToken`]: who writes. Background-review replace/remove batches
//!   become proposals; a cancelled review writes nothing.
//! - [`threat`]: the shared prompt-injection scanner; tool descriptions/schemas in [`schema`].
//!
//! Invariants:
//! - only admins write the global `MEMORY.md`; no argument can name another user or a path
//!   outside the caller's visible scopes (global, then own user directory);
//! - every mutation holds the per-root `.mutation.lock`, re-reads the file under it and writes
//!   atomically (temp, fsync, rename); an unreadable file is never treated as empty;
//! - a file that would not round-trip (external edits) is backed up and never rewritten;
//! - poisoned entries are masked in the snapshot and in every echoed entry list, never on disk.

mod durable_fs;
pub mod entries;
mod hub;
mod proposals;
pub mod schema;
mod search;
mod snapshot;
pub mod threat;

pub use hub::MemoryHub;
pub use schema::{
    memory_tool_description, memory_tool_schema, search_memory_description, search_memory_schema,
};
pub use snapshot::{MemorySnapshot, SnapshotStore};

use std::path::PathBuf;

/// Default budget of a `MEMORY.md` (environment facts), in characters.
pub const MEMORY_CHAR_LIMIT: usize = 2200;
/// Default budget of a `USER.md` (preferences), in characters.
pub const USER_CHAR_LIMIT: usize = 1375;
/// Consecutive failures per turn after which the tool tells the model to stop retrying.
pub const FAILURE_CAP: u32 = 3;
/// Pending proposals per user.
pub const MAX_PROPOSALS: usize = 100;
/// Serialised size of one proposal.
pub const MAX_PROPOSAL_BYTES: usize = 64 * 1024;

/// Where memory lives and how large the stores may grow.
#[derive(Debug, Clone)]
pub struct MemoryConfig {
    /// The agent data directory (`--data-dir`); memory files are under `agent/memory/`.
    pub data_dir: PathBuf,
    pub memory_char_limit: usize,
    pub user_char_limit: usize,
}

impl MemoryConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            memory_char_limit: MEMORY_CHAR_LIMIT,
            user_char_limit: USER_CHAR_LIMIT,
        }
    }
}

pub use mpa_protocol::{ReviewToken, WriteOrigin};

/// Errors of the memory stores. Messages are shown to models and users: they name the file
/// by its store label, never contain entry text or secrets.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("memory is busy: another write is in progress, retry shortly")]
    Busy,
    #[error("cannot read {file}: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {file}: {source}")]
    Write {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("permission denied: {0}")]
    Forbidden(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    fn lock(e: std::io::Error, file: &str) -> Self {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            Error::Busy
        } else {
            Error::Write {
                file: file.to_string(),
                source: e,
            }
        }
    }
}
