//! `mpagent history check`: FTS5 `integrity-check` on every index (also against the content
//! view) and SQLite's structural check; with `repair`, an index that fails is rebuilt from the
//! canonical message rows, which are never touched. Structural corruption is reported, never
//! "repaired" by deleting or resetting the user's file.

use crate::backfill::IndexState;
use crate::store::schema::FTS_TABLES;
use crate::{HistoryError, Result};
use rusqlite::Connection;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IndexCheck {
    pub index: String,
    /// False while a backfill is pending or the index is detached (then it is neither checked
    /// nor rebuilt here: the backfill owns it).
    pub ready: bool,
    #[serde(flatten)]
    pub state: IndexState,
    pub ok: bool,
    /// SQLite's message for the failed check (no message text is ever included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub rebuilt: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    pub indexes: Vec<IndexCheck>,
    /// SQLite's integrity check of every canonical (non-FTS) table said "ok".
    pub database_ok: bool,
    pub messages: i64,
}

impl CheckReport {
    pub fn healthy(&self) -> bool {
        self.database_ok && self.indexes.iter().all(|i| i.ok || !i.ready)
    }
}

/// FTS5 `'integrity-check'` of one index: its internal consistency and, with
/// `against_content`, its postings against the content view (rank 1). Only meaningful against
/// the content for a complete index: a building one misses its gap by design.
pub(crate) fn fts_integrity(
    conn: &Connection,
    table: &str,
    against_content: bool,
) -> rusqlite::Result<()> {
    conn.execute(
        &format!("INSERT INTO {table}({table}) VALUES('integrity-check')"),
        [],
    )?;
    if against_content {
        conn.execute(
            &format!("INSERT INTO {table}({table}, rank) VALUES('integrity-check', 1)"),
            [],
        )?;
    }
    Ok(())
}

fn fts_check(conn: &Connection, table: &str) -> std::result::Result<(), String> {
    fts_integrity(conn, table, true).map_err(|e| e.to_string())
}

/// Runs inside one write transaction of the user's store.
pub(crate) fn run(conn: &Connection, repair: bool) -> Result<CheckReport> {
    // `PRAGMA integrity_check` also runs the FTS5 checks, so the canonical tables are checked
    // one by one: their health decides whether a rebuild is safe.
    let tables: Vec<String> = {
        let mut st = conn.prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'messages_fts%' \
             AND name NOT LIKE 'sqlite_%'",
        )?;
        st.query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()
            .map_err(HistoryError::from)?
    };
    let mut database_ok = true;
    for t in &tables {
        let verdict: String = conn
            .query_row(&format!("PRAGMA integrity_check(\"{t}\")"), [], |r| {
                r.get(0)
            })
            .map_err(HistoryError::from)?;
        database_ok &= verdict == "ok";
    }
    let states = crate::backfill::states(conn)?;
    let mut indexes = Vec::with_capacity(FTS_TABLES.len());
    for (i, table) in FTS_TABLES.iter().enumerate() {
        let mut c = IndexCheck {
            index: (*table).to_string(),
            ready: states[i].is_ready(),
            state: states[i],
            ok: false,
            error: None,
            rebuilt: false,
        };
        if c.ready {
            match fts_check(conn, table) {
                Ok(()) => c.ok = true,
                Err(e) => {
                    c.error = Some(e);
                    if repair && database_ok {
                        conn.execute(
                            &format!("INSERT INTO {table}({table}) VALUES('rebuild')"),
                            [],
                        )?;
                        c.rebuilt = true;
                        c.ok = fts_check(conn, table).is_ok();
                    }
                }
            }
        }
        indexes.push(c);
    }
    let messages: i64 = conn.query_row("SELECT COUNT(*) FROM messages", [], |r| r.get(0))?;
    Ok(CheckReport {
        indexes,
        database_ok,
        messages,
    })
}
