//! Session rows with a per-request cache (lineage walks revisit the same rows), and the
//! "do not show what is already in context" rule.

use super::SessionInfo;
use crate::error::Result;
use crate::store::{HIDDEN_SOURCES, LEFT_CONTEXT_REASONS};
use rusqlite::{Connection, OptionalExtension};
use std::collections::{HashMap, HashSet};

pub(crate) const SESSION_COLS: &str = "id, source, title, model, started_at, last_active, parent_session_id, end_reason, message_count";

pub(crate) fn session_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionInfo> {
    Ok(SessionInfo {
        id: r.get(0)?,
        source: r.get(1)?,
        title: r.get(2)?,
        model: r.get(3)?,
        started_at: r.get(4)?,
        last_active: r.get(5)?,
        parent_session_id: r.get(6)?,
        end_reason: r.get(7)?,
        message_count: r.get(8)?,
    })
}

impl SessionInfo {
    pub(crate) fn hidden(&self) -> bool {
        HIDDEN_SOURCES.contains(&self.source.as_str())
    }

    fn left_context(&self) -> bool {
        LEFT_CONTEXT_REASONS.contains(&self.end_reason.as_str())
    }
}

/// The `sessions` rows one request looks at.
pub(crate) struct Sessions<'c> {
    conn: &'c Connection,
    cache: HashMap<String, Option<SessionInfo>>,
}

impl<'c> Sessions<'c> {
    pub(crate) fn new(conn: &'c Connection) -> Self {
        Self {
            conn,
            cache: HashMap::new(),
        }
    }

    pub(crate) fn get(&mut self, id: &str) -> Result<Option<SessionInfo>> {
        if let Some(r) = self.cache.get(id) {
            return Ok(r.clone());
        }
        let row = self
            .conn
            .prepare(&format!(
                "SELECT {SESSION_COLS} FROM sessions WHERE id = ?1"
            ))?
            .query_row([id], session_row)
            .optional()?;
        self.cache.insert(id.to_owned(), row.clone());
        Ok(row)
    }

    /// Lineage root: walk parents (at most 100 hops), stopping at a cycle, a missing parent or
    /// a hidden-source ancestor.
    pub(crate) fn root(&mut self, id: &str) -> Result<String> {
        let mut root = id.to_owned();
        let mut seen = HashSet::new();
        seen.insert(root.clone());
        for _ in 0..100 {
            let Some(row) = self.get(&root)? else { break };
            if row.parent_session_id.is_empty() || seen.contains(&row.parent_session_id) {
                break;
            }
            match self.get(&row.parent_session_id)? {
                Some(p) if !p.hidden() => {
                    seen.insert(p.id.clone());
                    root = p.id;
                }
                _ => break,
            }
        }
        Ok(root)
    }

    /// The "do not show what is already in context" rule (spec §7.3): rewound rows never; rows
    /// of the current lineage only once compacted out or after the session left the context.
    pub(crate) fn visible(
        &mut self,
        hit_session: &SessionInfo,
        active: bool,
        compacted: bool,
        current_root: Option<&str>,
    ) -> Result<bool> {
        if !active && !compacted {
            return Ok(false);
        }
        let Some(cur) = current_root else {
            return Ok(true);
        };
        if self.root(&hit_session.id)? != cur {
            return Ok(true);
        }
        Ok(hit_session.left_context() || (!active && compacted))
    }
}
