//! One user's SQLite file: paths and permissions ([`paths`]), the schema with its FTS constants
//! ([`schema`]), connections and the per-user pool ([`pool`]), and the write operations
//! ([`write`]: append, compaction flags, end reasons, delete with tombstone, retention).

mod paths;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod pool;
mod registry;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod schema;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod write;

pub(crate) use paths::*;
pub(crate) use pool::*;
pub use registry::RegistryStats;
pub(crate) use registry::StoreRegistry;
pub(crate) use schema::*;
pub(crate) use write::*;

use crate::error::{HistoryError, Result, io_err};
use crate::{AppendReport, CapturedMessage, CleanupReport, DeleteReport, Provenance, SessionMeta};
use mpa_protocol::{Role, UserId};
use mpa_redact::UserKey;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Sources that never appear in discover, browse or read.
pub const HIDDEN_SOURCES: [&str; 3] = ["kanban", "subagent", "tool"];
/// End reasons after which a session's content has left the live model context (spec §7.1).
pub const LEFT_CONTEXT_REASONS: [&str; 8] = [
    "compression",
    "new_session",
    "session_reset",
    "session_switch",
    "idle",
    "daily",
    "suspended",
    "resume_pending_expired",
];

/// Run FTS5 `'integrity-check'` (with rank 1: also against the content view) on every index.
pub fn integrity_check(db: &Path) -> Result<()> {
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )?;
    crate::tokenizer::register_cjk_tokenizer(&conn)?;
    for t in FTS_TABLES {
        crate::integrity::fts_integrity(&conn, t, true)?;
    }
    let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    if ok != "ok" {
        return Err(HistoryError::InvalidInput(format!(
            "sqlite integrity_check: {ok}"
        )));
    }
    Ok(())
}
