//! The invocation ledger (spec runtime.md §6): one row per write the agent attempts, claimed in
//! its own committed statement before the side effect and finished by a conditional update on the
//! claim token. No arguments or outputs are stored — only their digest — so the table can be kept
//! as long as a receipt is needed without holding anything sensitive.

use crate::{Result, Store, StoreError, now};
use rusqlite::{OptionalExtension, Row, params};

/// A ledger row's status (the table's CHECK constraint lists exactly these).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LedgerStatus {
    Running,
    Succeeded,
    Failed,
    Pending,
    Unknown,
}

impl LedgerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LedgerStatus::Running => "running",
            LedgerStatus::Succeeded => "succeeded",
            LedgerStatus::Failed => "failed",
            LedgerStatus::Pending => "pending",
            LedgerStatus::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => LedgerStatus::Running,
            "succeeded" => LedgerStatus::Succeeded,
            "failed" => LedgerStatus::Failed,
            "pending" => LedgerStatus::Pending,
            "unknown" => LedgerStatus::Unknown,
            _ => return None,
        })
    }

    /// The fixed host text stored with each status (the spec's summaries, in English).
    pub fn summary(self) -> &'static str {
        match self {
            LedgerStatus::Running => "write started, awaiting result",
            LedgerStatus::Succeeded => "write confirmed succeeded",
            LedgerStatus::Failed => "write confirmed failed",
            LedgerStatus::Pending => "write confirmed submitted, follow-up completion not observed",
            LedgerStatus::Unknown => {
                "write outcome unknown; verify state before deciding next step"
            }
        }
    }

    /// Still open: a later call for the same write is answered from it, never re-executed.
    pub fn is_unresolved(self) -> bool {
        matches!(self, LedgerStatus::Running | LedgerStatus::Unknown)
    }
}

/// Who and what a row is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerKey {
    /// The acting host user id.
    pub principal_id: String,
    pub session_id: String,
    pub invocation_id: String,
    pub tool_name: String,
    /// SHA-256 hex of the canonical arguments.
    pub arguments_digest: String,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LedgerRecord {
    pub id: i64,
    pub principal_id: String,
    pub session_id: String,
    pub invocation_id: String,
    pub tool_name: String,
    pub arguments_digest: String,
    #[serde(skip)]
    pub claim_token: String,
    pub status: LedgerStatus,
    pub summary: String,
    pub created_at: String,
    pub updated_at: String,
}

/// The result of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This caller holds the execution right: run the write, then finish with this token.
    Acquired { id: i64, claim_token: String },
    /// The identity was claimed before: answer from that row, never run again.
    Existing(LedgerRecord),
}

fn valid_identity(s: &str) -> bool {
    !s.is_empty() && s.chars().count() <= 255
}

fn valid_tool(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

fn record(r: &Row<'_>) -> rusqlite::Result<LedgerRecord> {
    let status: String = r.get(7)?;
    Ok(LedgerRecord {
        id: r.get(0)?,
        principal_id: r.get(1)?,
        session_id: r.get(2)?,
        invocation_id: r.get(3)?,
        tool_name: r.get(4)?,
        arguments_digest: r.get(5)?,
        claim_token: r.get(6)?,
        status: LedgerStatus::parse(&status).unwrap_or(LedgerStatus::Unknown),
        summary: r.get(8)?,
        created_at: r.get(9)?,
        updated_at: r.get(10)?,
    })
}

const COLUMNS: &str = "id, principal_id, session_id, invocation_id, tool_name, arguments_digest, \
claim_token, status, summary, created_at, updated_at";

fn new_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

impl Store {
    /// Claims the write's identity in one statement (`INSERT … ON CONFLICT DO NOTHING
    /// RETURNING`), committed before the caller runs anything.
    pub async fn ledger_claim(&self, key: LedgerKey) -> Result<Claim> {
        for (what, v) in [
            ("principal", &key.principal_id),
            ("session", &key.session_id),
            ("invocation", &key.invocation_id),
        ] {
            if !valid_identity(v) {
                return Err(StoreError::Corrupt(format!(
                    "ledger {what} id must be 1-255 characters"
                )));
            }
        }
        if !valid_tool(&key.tool_name) {
            return Err(StoreError::Corrupt(
                "ledger tool name must match [A-Za-z0-9_.:-]{1,128}".into(),
            ));
        }
        self.run(move |c| {
            let token = new_token();
            let ts = now();
            let id: Option<i64> = c
                .query_row(
                    "INSERT INTO agent_invocations (principal_id, session_id, invocation_id, tool_name, \
                     arguments_digest, claim_token, status, summary, created_at, updated_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7, ?8, ?8) \
                     ON CONFLICT (principal_id, session_id, invocation_id) DO NOTHING RETURNING id",
                    params![
                        key.principal_id,
                        key.session_id,
                        key.invocation_id,
                        key.tool_name,
                        key.arguments_digest,
                        token,
                        LedgerStatus::Running.summary(),
                        ts
                    ],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(id) = id {
                return Ok(Claim::Acquired {
                    id,
                    claim_token: token,
                });
            }
            let existing = c.query_row(
                &format!(
                    "SELECT {COLUMNS} FROM agent_invocations \
                     WHERE principal_id = ?1 AND session_id = ?2 AND invocation_id = ?3"
                ),
                params![key.principal_id, key.session_id, key.invocation_id],
                record,
            )?;
            Ok(Claim::Existing(existing))
        })
        .await
    }

    /// Finishes a claimed row — only while this token still holds it and the row is open.
    /// Returns whether the row was updated (false: the receipt is not confirmed).
    pub async fn ledger_finish(
        &self,
        id: i64,
        claim_token: &str,
        status: LedgerStatus,
    ) -> Result<bool> {
        let token = claim_token.to_string();
        self.run(move |c| {
            Ok(c.execute(
                "UPDATE agent_invocations SET status = ?1, summary = ?2, updated_at = ?3 \
                 WHERE id = ?4 AND claim_token = ?5 AND status IN ('running', 'unknown')",
                params![status.as_str(), status.summary(), now(), id, token],
            )? == 1)
        })
        .await
    }

    /// The newest unresolved (`running`/`unknown`) row for the same user, session, tool and
    /// arguments.
    pub async fn ledger_unresolved(
        &self,
        principal_id: &str,
        session_id: &str,
        tool_name: &str,
        arguments_digest: &str,
    ) -> Result<Option<LedgerRecord>> {
        let (p, s, t, d) = (
            principal_id.to_string(),
            session_id.to_string(),
            tool_name.to_string(),
            arguments_digest.to_string(),
        );
        self.read(move |c| {
            Ok(c.query_row(
                &format!(
                    "SELECT {COLUMNS} FROM agent_invocations WHERE principal_id = ?1 AND session_id = ?2 \
                     AND tool_name = ?3 AND arguments_digest = ?4 AND status IN ('running', 'unknown') \
                     ORDER BY id DESC LIMIT 1"
                ),
                params![p, s, t, d],
                record,
            )
            .optional()?)
        })
        .await
    }

    /// One row of this user's session (never another user's or session's).
    pub async fn ledger_get(
        &self,
        principal_id: &str,
        session_id: &str,
        invocation_id: &str,
    ) -> Result<Option<LedgerRecord>> {
        let (p, s, i) = (
            principal_id.to_string(),
            session_id.to_string(),
            invocation_id.to_string(),
        );
        self.read(move |c| {
            Ok(c.query_row(
                &format!(
                    "SELECT {COLUMNS} FROM agent_invocations \
                     WHERE principal_id = ?1 AND session_id = ?2 AND invocation_id = ?3"
                ),
                params![p, s, i],
                record,
            )
            .optional()?)
        })
        .await
    }

    /// This user's open (`running`/`unknown`) rows in one session, newest first, at most `limit`:
    /// what a recovered conversation must verify before retrying.
    pub async fn ledger_open_in_session(
        &self,
        principal_id: &str,
        session_id: &str,
        limit: usize,
    ) -> Result<Vec<LedgerRecord>> {
        let (p, s) = (principal_id.to_string(), session_id.to_string());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {COLUMNS} FROM agent_invocations WHERE principal_id = ?1 AND session_id = ?2 \
                 AND status IN ('running', 'unknown') ORDER BY id DESC LIMIT ?3"
            ))?;
            let rows = stmt
                .query_map(params![p, s, limit], record)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
        .await
    }

    /// Marks a row `unknown` after read-back could not confirm it, or `succeeded` after it did
    /// (the conditional update keeps resolved rows untouched).
    pub async fn ledger_resolve(&self, id: i64, status: LedgerStatus) -> Result<bool> {
        self.run(move |c| {
            Ok(c.execute(
                "UPDATE agent_invocations SET status = ?1, summary = ?2, updated_at = ?3 \
                 WHERE id = ?4 AND status IN ('running', 'unknown')",
                params![status.as_str(), status.summary(), now(), id],
            )? == 1)
        })
        .await
    }

    /// Cold start: every `running` row becomes `unknown` under one fresh token, so an executor
    /// from before the restart can never finish it. Nothing is replayed. Returns the rows changed.
    pub async fn ledger_recover_running(&self) -> Result<usize> {
        self.run(move |c| {
            Ok(c.execute(
                "UPDATE agent_invocations SET status = 'unknown', summary = ?1, claim_token = ?2, \
                 updated_at = ?3 WHERE status = 'running'",
                params![LedgerStatus::Unknown.summary(), new_token(), now()],
            )?)
        })
        .await
    }

    /// A deleted session drops only its resolved rows; `running`/`unknown` stay until verified.
    pub async fn ledger_delete_resolved(&self, session_id: &str) -> Result<usize> {
        let s = session_id.to_string();
        self.run(move |c| {
            Ok(c.execute(
                "DELETE FROM agent_invocations WHERE session_id = ?1 \
                 AND status IN ('succeeded', 'failed', 'pending')",
                params![s],
            )?)
        })
        .await
    }

    /// Retention: resolved rows last updated before `cutoff` (RFC 3339); open rows are never
    /// deleted by age.
    pub async fn ledger_cleanup(&self, cutoff: chrono::DateTime<chrono::Utc>) -> Result<usize> {
        let cutoff = cutoff.to_rfc3339();
        self.run(move |c| {
            Ok(c.execute(
                "DELETE FROM agent_invocations WHERE updated_at < ?1 \
                 AND status IN ('succeeded', 'failed', 'pending')",
                params![cutoff],
            )?)
        })
        .await
    }
}
