//! The schema, as an ordered list of migrations. Migration `n` (1-based) takes a database from
//! `PRAGMA user_version = n - 1` to `n`; a released migration is never edited, only followed.

use crate::{Result, StoreError};
use rusqlite::Connection;
use std::path::Path;

/// The schema of the first release: users, login tokens (hashed) and chat snapshots.
const MIGRATION_1: &str = "
CREATE TABLE users (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    is_admin INTEGER NOT NULL DEFAULT 0,
    password_hash TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE auth_tokens (
    token_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX auth_tokens_user ON auth_tokens(user_id);
CREATE TABLE chats (
    session_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    agent_messages TEXT NOT NULL DEFAULT '[]',
    display_messages TEXT NOT NULL DEFAULT '[]',
    message_count INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX chats_user_updated ON chats(user_id, updated_at);
CREATE INDEX chats_channel_updated ON chats(channel, updated_at);
";

/// The agent's per-chat state that must survive an actor reload (an opaque JSON object).
const MIGRATION_2: &str = "
ALTER TABLE chats ADD COLUMN session_state TEXT NOT NULL DEFAULT '{}';
";

/// The invocation ledger (spec runtime.md §6.1) and the MoviePilot identity of each account: the
/// linked (or, when signing in with MoviePilot, adopted) MoviePilot user, and that user's own
/// token from signing in (the file is 0600; the token is never logged).
const MIGRATION_3: &str = "
CREATE TABLE agent_invocations (
    id INTEGER PRIMARY KEY,
    principal_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    invocation_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    arguments_digest TEXT NOT NULL,
    claim_token TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'pending', 'unknown')),
    summary TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX agent_invocations_identity
    ON agent_invocations(principal_id, session_id, invocation_id);
CREATE INDEX agent_invocations_status ON agent_invocations(status, updated_at, id);
ALTER TABLE users ADD COLUMN moviepilot_user_id TEXT;
ALTER TABLE users ADD COLUMN moviepilot_user_name TEXT;
ALTER TABLE users ADD COLUMN moviepilot_token TEXT;
CREATE UNIQUE INDEX users_moviepilot_user ON users(moviepilot_user_id)
    WHERE moviepilot_user_id IS NOT NULL;
";

/// Version 4: the running turn's journal beside the chat snapshot, in a table of its own (SQLite
/// rewrites a whole row to update one column, and a chat row holds the whole conversation). A
/// turn saves only its own messages after each step (`journal`, JSON `{"messages": [...],
/// "display": [...]}`) on top of the `base` messages of the last full snapshot, so a step costs
/// what the turn wrote, not what the chat holds. A full snapshot removes it; reading a chat
/// merges it.
const MIGRATION_4: &str = "
CREATE TABLE chat_journals (
    session_id TEXT PRIMARY KEY REFERENCES chats(session_id) ON DELETE CASCADE,
    base INTEGER NOT NULL,
    journal TEXT NOT NULL,
    session_state TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
";

/// Version 5: how the chat's last turn ended (a `TurnStatus` name: completed, blocked, waiting,
/// unknown, partial, …), for the session list; NULL while a turn runs or before any ended.
const MIGRATION_5: &str = "
ALTER TABLE chats ADD COLUMN turn_status TEXT;
";

/// Version 6: external MCP servers an admin configured (issue 33): the configuration as JSON
/// (its env and header values may be credentials: the file is 0600 and they are never shown
/// back) and the tools the server last listed, so their tools are offered before the server is
/// started (servers start on first use).
const MIGRATION_6: &str = "
CREATE TABLE mcp_servers (
    name TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    tools TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
";

/// Every migration in order; entry `n - 1` takes a database to version `n`. Public so tests can
/// build a database exactly as an older release left it.
pub const MIGRATIONS: &[&str] = &[
    MIGRATION_1,
    MIGRATION_2,
    MIGRATION_3,
    MIGRATION_4,
    MIGRATION_5,
    MIGRATION_6,
];

/// Schema version this binary writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The database's schema version, refusing one newer than [`SCHEMA_VERSION`]. Reads only: it runs
/// before anything that writes (switching to WAL rewrites the file header), so a database from a
/// newer binary is left byte-for-byte untouched.
pub(crate) fn check_version(conn: &Connection, path: &Path) -> Result<i64> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(version)
}

/// Applies the missing migrations in one transaction together with the version bump, so the
/// database is either at its old version or at [`SCHEMA_VERSION`], never in between (and a new
/// database costs one commit, not one per step). The version is read again inside the write
/// lock, so two processes opening an old database at once apply each migration exactly once.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    if check_version(conn, path)? == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let version = check_version(&tx, path)?;
    let Some(missing) = usize::try_from(version)
        .ok()
        .and_then(|v| MIGRATIONS.get(v..))
        .filter(|m| !m.is_empty())
    else {
        return Ok(());
    };
    for sql in missing {
        tx.execute_batch(sql)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(())
}
