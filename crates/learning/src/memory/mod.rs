//! Stable memory: curated `MEMORY.md` / `USER.md` entries (global and per user), budgets,
//! background-review proposals, the frozen prompt snapshot and a line search.
//!
//! [`Memory`] is the entry point; requests are [`WriteRequest`] / [`SearchRequest`], results
//! [`Written`] / [`WriteFailure`] / [`SearchResults`].

mod apply;
mod commands;
pub mod entries;
mod proposals;
mod reply;
mod request;
mod sanitize;
mod search;
mod snapshot;
mod store;
mod write;

pub use proposals::{PendingProposals, ProposalSummary};
pub use reply::{Applied, Staged, WriteFailure, Written};
pub use request::{Change, Op, ReplaceMode, WriteRequest};
pub use search::{
    DEFAULT_SEARCH_LIMIT, MAX_QUERY_CHARS, MAX_SEARCH_LIMIT, SearchCategory, SearchHit,
    SearchRequest, SearchResults, SkippedFile,
};
pub use snapshot::{MemorySnapshot, SnapshotStore};
pub use store::{Scope, Target};
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use snapshot::capped;

use crate::ActorKey;
use crate::{ReviewToken, WriteOrigin};
use mpa_protocol::Actor;
use mpa_redact::UserKey;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Default budget of a `MEMORY.md` (environment facts), in characters.
pub const MEMORY_CHAR_LIMIT: usize = 2200;
/// Default budget of a `USER.md` (preferences), in characters.
pub const USER_CHAR_LIMIT: usize = 1375;
/// Consecutive failures per turn after which a write answers "stop retrying".
pub const FAILURE_CAP: u32 = 3;
/// Pending proposals per user.
pub const MAX_PROPOSALS: usize = 100;
/// Serialised size of one proposal.
pub const MAX_PROPOSAL_BYTES: usize = 64 * 1024;
/// Longest string accepted in any memory request field, in characters.
pub const MAX_TEXT_CHARS: usize = 100_000;
/// Most operations in one batch.
pub const MAX_OPS: usize = 20;

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

/// Memory of every user. Cheap to clone (shared state behind `Arc`).
#[derive(Debug, Clone)]
pub struct Memory {
    pub(crate) cfg: Arc<MemoryConfig>,
    /// Consecutive write failures per (user, origin) in the current turn.
    failures: Arc<Mutex<HashMap<String, u32>>>,
}

impl Memory {
    pub fn new(cfg: MemoryConfig) -> Self {
        Self {
            cfg: Arc::new(cfg),
            failures: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// `<data>/agent/memory`.
    pub(crate) fn memory_root(&self) -> PathBuf {
        self.cfg.data_dir.join("agent").join("memory")
    }

    pub(crate) fn user_root(&self, key: &UserKey) -> PathBuf {
        self.memory_root().join("users").join(key.as_str())
    }

    /// A new user turn started: the consolidation failure cap counts per turn.
    pub fn begin_user_turn(&self, actor: &Actor) {
        self.reset_failures(actor, &WriteOrigin::Foreground);
    }

    /// A background review ended: drop its failure counter.
    pub fn end_review(&self, actor: &Actor, token: &ReviewToken) {
        self.reset_failures(actor, &WriteOrigin::BackgroundReview(token.clone()));
    }

    pub(crate) fn reset_failures(&self, actor: &Actor, origin: &WriteOrigin) {
        if let Ok(mut map) = self.failures.lock() {
            map.remove(&failure_key(actor, origin));
        }
    }

    /// Count one more consecutive failure; returns the new count.
    pub(crate) fn count_failure(&self, actor: &Actor, origin: &WriteOrigin) -> u32 {
        self.failures
            .lock()
            .map(|mut map| {
                let c = map.entry(failure_key(actor, origin)).or_insert(0);
                *c += 1;
                *c
            })
            .unwrap_or(1)
    }
}

fn failure_key(actor: &Actor, origin: &WriteOrigin) -> String {
    match origin {
        WriteOrigin::Foreground => format!("{}:fg", actor.user_key()),
        WriteOrigin::BackgroundReview(t) => format!("{}:review:{}", actor.user_key(), t.id()),
    }
}
