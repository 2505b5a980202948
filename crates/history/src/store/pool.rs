//! Connections: the policy every connection gets, the per-user store with its small pool of
//! idle connections, read snapshots with a deadline, and one writer at a time.

use super::*;
use crate::budget::Budget;

/// Idle connections kept per user; more concurrent callers open short-lived extras.
pub(crate) const POOL_SIZE: usize = 4;

/// Open one connection with the policy of spec §2.3. Reads `user_version` before any PRAGMA that
/// writes, so a newer database is refused untouched.
pub fn open_connection(
    db: &Path,
    busy: Duration,
    durability: mpa_protocol::Durability,
) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(db, flags)?;
    crate::tokenizer::register_cjk_tokenizer(&conn)?;
    crate::rank::register_rank_function(&conn)?;
    conn.busy_timeout(busy)?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(HistoryError::SchemaTooNew {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if durability == mpa_protocol::Durability::Throwaway {
        // Before the switch to WAL, which on a new file is a rollback-journal write.
        conn.execute_batch("PRAGMA synchronous = OFF;")?;
    }
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(mode, "history database is not in WAL mode");
    }
    conn.execute_batch(&format!(
        "PRAGMA foreign_keys = ON; PRAGMA synchronous = {}; \
         PRAGMA journal_size_limit = 67108864; PRAGMA temp_store = MEMORY;",
        durability.sqlite_synchronous()
    ))?;
    if version < SCHEMA_VERSION {
        migrate(&conn, version)?;
    }
    Ok(conn)
}

/// Whether some complete segment of a ranked index lacks its statistics.
fn rank_pending(conn: &Connection, size: i64) -> Result<bool> {
    for index in crate::rank::RankIndex::ALL {
        if crate::rank::stats::next_due(conn, index, size)?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A lazily opened per-user store with a small connection pool.
pub struct UserStore {
    pub(crate) db: PathBuf,
    busy: Duration,
    deadline: Duration,
    durability: mpa_protocol::Durability,
    pool: Mutex<Vec<Connection>>,
    /// Serialises writers of this process so concurrent appends never spin on SQLITE_BUSY;
    /// other processes are handled by `busy_timeout`.
    write_lock: Mutex<()>,
    maintenance_due: AtomicBool,
    /// Ids per ranking segment, and whether a complete segment still lacks its statistics.
    rank_size: i64,
    rank_due: AtomicBool,
    /// After a failed backfill round, no new task before this instant (a broken file would
    /// otherwise start, fail and log once per append or search).
    backfill_retry_at: Mutex<Option<Instant>>,
}

impl UserStore {
    pub(crate) fn open(
        data_dir: &Path,
        user: &UserKey,
        deadline: Duration,
        rank_size: i64,
        durability: mpa_protocol::Durability,
    ) -> Result<Self> {
        check_user_key(user)?;
        let db = prepare_files(data_dir, user)?;
        let busy = deadline.max(Duration::from_secs(3));
        let mut conn = open_connection(&db, busy, durability)?;
        let additions: i64 = conn.query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name IN \
             ('messages_filter', 'rank_segments', 'rank_postings', 'rank_postings_segment')",
            [],
            |r| r.get(0),
        )?;
        if additions < 4 {
            conn.execute_batch(ADDITIVE_SQL)?;
        }
        tighten_sidecars(&db)?;
        // Missing, detached or tokenizer-stale indexes start their rebuild here (a read first,
        // so opening a healthy store writes nothing).
        let building = if crate::backfill::needs_prepare(&conn)? {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let b = crate::backfill::prepare(&tx)?;
            tx.commit()?;
            b
        } else {
            crate::backfill::states(&conn)?
                .iter()
                .any(|s| !s.is_ready())
        };
        let rank_due = rank_pending(&conn, rank_size)?;
        Ok(Self {
            db,
            busy,
            deadline,
            durability,
            pool: Mutex::new(vec![conn]),
            write_lock: Mutex::new(()),
            maintenance_due: AtomicBool::new(building),
            rank_size,
            rank_due: AtomicBool::new(rank_due),
            backfill_retry_at: Mutex::new(None),
        })
    }

    /// Whether a backfill may have work to do (set at open and after a detach; cleared by the
    /// maintenance loop when nothing is pending).
    pub(crate) fn maintenance_due(&self) -> bool {
        let backing_off = self
            .backfill_retry_at
            .lock()
            .ok()
            .and_then(|t| *t)
            .is_some_and(|t| Instant::now() < t);
        !backing_off
            && (self.maintenance_due.load(Ordering::Acquire)
                || self.rank_due.load(Ordering::Acquire))
    }

    /// Whether the backfill has batches left (ranking statistics come after it).
    pub(crate) fn backfill_due(&self) -> bool {
        self.maintenance_due.load(Ordering::Acquire)
    }

    /// After an append: a segment may have become complete.
    pub(crate) fn note_appended(&self) -> Result<()> {
        if !self.rank_due.load(Ordering::Acquire) {
            let due = self.read(|c| rank_pending(c, self.rank_size))?;
            if due {
                self.rank_due.store(true, Ordering::Release);
            }
        }
        Ok(())
    }

    /// Segment summaries due now.
    pub(crate) fn rank_due_count(&self) -> Result<usize> {
        let size = self.rank_size;
        self.read(|c| crate::rank::stats::due_count(c, size))
    }

    /// One round of ranking statistics: the next complete segment of each index without them is
    /// summarised (read in one snapshot, written in one transaction under the write lock).
    /// Returns how many segments were written, whether more are due, and the time it took.
    pub(crate) fn rank_round(&self) -> Result<(usize, bool, Duration)> {
        const BUILD_DEADLINE: Duration = Duration::from_secs(600);
        let started = Instant::now();
        let mut written = 0;
        for index in crate::rank::RankIndex::ALL {
            let size = self.rank_size;
            let due = self.read(|c| crate::rank::stats::next_due(c, index, size))?;
            let Some((lo, hi)) = due else {
                continue;
            };
            let built = self.read_within(&Budget::new(BUILD_DEADLINE, None), |c| {
                crate::rank::stats::build(c, index, lo, hi)
            })?;
            self.write(|c| crate::rank::stats::write(c, index, lo, hi, &built))?;
            written += 1;
        }
        let pending = written > 0 && self.read(|c| rank_pending(c, self.rank_size))?;
        // Under no lock: an append that completes a segment meanwhile sets it again after.
        self.rank_due.store(pending, Ordering::Release);
        Ok((written, pending, started.elapsed()))
    }

    /// Hold off background backfills for `delay` after a failure (the markers survive, so the
    /// next task resumes where this one stopped).
    pub(crate) fn backfill_failed(&self, delay: Duration) {
        if let Ok(mut t) = self.backfill_retry_at.lock() {
            *t = Some(Instant::now() + delay);
        }
    }

    pub(crate) fn set_maintenance_due(&self, due: bool) {
        self.maintenance_due.store(due, Ordering::Release);
    }

    fn take(&self) -> Result<Connection> {
        let pooled = self.pool.lock().ok().and_then(|mut p| p.pop());
        match pooled {
            Some(c) => Ok(c),
            None => open_connection(&self.db, self.busy, self.durability),
        }
    }

    fn give_back(&self, conn: Connection) {
        if let Ok(mut p) = self.pool.lock()
            && p.len() < POOL_SIZE
        {
            p.push(conn);
        }
    }

    /// Run a read in one snapshot under the query deadline.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.read_within(&Budget::new(self.deadline, None), f)
    }

    /// Run a read in one snapshot within `budget`: SQLite's progress handler interrupts a
    /// statement once it is spent (the Rust work inside `f` checks the same budget itself), and
    /// the interruption is reported as the budget's error (deadline or cancellation).
    pub fn read_within<T>(
        &self,
        budget: &Budget,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> Result<T> {
        budget.check()?;
        let mut conn = self.take()?;
        let watch = budget.clone();
        conn.progress_handler(100, Some(move || watch.is_spent()))?;
        let out = (|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
            let v = f(&tx)?;
            tx.finish()?;
            Ok(v)
        })();
        let cleared = conn.progress_handler(0, None::<fn() -> bool>);
        if cleared.is_ok() {
            self.give_back(conn);
        }
        out.map_err(|e| budget.explain(e))
    }

    /// Run `op`; if it fails with an FTS-only corruption, detach the confirmed-corrupt indexes
    /// (their triggers dropped, marked for rebuild; message rows untouched) and run `op` once
    /// more (spec §12.1). Structural corruption, or nothing confirmed, returns the error as is.
    pub(crate) fn with_fts_recovery<T>(&self, op: impl Fn(&Self) -> Result<T>) -> Result<T> {
        match op(self) {
            Err(e) if crate::backfill::may_be_fts_damage(&e) => {
                let detached = self.write(crate::backfill::detach_corrupt)?;
                if detached.is_empty() {
                    return Err(e);
                }
                self.set_maintenance_due(true);
                op(self)
            }
            other => other,
        }
    }

    /// One backfill round under the write lock: start rebuilds that are due, then advance every
    /// building index by one batch. Returns the report and the time the transaction took.
    pub(crate) fn backfill_round(
        &self,
        batch: usize,
    ) -> Result<(crate::backfill::StepReport, Duration)> {
        let _guard = self
            .write_lock
            .lock()
            .map_err(|_| HistoryError::Worker("write lock poisoned".into()))?;
        let started = Instant::now();
        let mut conn = self.take()?;
        let out = (|| -> Result<crate::backfill::StepReport> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if crate::backfill::needs_prepare(&tx)? {
                crate::backfill::prepare(&tx)?;
            }
            let report = crate::backfill::step(&tx, batch)?;
            tx.commit()?;
            Ok(report)
        })();
        self.give_back(conn);
        let report = out?;
        // Under the write lock, so a detach that sets it again cannot be lost in between.
        self.set_maintenance_due(report.pending);
        Ok((report, started.elapsed()))
    }

    /// Run a write in one `BEGIN IMMEDIATE` transaction.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let _guard = self
            .write_lock
            .lock()
            .map_err(|_| HistoryError::Worker("write lock poisoned".into()))?;
        let mut conn = self.take()?;
        let out = (|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let v = f(&tx)?;
            tx.commit()?;
            Ok(v)
        })();
        self.give_back(conn);
        out
    }
}
