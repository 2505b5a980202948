//! Per-user evidence history: every user, assistant and tool message, verbatim (after secret
//! redaction), in one SQLite file per user, searchable with FTS5 — no model-written summaries.
//! This crate is a domain API only: it knows nothing of tools, tool JSON or the model (the host's
//! `session_search` tool in mpa-core parses arguments and renders results).
//!
//! Public API:
//! - [`History`] (one per process, cheap to clone): lazily opens per-user stores and runs
//!   every database call on a bounded blocking pool. [`History::append`],
//!   [`History::mark_compacted`], [`History::end_session`], [`History::search`] (typed
//!   [`SearchRequest`] → [`SearchResponse`], see [`recall`]), [`History::delete_session`],
//!   [`History::cleanup`], [`History::status`], [`History::check`], [`History::backfill`]
//!   (foreground), [`History::shutdown`] (stops running searches, cancels background backfills
//!   between batches), [`History::health`] (stores that cannot be read, for `/healthz`),
//!   [`History::store_registry_stats`].
//! - [`redact`]: the capture-time secret scrubber (`mpa-redact`'s text rules).
//! - [`import`]: JSONL import (idempotent, batch-atomic); [`legacy`]: MoviePilot and Hermes
//!   imports; [`corpus`]: the deterministic benchmark corpus generator; [`bench`]: the
//!   benchmark behind `mpagent bench history`.
//!
//! Invariants:
//! - Files live at `<data>/agent/runtime/history/users/<user-key>/state.db`; directories are
//!   0700, the database and its `-wal`/`-shm` 0600; symlinks are refused. No request can name a
//!   user, a path or a database: the user key comes from the caller's identity.
//! - A database stamped with a newer `user_version` than [`SCHEMA_VERSION`] is refused
//!   before anything is written.
//! - Message ids are AUTOINCREMENT (never reused); `(session_id, message_uid)` is unique and the
//!   first copy wins. Message rows and their FTS postings commit in one transaction.
//! - Compaction only flips flags: `active=0, compacted=1` rows stay searchable; rewound rows
//!   (`active=0, compacted=0`) are never shown. Nothing is deleted except by an explicit
//!   delete (which leaves a tombstone so late appends cannot resurrect it) or retention.
//! - Display caps (1200/4000/2000 characters) never truncate storage.
//! - A search spends at most [`HistoryConfig::query_deadline`], in SQLite and in Rust alike,
//!   has at most [`MAX_QUERY_TERMS`] terms and as many operators (`QueryTooComplex`), and stops
//!   as soon as its caller stops waiting ([`SearchContext::cancel`], a dropped future, shutdown).
//! - At most [`HistoryConfig::max_open_stores`] per-user stores are open; idle ones close, least
//!   recently used first, and reopen on use. A damaged file is `StorageUnavailable`, logged
//!   once per user per hour and counted in [`History::health`].
//! - Indexes are derived data: a missing, detached (confirmed corrupt) or tokenizer-stale index
//!   is dropped and rebuilt by the backfill in id-ordered batches whose progress commits with
//!   them; while it builds, searches scan its unindexed id range with LIKE. Message rows are
//!   never modified to repair an index, and a structurally damaged file is never reset.

// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod backfill;
mod backfill_scheduler;
pub mod bench;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod budget;
pub mod corpus;
pub mod error;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod health;
pub mod import;
pub mod integrity;
pub mod legacy;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod query;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod rank;
pub mod recall;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod search;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod store;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod tokenizer;

pub use backfill::{IndexProgress, IndexState};
pub use backfill_scheduler::SchedulerStats;
pub use error::{FailureClass, HistoryError, Result};
pub use health::HistoryHealth;
pub use integrity::CheckReport;
pub use mpa_protocol::Role;
pub use mpa_redact::redact;
pub use query::{MAX_QUERY_CHARS, MAX_QUERY_TERMS};
pub use rank::DEFAULT_SEGMENT_IDS;
pub use recall::{SearchRequest, SearchResponse};
pub use store::RegistryStats;
pub use store::integrity_check;
pub use store::schema::SCHEMA_VERSION;
pub use store::write::MAX_SESSION_ID_CHARS;
/// The CJK tokenizer, for code that opens a store's file itself (tests, benchmarks): register it
/// on the connection before touching `messages_fts_cjk`.
pub use tokenizer::{TokenizeReason, register_cjk_tokenizer, tokenize};

use budget::{Budget, Stop, StopOnDrop};
use mpa_redact::UserKey;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use store::{StoreRegistry, UserStore};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Tokenizer declared for `messages_fts_cjk`: native Rust, compiled in and registered on every
/// connection, so there is no "extension missing" state to track.
pub(crate) const CJK_TOKENIZE: &str = tokenizer::TOKENIZER_NAME;

/// Where a message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Captured live by this host.
    #[default]
    Observed,
    /// Imported from a recovery snapshot; its timestamp may be approximate.
    LegacySnapshot,
}

impl Provenance {
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Observed => "observed",
            Provenance::LegacySnapshot => "legacy_snapshot",
        }
    }
}

#[derive(Debug, Clone)]
pub struct HistoryConfig {
    /// The MPA data dir; stores live under `agent/runtime/history/users/<user-key>/state.db`.
    pub data_dir: PathBuf,
    /// Deadline of every read and the busy timeout; default 3 s. A search spends it in SQLite
    /// (checked by a VM-step progress handler) and in Rust (ranking, checked between blocks of
    /// work) alike, and stops early when its caller stops waiting.
    pub query_deadline: Duration,
    /// Per-user stores kept open at once (each holds a few connections with their page
    /// caches); beyond it the least recently used idle store is closed (default 32).
    pub max_open_stores: usize,
    /// A store unused this long is closed; its next use reopens it (default 10 minutes;
    /// `None`: only the bound closes stores).
    pub store_idle_ttl: Option<Duration>,
    /// Size of the bounded blocking pool shared by all users.
    pub blocking_permits: usize,
    /// Build missing/detached/stale indexes in background tasks after appends and searches.
    pub background_backfill: bool,
    /// Rows per backfill batch (1..=2000, default 500).
    pub backfill_batch: usize,
    /// Message ids per ranking segment (default [`DEFAULT_SEGMENT_IDS`]); small values are for
    /// tests.
    pub rank_segment_ids: i64,
    /// Bytes of decoded posting lists the process keeps between searches (default 64 MiB; the
    /// least recently used go first; 0 keeps none).
    pub rank_cache_bytes: usize,
    /// `Durable` (WAL, `synchronous = NORMAL`) unless the data directory is thrown away after
    /// use (evaluation runs: no fsync).
    pub durability: mpa_protocol::Durability,
}

/// Default of [`HistoryConfig::max_open_stores`].
pub const DEFAULT_MAX_OPEN_STORES: usize = 32;
/// Default of [`HistoryConfig::store_idle_ttl`].
pub const DEFAULT_STORE_IDLE_TTL: Duration = Duration::from_secs(600);

impl HistoryConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            query_deadline: Duration::from_secs(3),
            max_open_stores: DEFAULT_MAX_OPEN_STORES,
            store_idle_ttl: Some(DEFAULT_STORE_IDLE_TTL),
            blocking_permits: 8,
            background_backfill: true,
            backfill_batch: backfill::DEFAULT_BATCH,
            rank_segment_ids: DEFAULT_SEGMENT_IDS,
            rank_cache_bytes: 64 << 20,
            durability: mpa_protocol::Durability::Durable,
        }
    }
}

/// Session metadata sent with an append. `source` is first-write-wins; `title`/`model` update
/// when non-empty; `parent_session_id` is set once.
#[derive(Debug, Clone, Default)]
pub struct SessionMeta {
    pub session_id: String,
    /// `web`, `cli`, `telegram`, `cron`, `subagent`, `tool`, `kanban`, … (empty = `chat`).
    pub source: String,
    pub title: Option<String>,
    pub parent_session_id: Option<String>,
    pub model: Option<String>,
    /// Defaults to the earliest message timestamp of the first batch, else now.
    pub started_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// One message to archive. `content` is the full text (tool results before any display cap).
#[derive(Debug, Clone)]
pub struct CapturedMessage {
    pub message_uid: String,
    pub role: Role,
    pub content: String,
    pub tool_name: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool_calls: Option<serde_json::Value>,
    /// `None`: now for observed messages; the session's last activity for legacy snapshots.
    pub ts: Option<chrono::DateTime<chrono::Utc>>,
    pub provenance: Provenance,
}

/// Host-injected search context (never from the caller's request).
#[derive(Debug, Clone, Default)]
pub struct SearchContext {
    pub current_session_id: Option<String>,
    /// Cancelled when nobody waits for the answer any more (the tool call timed out, the turn
    /// stopped): the search stops between blocks of work instead of running to its deadline.
    pub cancel: Option<CancellationToken>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AppendReport {
    pub inserted: usize,
    /// Messages whose `(session_id, message_uid)` already existed (first copy kept).
    pub duplicates: usize,
    /// The session was deleted earlier; nothing was written.
    pub tombstoned: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeleteReport {
    pub session_id: String,
    pub session_existed: bool,
    pub messages_deleted: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CleanupReport {
    /// False when `older_than_days` is 0 (retention disabled).
    pub enabled: bool,
    pub cutoff: Option<f64>,
    pub sessions_expired: usize,
    pub messages_deleted: usize,
    /// Tombstones of sessions deleted before the cutoff (a late append for a session whose own
    /// activity is older than the retention period would be expired again anyway).
    pub tombstones_removed: usize,
}

/// Which indexes are ready (complete); `false` while building or detached.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IndexStatus {
    pub messages_fts: bool,
    pub messages_fts_trigram: bool,
    pub messages_fts_cjk: bool,
}

impl IndexStatus {
    /// From the states in [`store::FTS_TABLES`] order.
    pub(crate) fn of(states: impl IntoIterator<Item = IndexState>) -> Self {
        let mut ready = states.into_iter().map(IndexState::is_ready);
        let mut next = || ready.next().unwrap_or(false);
        Self {
            messages_fts: next(),
            messages_fts_trigram: next(),
            messages_fts_cjk: next(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusReport {
    pub user_key: String,
    pub db_path: PathBuf,
    pub db_bytes: u64,
    pub wal_bytes: u64,
    pub schema_version: i64,
    /// Connection policy as applied to this store's connections.
    pub journal_mode: String,
    pub foreign_keys: bool,
    pub sessions: i64,
    pub messages: i64,
    pub active_messages: i64,
    pub compacted_messages: i64,
    pub rewound_messages: i64,
    pub tombstones: i64,
    pub index_status: IndexStatus,
    pub cjk_tokenizer: &'static str,
    pub legacy_import_complete: bool,
    /// Per-index build state (`ready`, `building` with `high`/`progress`, `detached`).
    pub backfill: Vec<IndexProgress>,
    /// Ranking statistics of complete id segments (see `mpagent history backfill`).
    pub ranking: RankingStatus,
}

/// Ranking statistics in [`StatusReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankingStatus {
    /// Message ids per segment.
    pub segment_ids: i64,
    /// Complete segments (per index) still without statistics; the background task builds them.
    pub pending: usize,
    #[serde(flatten)]
    pub sizes: RankingSizes,
}

/// How the foreground backfill runs.
#[derive(Debug, Clone)]
pub struct BackfillOptions {
    /// Rows per batch (clamped to 1..=2000).
    pub batch: usize,
    /// Pause `max(0.2 s, 4 × batch time)` between batches (what the background task does), so a
    /// running host keeps most of the write time; off: run flat out.
    pub paced: bool,
    /// Drop and rebuild every index from the message rows first.
    pub rebuild: bool,
}

impl Default for BackfillOptions {
    fn default() -> Self {
        Self {
            batch: backfill::DEFAULT_BATCH,
            paced: true,
            rebuild: false,
        }
    }
}

/// Progress reported after every batch of a foreground backfill.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BackfillProgress {
    /// Message ids covered so far, summed over building indexes.
    pub done: u64,
    pub total: u64,
    /// Seconds the last batch's transaction took (0 before the first batch).
    pub last_batch_seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackfillSummary {
    /// Progress already committed when this run started (a resumed run starts above 0).
    pub resumed_from: BackfillProgress,
    pub batches: u64,
    pub rows_indexed: u64,
    pub seconds: f64,
    /// Seconds spent inside batch transactions (the rest is pauses).
    pub busy_seconds: f64,
    pub indexes: Vec<IndexProgress>,
}

/// What [`History::build_ranking`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankingSummary {
    /// Segment statistics written (one per index per segment).
    pub segments_written: usize,
    pub seconds: f64,
}

/// Size of the ranking statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankingSizes {
    /// Summarised segments (one row per index per segment).
    pub segments: i64,
    /// Listed (term, segment) rows.
    pub terms: i64,
    /// Bytes of terms and frontiers (without SQLite's page overhead).
    pub payload_bytes: i64,
}

struct Inner {
    cfg: HistoryConfig,
    stores: Mutex<StoreRegistry>,
    health: Mutex<health::HealthBook>,
    /// Moves on at every [`History::shutdown`]: work started before it stops.
    shutdown_epoch: Arc<AtomicU64>,
    permits: Arc<Semaphore>,
    maint: backfill_scheduler::BackfillScheduler,
    /// Decoded posting lists kept between searches (all users, bounded by bytes).
    rank_lists: rank::SharedLists,
}

impl Inner {
    /// The user's store if this process has it open.
    fn opened(&self, user: &UserKey) -> Option<Arc<UserStore>> {
        self.stores.lock().ok()?.peek(user)
    }

    /// The user's store, opened if it is not (closing idle ones the bounds ask for). Opening
    /// happens under the registry's lock, so a file is never opened twice.
    fn store(&self, user: &UserKey) -> Result<Arc<UserStore>> {
        let now = Instant::now();
        let mut reg = self
            .stores
            .lock()
            .map_err(|_| HistoryError::Worker("store registry poisoned".into()))?;
        let (store, closing) = match reg.get(user, now) {
            Some(s) => {
                let closing = reg.close_idle(now);
                (s, closing)
            }
            None => {
                let s = Arc::new(UserStore::open(
                    &self.cfg.data_dir,
                    user,
                    self.cfg.query_deadline,
                    self.cfg.rank_segment_ids.max(1),
                    self.cfg.durability,
                )?);
                let closing = reg.insert(user.clone(), s.clone(), now);
                (s, closing)
            }
        };
        drop(reg);
        // Closing a file's last connection checkpoints its WAL: not under the lock.
        drop(closing);
        Ok(store)
    }

    /// Keeps the health book and the log up to date with an operation's result.
    fn note_health<T>(&self, user: &UserKey, out: &Result<T>) {
        let Ok(mut book) = self.health.lock() else {
            return;
        };
        match out {
            Ok(_) => {
                if book.succeeded(user) == health::Report::Recovered {
                    tracing::info!(user = %user.as_str(), "history storage available again");
                }
            }
            Err(e) => {
                if book.failed(user, e, Instant::now()) == health::Report::Unavailable {
                    tracing::warn!(
                        user = %user.as_str(),
                        error = %e,
                        "history storage unavailable: this user's evidence is not captured and \
                         session_search fails until the file is restored from a backup (it is \
                         never reset or deleted automatically); logged again hourly while it \
                         lasts"
                    );
                }
            }
        }
    }
}

/// One per process; lazily opens per-user stores. Cloning shares the pool and the stores.
#[derive(Clone)]
pub struct History {
    inner: Arc<Inner>,
}

impl History {
    pub fn new(cfg: HistoryConfig) -> Self {
        let rank_lists = rank::SharedLists::new(cfg.rank_cache_bytes);
        let permits = Arc::new(Semaphore::new(cfg.blocking_permits.max(1)));
        Self {
            inner: Arc::new(Inner {
                stores: Mutex::new(StoreRegistry::new(cfg.max_open_stores, cfg.store_idle_ttl)),
                cfg,
                health: Mutex::new(health::HealthBook::default()),
                shutdown_epoch: Arc::new(AtomicU64::new(0)),
                permits,
                maint: backfill_scheduler::BackfillScheduler::new(),
                rank_lists,
            }),
        }
    }

    pub fn config(&self) -> &HistoryConfig {
        &self.inner.cfg
    }

    /// Run `f` on the bounded blocking pool against the user's store.
    async fn run<T, F>(&self, user: &UserKey, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&UserStore) -> Result<T> + Send + 'static,
    {
        self.run_until(user, None, move |s, _| f(s)).await
    }

    /// Blocking permits free now (all of them: no blocking work runs).
    // public for the crate's tests (tests/all.rs); not part of the API
    #[doc(hidden)]
    pub fn free_blocking_permits(&self) -> usize {
        self.inner.permits.available_permits()
    }

    /// Run `f` on the bounded blocking pool against the user's store, with a [`Stop`] flag that
    /// is set as soon as nobody waits for the result: this future dropped (a tool timeout, a
    /// stopped turn), `cancel` cancelled, or [`History::shutdown`]. `f` checks it (through a
    /// [`Budget`]) between blocks of work, so no blocking thread outlives its caller's interest.
    // public for the crate's tests (tests/all.rs); not part of the API
    #[doc(hidden)]
    pub async fn run_until<T, F>(
        &self,
        user: &UserKey,
        cancel: Option<&CancellationToken>,
        f: F,
    ) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&UserStore, &Stop) -> Result<T> + Send + 'static,
    {
        store::check_user_key(user)?;
        let stop = Stop::new(self.inner.shutdown_epoch.clone());
        let work = async {
            let _stop_on_drop = StopOnDrop(stop.clone());
            let permit = self
                .inner
                .permits
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| HistoryError::Worker("blocking pool closed".into()))?;
            let inner = self.inner.clone();
            let key = user.clone();
            let stop = stop.clone();
            tokio::task::spawn_blocking(move || {
                let _permit = permit;
                let store = inner.store(&key)?;
                f(&store, &stop)
            })
            .await
            .map_err(|e| HistoryError::Worker(e.to_string()))?
        };
        let out = match cancel {
            Some(c) => tokio::select! {
                out = work => out,
                _ = c.cancelled() => Err(HistoryError::Cancelled),
            },
            None => work.await,
        }
        .map_err(HistoryError::into_storage_unavailable);
        self.inner.note_health(user, &out);
        out
    }

    /// Append a batch (≤ 100 messages) idempotently. Validation happens before any write;
    /// secrets are redacted before anything is stored; a tombstoned session is a no-op.
    pub async fn append(
        &self,
        user: &UserKey,
        session: SessionMeta,
        msgs: Vec<CapturedMessage>,
    ) -> Result<AppendReport> {
        let reports = self.append_many(user, vec![(session, msgs)]).await?;
        reports
            .into_iter()
            .next()
            .ok_or_else(|| HistoryError::Worker("append returned no report".into()))
    }

    /// Append several session batches in one transaction (bulk import: fewer commits). Each
    /// batch obeys the same validation and tombstone rules as [`History::append`].
    pub async fn append_many(
        &self,
        user: &UserKey,
        batches: Vec<(SessionMeta, Vec<CapturedMessage>)>,
    ) -> Result<Vec<AppendReport>> {
        for (session, msgs) in &batches {
            store::validate_append(session, msgs)?;
        }
        let out = self
            .run(user, move |s| {
                let prepared: Vec<(SessionMeta, Vec<store::PreparedMessage>)> = batches
                    .into_iter()
                    .map(|(m, msgs)| (m, store::prepare(msgs)))
                    .collect();
                let reports = s.with_fts_recovery(|s| {
                    s.write(|c| {
                        prepared
                            .iter()
                            .map(|(m, p)| store::append(c, m, p))
                            .collect()
                    })
                })?;
                // A failure here only delays the statistics; the append itself committed.
                if let Err(e) = s.note_appended() {
                    tracing::debug!(error = %e, "ranking statistics check failed");
                }
                Ok(reports)
            })
            .await;
        backfill_scheduler::schedule(self, user);
        out
    }

    /// Mark messages compacted out of the live context (still searchable). Returns rows changed.
    pub async fn mark_compacted(
        &self,
        user: &UserKey,
        session_id: &str,
        message_uids: Vec<String>,
    ) -> Result<usize> {
        store::validate_session_id(session_id)?;
        let sid = session_id.to_owned();
        self.run(user, move |s| {
            s.write(|c| store::set_flags(c, &sid, &message_uids, true))
        })
        .await
    }

    /// Mark messages rewound/undone (`active=0, compacted=0`): never searchable again.
    pub async fn mark_rewound(
        &self,
        user: &UserKey,
        session_id: &str,
        message_uids: Vec<String>,
    ) -> Result<usize> {
        store::validate_session_id(session_id)?;
        let sid = session_id.to_owned();
        self.run(user, move |s| {
            s.write(|c| store::set_flags(c, &sid, &message_uids, false))
        })
        .await
    }

    /// Record why a session ended (`compression`, `new_session`, `branched`, …).
    pub async fn end_session(&self, user: &UserKey, session_id: &str, reason: &str) -> Result<()> {
        store::validate_session_id(session_id)?;
        let (sid, reason) = (session_id.to_owned(), reason.to_owned());
        self.run(user, move |s| {
            s.write(|c| store::end_session(c, &sid, &reason))
        })
        .await
    }

    /// Recall: discover, search inside a session, read, scroll or browse (see [`recall`]). A
    /// failed read is an error whose [`HistoryError::classify`] says how serious it is.
    pub async fn search(
        &self,
        user: &UserKey,
        ctx: &SearchContext,
        req: SearchRequest,
    ) -> Result<SearchResponse> {
        if let Some(q) = req.query() {
            query::check_complexity(&query::sanitize(q))?;
        }
        let current = ctx.current_session_id.clone();
        let inner = self.inner.clone();
        let deadline = self.inner.cfg.query_deadline;
        let store_key = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            user.as_str().hash(&mut h);
            h.finish()
        };
        let out = self
            .run_until(user, ctx.cancel.as_ref(), move |s, stop| {
                let lists = Some((&inner.rank_lists, store_key));
                let budget = Budget::new(deadline, Some(stop.clone()));
                s.with_fts_recovery(|s| {
                    s.read_within(&budget, |c| {
                        recall::run(c, current.as_deref(), &req, lists, &budget)
                    })
                })
            })
            .await;
        backfill_scheduler::schedule(self, user);
        let (outcome, index_status) = out?;
        Ok(SearchResponse {
            outcome,
            index_status,
            legacy_import_pending: legacy::legacy_import_pending(&self.inner.cfg.data_dir, user),
        })
    }

    /// Delete a session's evidence and leave a tombstone (late appends become no-ops).
    pub async fn delete_session(&self, user: &UserKey, session_id: &str) -> Result<DeleteReport> {
        store::validate_session_id(session_id)?;
        let sid = session_id.to_owned();
        self.run(user, move |s| s.write(|c| store::delete_session(c, &sid)))
            .await
    }

    /// Expire sessions whose own last activity is older than `older_than_days`; 0 disables.
    pub async fn cleanup(&self, user: &UserKey, older_than_days: u32) -> Result<CleanupReport> {
        self.run(user, move |s| store::cleanup(s, older_than_days))
            .await
    }

    /// Run the backfill of `user` in the foreground until every index is ready, calling
    /// `progress` after each batch. Resumes from committed progress; each batch is one
    /// transaction, so a kill loses at most the batch in flight and never counts it.
    pub async fn backfill(
        &self,
        user: &UserKey,
        opts: BackfillOptions,
        mut progress: impl FnMut(BackfillProgress) + Send,
    ) -> Result<BackfillSummary> {
        let started = std::time::Instant::now();
        let rebuild = opts.rebuild;
        let (done, total) = self
            .run(user, move |s| {
                s.write(|c| {
                    if rebuild {
                        for def in &store::FTS_DEFS {
                            backfill::begin_rebuild(c, def)?;
                        }
                    } else if backfill::needs_prepare(c)? {
                        backfill::prepare(c)?;
                    }
                    backfill::totals(c)
                })
            })
            .await?;
        let resumed_from = BackfillProgress {
            done,
            total,
            last_batch_seconds: 0.0,
        };
        progress(resumed_from);
        let (mut batches, mut rows, mut busy) = (0u64, 0u64, std::time::Duration::ZERO);
        loop {
            let batch = opts.batch;
            let (report, took, (left_done, left_total)) = self
                .run(user, move |s| {
                    let (r, took) = s.backfill_round(batch)?;
                    let t = s.read(backfill::totals)?;
                    Ok((r, took, t))
                })
                .await?;
            batches += 1;
            rows += report.rows_indexed as u64;
            busy += took;
            let last_batch_seconds = took.as_secs_f64();
            if !report.pending {
                // Finished: the markers are gone, so report the run's own total as done.
                progress(BackfillProgress {
                    done: resumed_from.total,
                    total: resumed_from.total,
                    last_batch_seconds,
                });
                break;
            }
            // Indexes that finished leave the sums; count against the run's starting total.
            let remaining = left_total.saturating_sub(left_done);
            progress(BackfillProgress {
                done: resumed_from.total.saturating_sub(remaining),
                total: resumed_from.total,
                last_batch_seconds,
            });
            if opts.paced {
                tokio::time::sleep(backfill::pause_after(took)).await;
            }
        }
        let indexes = self.run(user, |s| s.read(backfill::progress)).await?;
        Ok(BackfillSummary {
            resumed_from,
            batches,
            rows_indexed: rows,
            seconds: started.elapsed().as_secs_f64(),
            busy_seconds: busy.as_secs_f64(),
            indexes,
        })
    }

    /// Summarise every complete id segment that lacks ranking statistics now, in the
    /// foreground (the background task does the same, paced); `progress(done, total)` counts
    /// segment summaries (one per index per segment).
    pub async fn build_ranking(
        &self,
        user: &UserKey,
        mut progress: impl FnMut(usize, usize) + Send,
    ) -> Result<RankingSummary> {
        let started = std::time::Instant::now();
        let total = self.run(user, |s| s.rank_due_count()).await?;
        let mut segments = 0;
        progress(segments, total);
        loop {
            let (written, pending, _) = self.run(user, |s| s.rank_round()).await?;
            segments += written;
            progress(segments, total.max(segments));
            if written == 0 || !pending {
                break;
            }
        }
        Ok(RankingSummary {
            segments_written: segments,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// Rows and payload bytes of the ranking statistics (for benchmarks and status).
    pub async fn ranking_sizes(&self, user: &UserKey) -> Result<RankingSizes> {
        self.run(user, |s| s.read(rank::stats::sizes)).await
    }

    /// Counters of the background backfill tasks.
    pub fn backfill_scheduler_stats(&self) -> SchedulerStats {
        self.inner.maint.stats()
    }

    /// Stop running searches (between blocks of work), cancel background backfills (between
    /// batches) and wait for the backfills to stop. Calls made afterwards run as usual.
    pub async fn shutdown(&self) {
        self.inner.shutdown_epoch.fetch_add(1, Ordering::AcqRel);
        self.inner.maint.shutdown().await;
    }

    /// Whether every user's store worked on its last use (for the host's health report).
    pub fn health(&self) -> HistoryHealth {
        match self.inner.health.lock() {
            Ok(book) => book.summary(),
            Err(_) => HistoryHealth {
                status: "degraded",
                stores_unavailable: 0,
                unavailable_since: None,
                reason: Some("history health book unavailable".into()),
            },
        }
    }

    /// Open per-user stores, and how many were closed (bounded, least recently used first).
    pub fn store_registry_stats(&self) -> RegistryStats {
        self.inner
            .stores
            .lock()
            .map(|r| r.stats())
            .unwrap_or(RegistryStats { open: 0, closed: 0 })
    }

    /// Users that have a history directory (for maintenance over all users).
    pub fn known_users(&self) -> Vec<UserKey> {
        let root = store::users_root(&self.inner.cfg.data_dir);
        let Ok(entries) = std::fs::read_dir(root) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter_map(|name| {
                serde_json::from_value::<UserKey>(serde_json::Value::String(name)).ok()
            })
            .filter(|k| store::check_user_key(k).is_ok())
            .collect()
    }

    /// FTS `integrity-check` of every index and SQLite's structural check; with `repair`, a
    /// failing index is rebuilt from the message rows (which are never modified).
    pub async fn check(&self, user: &UserKey, repair: bool) -> Result<CheckReport> {
        self.run(user, move |s| s.write(|c| integrity::run(c, repair)))
            .await
    }

    pub async fn status(&self, user: &UserKey) -> Result<StatusReport> {
        let key = user.as_str().to_owned();
        let legacy_done = !legacy::legacy_import_pending(&self.inner.cfg.data_dir, user);
        let rank_size = self.inner.cfg.rank_segment_ids.max(1);
        self.run(user, move |s| {
            let db = s.db.clone();
            let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
            let mut wal = db.as_os_str().to_owned();
            wal.push("-wal");
            let (db_bytes, wal_bytes) = (size(&db), size(std::path::Path::new(&wal)));
            s.read(|c| {
                let one = |sql: &str| -> Result<i64> { Ok(c.query_row(sql, [], |r| r.get(0))?) };
                let backfill = backfill::progress(c)?;
                let ranking = RankingStatus {
                    segment_ids: rank_size,
                    pending: rank::stats::due_count(c, rank_size)?,
                    sizes: rank::stats::sizes(c)?,
                };
                // COUNT(*) uses the smallest index; inactive rows come from a partial index, so
                // status never scans message bodies (gigabytes at 2M messages).
                let total = one("SELECT COUNT(*) FROM messages")?;
                let compacted =
                    one("SELECT COUNT(*) FROM messages WHERE active = 0 AND compacted = 1")?;
                let rewound =
                    one("SELECT COUNT(*) FROM messages WHERE active = 0 AND compacted = 0")?;
                Ok(StatusReport {
                    user_key: key,
                    db_path: db,
                    db_bytes,
                    wal_bytes,
                    schema_version: one("PRAGMA user_version")?,
                    journal_mode: c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?,
                    foreign_keys: one("PRAGMA foreign_keys")? == 1,
                    sessions: one("SELECT COUNT(*) FROM sessions")?,
                    messages: total,
                    active_messages: total - compacted - rewound,
                    compacted_messages: compacted,
                    rewound_messages: rewound,
                    tombstones: one("SELECT COUNT(*) FROM deleted_sessions")?,
                    index_status: IndexStatus::of(backfill.iter().map(|p| p.state)),
                    cjk_tokenizer: CJK_TOKENIZE,
                    legacy_import_complete: legacy_done,
                    backfill,
                    ranking,
                })
            })
        })
        .await
    }

    /// Path of a user's database file (for diagnostics and tests; never exposed to tools).
    pub fn db_path(&self, user: &UserKey) -> PathBuf {
        store::db_path(&self.inner.cfg.data_dir, user)
    }
}
