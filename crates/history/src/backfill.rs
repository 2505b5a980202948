//! Background FTS backfill and index recovery (spec §11, §12.1).
//!
//! State lives in `state_meta`, per index table `T`:
//! - no `T` key: the index is ready and complete;
//! - `T = 'building'` with `T:high = H` and `T:progress = P`: rows with `id <= P` or `id > H`
//!   are indexed (the id-gated triggers index new rows at once and never send `'delete'` for an
//!   unindexed row); rows in `(P, H]` are not yet. Searches use the index and scan that gap
//!   with a bounded LIKE so old messages never vanish while it builds;
//! - `T = 'detached'`: a confirmed FTS-only corruption dropped the index's triggers; its
//!   contents are unknown until it is rebuilt, so nothing reads it.
//!
//! A step indexes the next [`DEFAULT_BATCH`] existing ids of the gap, in id order, and moves
//! `P` in the same transaction: a crash or cancellation loses at most the uncommitted batch,
//! never counts it. The message rows are never modified here.

use crate::error::{HistoryError, Result};
use crate::store::schema::{FTS_DEFS, FtsDef};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use std::time::Duration;

/// Where the tokenizer version of the CJK index is recorded; a different value rebuilds it.
pub const TOKENIZER_VERSION_KEY: &str = "tokenizer_version:cjk_unicode61";
/// Rows per step (spec §11.2).
pub const DEFAULT_BATCH: usize = 500;
/// Largest accepted batch size.
pub const MAX_BATCH: usize = 2000;
/// At most this many background backfills run in one process (one per user).
pub const MAX_TASKS: usize = 8;
/// The minimum pause between two steps of a paced backfill.
pub const MIN_PAUSE: Duration = Duration::from_millis(200);

const BUILDING: &str = "building";
const DETACHED: &str = "detached";

/// The pause after a step that took `step`: `max(0.2 s, 4 × step)`, so a paced backfill holds
/// the write lock at most about a fifth of the time.
pub fn pause_after(step: Duration) -> Duration {
    MIN_PAUSE.max(step.saturating_mul(4))
}

/// The state of one index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum IndexState {
    Ready,
    /// Rows in `(progress, high]` are not indexed yet.
    Building {
        high: i64,
        progress: i64,
    },
    /// Triggers dropped after a corruption; waiting for a rebuild.
    Detached,
}

impl IndexState {
    pub fn is_ready(self) -> bool {
        self == IndexState::Ready
    }

    /// Whether the index may be queried (with a gap scan while building).
    pub fn usable(self) -> bool {
        !matches!(self, IndexState::Detached)
    }
}

/// Progress of one index, for `status` and the foreground command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IndexProgress {
    pub index: &'static str,
    #[serde(flatten)]
    pub state: IndexState,
}

/// What one step did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StepReport {
    /// Rows inserted into indexes in this step (summed over indexes).
    pub rows_indexed: usize,
    /// Message ids covered in this step (the largest advance of any index).
    pub ids_advanced: i64,
    /// Indexes that finished in this step.
    pub finished: Vec<&'static str>,
    /// Whether any index still has a gap after this step.
    pub pending: bool,
}

fn meta(conn: &Connection, key: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare("SELECT value FROM state_meta WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()?)
}

fn set_meta(conn: &Connection, key: &str, value: &str) -> Result<()> {
    conn.prepare(
        "INSERT INTO state_meta (key, value) VALUES (?1, ?2) \
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    )?
    .execute(params![key, value])?;
    Ok(())
}

fn clear_markers(conn: &Connection, table: &str) -> Result<()> {
    conn.prepare("DELETE FROM state_meta WHERE key IN (?1, ?1 || ':high', ?1 || ':progress')")?
        .execute([table])?;
    Ok(())
}

fn meta_i64(conn: &Connection, key: &str) -> Result<Option<i64>> {
    Ok(meta(conn, key)?.and_then(|v| v.trim().parse().ok()))
}

/// The state of every index, in [`crate::store::FTS_TABLES`] order.
pub(crate) fn states(conn: &Connection) -> Result<[IndexState; 3]> {
    let mut out = [IndexState::Ready; 3];
    for (i, def) in FTS_DEFS.iter().enumerate() {
        out[i] = state(conn, def.table)?;
    }
    Ok(out)
}

fn state(conn: &Connection, table: &str) -> Result<IndexState> {
    Ok(match meta(conn, table)?.as_deref() {
        None => IndexState::Ready,
        Some(BUILDING) => {
            let high = meta_i64(conn, &format!("{table}:high"))?.unwrap_or(0);
            let progress = meta_i64(conn, &format!("{table}:progress"))?.unwrap_or(0);
            IndexState::Building { high, progress }
        }
        // `detached`, or a marker this build does not know: do not read the index.
        Some(_) => IndexState::Detached,
    })
}

pub(crate) fn progress(conn: &Connection) -> Result<Vec<IndexProgress>> {
    let st = states(conn)?;
    Ok(FTS_DEFS
        .iter()
        .zip(st)
        .map(|(d, state)| IndexProgress {
            index: d.table,
            state,
        })
        .collect())
}

fn table_exists(conn: &Connection, table: &str) -> Result<bool> {
    Ok(conn
        .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")?
        .exists([table])?)
}

fn drop_triggers(conn: &Connection, table: &str) -> Result<()> {
    conn.execute_batch(&format!(
        "DROP TRIGGER IF EXISTS {table}_ai; DROP TRIGGER IF EXISTS {table}_bd;"
    ))?;
    Ok(())
}

/// Which indexes must be rebuilt before they can be built up again: detached, missing, or (the
/// CJK index) written by another tokenizer version.
pub(crate) fn needs_rebuild(conn: &Connection) -> Result<Vec<&'static FtsDef>> {
    let mut out = Vec::new();
    for def in &FTS_DEFS {
        let detached = state(conn, def.table)? == IndexState::Detached;
        let stale_tokenizer = def.table == "messages_fts_cjk" && tokenizer_changed(conn)?;
        if detached || stale_tokenizer || !table_exists(conn, def.table)? {
            out.push(def);
        }
    }
    Ok(out)
}

fn tokenizer_changed(conn: &Connection) -> Result<bool> {
    let current = crate::tokenizer::TOKENIZER_VERSION.to_string();
    // A database written before the version was recorded was written by version 1.
    let stored = meta(conn, TOKENIZER_VERSION_KEY)?.unwrap_or_else(|| "1".to_owned());
    Ok(stored != current)
}

/// Drop and recreate one index, empty, with its backfill markers (spec §11.1); one transaction
/// with the caller. An empty database needs no backfill and is ready at once.
pub(crate) fn begin_rebuild(conn: &Connection, def: &FtsDef) -> Result<()> {
    let t = def.table;
    drop_triggers(conn, t)?;
    conn.execute_batch(&format!("DROP TABLE IF EXISTS {t};"))?;
    // Shadow tables orphaned by a `.recover` or a half-dropped table, by exact name only.
    for shadow in ["data", "idx", "content", "docsize", "config"] {
        conn.execute_batch(&format!("DROP TABLE IF EXISTS {t}_{shadow};"))?;
    }
    let high: i64 = conn.query_row("SELECT COALESCE(MAX(id), 0) FROM messages", [], |r| {
        r.get(0)
    })?;
    clear_markers(conn, t)?;
    if high > 0 {
        set_meta(conn, t, BUILDING)?;
        set_meta(conn, &format!("{t}:high"), &high.to_string())?;
        set_meta(conn, &format!("{t}:progress"), "0")?;
    }
    conn.execute_batch(&def.create_sql())?;
    if t == "messages_fts_cjk" {
        set_meta(
            conn,
            TOKENIZER_VERSION_KEY,
            &crate::tokenizer::TOKENIZER_VERSION.to_string(),
        )?;
    }
    tracing::info!(index = t, high, "FTS index rebuild started");
    Ok(())
}

/// Start a rebuild of every index that needs one; returns whether any index is building.
pub(crate) fn prepare(conn: &Connection) -> Result<bool> {
    for def in needs_rebuild(conn)? {
        begin_rebuild(conn, def)?;
    }
    if meta(conn, TOKENIZER_VERSION_KEY)?.is_none() {
        set_meta(
            conn,
            TOKENIZER_VERSION_KEY,
            &crate::tokenizer::TOKENIZER_VERSION.to_string(),
        )?;
    }
    Ok(states(conn)?.iter().any(|s| !s.is_ready()))
}

/// Whether [`prepare`] has anything to do (a read, so opening a healthy store writes nothing).
pub(crate) fn needs_prepare(conn: &Connection) -> Result<bool> {
    Ok(!needs_rebuild(conn)?.is_empty() || meta(conn, TOKENIZER_VERSION_KEY)?.is_none())
}

/// Advance every building index by one batch of existing ids, in one write transaction with the
/// caller. Progress moves with the rows it covers.
pub(crate) fn step(conn: &Connection, batch: usize) -> Result<StepReport> {
    let batch = batch.clamp(1, MAX_BATCH) as i64;
    let mut report = StepReport::default();
    for def in &FTS_DEFS {
        let t = def.table;
        let IndexState::Building { high, progress } = state(conn, t)? else {
            continue;
        };
        // The id of the batch's last existing row: an id bound, so rows appended meanwhile
        // (ids above H, already indexed by the triggers) are never inserted twice.
        let upper: i64 = conn
            .prepare(
                "SELECT MAX(id) FROM (SELECT id FROM messages WHERE id > ?1 AND id <= ?2 \
                 ORDER BY id LIMIT ?3)",
            )?
            .query_row(params![progress, high, batch], |r| {
                r.get::<_, Option<i64>>(0)
            })?
            .unwrap_or(high);
        let cols = def.col_list();
        let n = conn
            .prepare(&format!(
                "INSERT INTO {t}(rowid, {cols}) SELECT id, {cols} FROM {t}_src \
                 WHERE id > ?1 AND id <= ?2"
            ))?
            .execute(params![progress, upper])?;
        report.rows_indexed += n;
        report.ids_advanced = report.ids_advanced.max(upper - progress);
        if upper >= high {
            clear_markers(conn, t)?;
            report.finished.push(t);
            tracing::info!(index = t, "FTS index backfill finished");
        } else {
            set_meta(conn, &format!("{t}:progress"), &upper.to_string())?;
            report.pending = true;
        }
    }
    Ok(report)
}

/// Rows of the backfill still to do and done so far (over all building indexes).
pub(crate) fn totals(conn: &Connection) -> Result<(u64, u64)> {
    let (mut done, mut total) = (0u64, 0u64);
    for s in states(conn)? {
        if let IndexState::Building { high, progress } = s {
            total += high.max(0) as u64;
            done += progress.clamp(0, high.max(0)) as u64;
        }
    }
    Ok((done, total))
}

/// Whether an error is an FTS-only corruption (spec §12.1): `SQLITE_CORRUPT_VTAB`, or a
/// corruption error whose message names FTS5. A bare `SQLITE_CORRUPT` is structural.
pub(crate) fn is_fts_corruption(e: &HistoryError) -> bool {
    match e {
        HistoryError::Sqlite(rusqlite::Error::SqliteFailure(err, msg)) => {
            err.extended_code == rusqlite::ffi::SQLITE_CORRUPT_VTAB
                || (err.code == rusqlite::ErrorCode::DatabaseCorrupt
                    && msg.as_deref().is_some_and(|m| m.contains("fts5")))
        }
        _ => false,
    }
}

/// Whether an error may come from a damaged FTS index and is worth confirming with
/// [`detach_corrupt`]: an FTS-scoped corruption, or a constraint failure (a zeroed structure
/// record makes FTS5 write segment ids that already exist in its shadow table; the message
/// tables' own constraints are checked before any write or resolved with `ON CONFLICT`).
pub(crate) fn may_be_fts_damage(e: &HistoryError) -> bool {
    is_fts_corruption(e)
        || matches!(e, HistoryError::Sqlite(rusqlite::Error::SqliteFailure(err, _))
            if err.code == rusqlite::ErrorCode::ConstraintViolation)
}

/// Confirm which indexes are corrupt (FTS5 `integrity-check`) and detach those: drop their
/// triggers and mark them `detached` so nothing reads them until a rebuild. The message rows are
/// untouched. Returns the detached indexes (empty: nothing confirmed, nothing changed).
pub(crate) fn detach_corrupt(conn: &Connection) -> Result<Vec<&'static str>> {
    let mut out = Vec::new();
    for def in &FTS_DEFS {
        let t = def.table;
        let st = state(conn, t)?;
        if st == IndexState::Detached || !table_exists(conn, t)? {
            continue;
        }
        // Internal consistency, and for a complete index also against the message rows (an
        // index whose structure record was lost looks empty and consistent on its own).
        if let Err(e) = crate::integrity::fts_integrity(conn, t, st.is_ready()) {
            let e = HistoryError::from(e);
            if !is_fts_corruption(&e) {
                return Err(e);
            }
            drop_triggers(conn, t)?;
            clear_markers(conn, t)?;
            set_meta(conn, t, DETACHED)?;
            tracing::warn!(index = t, "corrupt FTS index detached; it will be rebuilt");
            out.push(t);
        }
    }
    Ok(out)
}
