//! Legacy importers: copy evidence out of a MoviePilot installation (its per-user `state.db`
//! files and the `agentchat.agent_messages` recovery snapshots in its main database) or out of a
//! Hermes `state.db` into this host's per-user stores.
//!
//! Public API: [`import_hermes`], [`MoviePilotSource`] + [`import_moviepilot`],
//! [`legacy_import_pending`], [`ImportSummary`], [`ImportProgress`], [`legacy_identity`].
//!
//! Invariants:
//! - Every imported row is `provenance = legacy_snapshot`. A source timestamp is kept as is;
//!   a source without one gives `ts: None`, so the store dates the row from the session (never
//!   from the import run).
//! - Resumable: a cursor (last source row id per source) is saved atomically after each page
//!   (each snapshot record) has been appended, never before. A killed run re-reads at most one
//!   page, and the store's `(session_id, message_uid)` uniqueness turns that into duplicates.
//! - Idempotent: message ids are derived from the source (Hermes row id, MoviePilot
//!   `message_uid`, LangChain id or MoviePilot's own legacy identity), so a re-run — even with
//!   the cursor files deleted — inserts nothing new.
//! - Source databases are opened read-only and never written.
//! - Cursor files: `<history>/users/<key>/import-hermes-cursor.json` (per user) and
//!   `<history>/import-moviepilot-cursor.json` (one MoviePilot import spans many users). While
//!   one of them says `complete: false`, [`legacy_import_pending`] reports the import unfinished.
//!
//! Source reads are short synchronous page reads on the calling task; every write goes through
//! [`History`] (validation, redaction, its blocking pool).

mod cursor;
mod hermes;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod moviepilot;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod source;

pub use cursor::legacy_import_pending;
use cursor::*;
pub use hermes::import_hermes;
pub use moviepilot::{MoviePilotSource, import_moviepilot, legacy_identity};
use source::*;

use crate::error::{HistoryError, Result, io_err};
use crate::{CapturedMessage, History, Provenance, Role, SessionMeta, store};
use mpa_redact::UserKey;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Source rows read per page (state.db messages).
pub(crate) const PAGE_ROWS: i64 = 500;
/// Snapshot records read per page (each is one whole conversation).
pub(crate) const SNAPSHOT_PAGE: i64 = 20;
/// Prefix Hermes puts before JSON-encoded (list/dict) content.
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub const HERMES_JSON_SENTINEL: &str = "\u{0}json:";
pub(crate) const HERMES_CURSOR: &str = "import-hermes-cursor.json";
pub(crate) const MOVIEPILOT_CURSOR: &str = "import-moviepilot-cursor.json";

/// What one import run did. `skipped` maps a reason to a count of source messages (or, for
/// `unmapped_user_dir`, of directories).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImportSummary {
    pub source: String,
    /// Distinct users written to.
    pub users: usize,
    /// Distinct sessions that received at least one message in this run (new or duplicate).
    pub sessions: usize,
    pub messages_imported: usize,
    pub duplicates: usize,
    pub skipped: BTreeMap<String, usize>,
    /// True when every source was drained.
    pub complete: bool,
}

impl ImportSummary {
    pub(crate) fn skip(&mut self, reason: &str, n: usize) {
        if n > 0 {
            *self.skipped.entry(reason.to_owned()).or_default() += n;
        }
    }

    pub fn skipped_total(&self) -> usize {
        self.skipped.values().sum()
    }
}

/// Progress in source rows (state.db messages plus snapshot records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportProgress {
    pub done: u64,
    pub total: u64,
    pub imported: u64,
}
