//! One user's SQLite file: paths and permissions, connection policy, schema, and the write
//! operations (append, compaction flags, end reasons, delete with tombstone, retention).

use crate::error::{HistoryError, Result, io_err};
use crate::{AppendReport, CapturedMessage, CleanupReport, DeleteReport, Provenance, SessionMeta};
use mpa_protocol::{Role, UserId, UserKey};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Relational schema version stamped in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 1;
/// Tool rows are indexed by their first 8192 characters only (spec §4.2). The same expression
/// is used by the view, the triggers and any backfill, so `'integrity-check'` can pass.
pub const TOOL_INDEX_PREFIX_CHARS: usize = 8192;
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
/// Append batch limits (spec §6.1).
pub const MAX_BATCH: usize = 100;
pub const MAX_SESSION_ID_CHARS: usize = 255;
/// Idle connections kept per user; more concurrent callers open short-lived extras.
const POOL_SIZE: usize = 4;
/// Retention deletes sessions in batches so no single transaction holds the lock for long.
const CLEANUP_BATCH: usize = 200;

/// The three FTS indexes and the table name used as their `state_meta` key prefix.
pub const FTS_TABLES: [&str; 3] = ["messages_fts", "messages_fts_trigram", "messages_fts_cjk"];

/// How one FTS index is declared: its table, columns (read from `<table>_src`) and tokenizer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FtsDef {
    pub(crate) table: &'static str,
    pub(crate) cols: &'static [&'static str],
    pub(crate) tokenize: &'static str,
}

/// Tool bodies get their own column in the base index so user/assistant searches can exclude
/// them with a column filter before ranking: tool rows are most of the bytes and postings.
pub(crate) const FTS_DEFS: [FtsDef; 3] = [
    FtsDef {
        table: "messages_fts",
        cols: &["content", "tool_name", "tool_calls", "tool_result"],
        tokenize: "unicode61",
    },
    FtsDef {
        table: "messages_fts_trigram",
        cols: &["content", "tool_name"],
        tokenize: "trigram",
    },
    FtsDef {
        table: "messages_fts_cjk",
        cols: &["content", "tool_name"],
        tokenize: crate::CJK_TOKENIZE,
    },
];

impl FtsDef {
    pub(crate) fn create_sql(&self) -> String {
        fts_sql(self.table, self.cols, self.tokenize)
    }

    pub(crate) fn col_list(&self) -> String {
        self.cols.join(", ")
    }
}

pub fn now_epoch() -> f64 {
    chrono::Utc::now().timestamp_micros() as f64 / 1e6
}

pub(crate) fn to_epoch(ts: &chrono::DateTime<chrono::Utc>) -> f64 {
    ts.timestamp_micros() as f64 / 1e6
}

/// Validate a user key and refuse internal users (spec §2.1: `system` and empty ids have no
/// personal history).
pub fn check_user_key(user: &UserKey) -> Result<()> {
    let k = user.as_str();
    let well_formed = k.len() == 32
        && k.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !well_formed {
        return Err(HistoryError::InvalidUser);
    }
    for internal in ["system", "System", "SYSTEM", ""] {
        if UserKey::for_user(&UserId(internal.to_owned())) == *user {
            return Err(HistoryError::InvalidUser);
        }
    }
    Ok(())
}

pub fn users_root(data_dir: &Path) -> PathBuf {
    data_dir
        .join("agent")
        .join("runtime")
        .join("history")
        .join("users")
}

pub fn db_path(data_dir: &Path, user: &UserKey) -> PathBuf {
    users_root(data_dir).join(user.as_str()).join("state.db")
}

/// Refuse symlinks; `Ok(false)` when the path does not exist.
fn check_not_symlink(path: &Path, want_dir: bool) -> Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(meta) => {
            let ok = if want_dir {
                meta.file_type().is_dir()
            } else {
                meta.file_type().is_file()
            };
            if meta.file_type().is_symlink() || !ok {
                return Err(HistoryError::UnsafePath(path.to_path_buf()));
            }
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err(path)(e)),
    }
}

fn chmod(path: &Path, mode: u32) -> Result<()> {
    // By path, never through a new fd: closing an fd would drop SQLite's POSIX locks.
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io_err(path))
}

/// Create the user directory (0700) and the database file (0600) if missing.
fn prepare_files(data_dir: &Path, user: &UserKey) -> Result<PathBuf> {
    let users = users_root(data_dir);
    let user_dir = users.join(user.as_str());
    let history = users
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| users.clone());
    for dir in [&history, &users, &user_dir] {
        if !check_not_symlink(dir, true)? {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_err(dir))?;
            check_not_symlink(dir, true)?;
        }
        chmod(dir, 0o700)?;
    }
    let db = user_dir.join("state.db");
    if !check_not_symlink(&db, false)? {
        // O_EXCL refuses a symlink planted between the check and the create.
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&db)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                check_not_symlink(&db, false)?;
            }
            Err(e) => return Err(io_err(&db)(e)),
        }
    }
    for side in ["state.db-wal", "state.db-shm"] {
        let p = user_dir.join(side);
        if fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(HistoryError::UnsafePath(p));
        }
    }
    Ok(db)
}

fn tighten_sidecars(db: &Path) -> Result<()> {
    chmod(db, 0o600)?;
    for suffix in ["-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        let p = PathBuf::from(p);
        if check_not_symlink(&p, false)? {
            chmod(&p, 0o600)?;
        }
    }
    Ok(())
}

fn view_sql() -> String {
    let n = TOOL_INDEX_PREFIX_CHARS;
    format!(
        "CREATE VIEW messages_fts_src AS SELECT id, \
           CASE WHEN role = 'tool' THEN '' ELSE content END AS content, \
           tool_name, tool_calls, \
           CASE WHEN role = 'tool' THEN substr(content, 1, {n}) ELSE '' END AS tool_result \
           FROM messages;\n\
         CREATE VIEW messages_fts_trigram_src AS SELECT m.id AS id, m.content AS content, \
           m.tool_name AS tool_name FROM messages m JOIN sessions s ON s.id = m.session_id \
           WHERE m.role <> 'tool' AND s.source NOT IN ('cron', 'subagent');\n\
         CREATE VIEW messages_fts_cjk_src AS SELECT m.id AS id, m.content AS content, \
           m.tool_name AS tool_name FROM messages m JOIN sessions s ON s.id = m.session_id \
           WHERE m.role <> 'tool' AND s.source NOT IN ('cron', 'subagent');\n"
    )
}

/// Id-gated sync triggers (spec §4.3): a row is in the index iff `id <= P` or `id > H`; with no
/// backfill pending both markers are absent and the gate is always true.
fn fts_sql(table: &str, cols: &[&str], tokenize: &str) -> String {
    let col_list = cols.join(", ");
    let gate = |who: &str| {
        format!(
            "{who}.id <= COALESCE((SELECT CAST(value AS INTEGER) FROM state_meta WHERE key = '{table}:progress'), -1) \
             OR {who}.id > COALESCE((SELECT CAST(value AS INTEGER) FROM state_meta WHERE key = '{table}:high'), -1)"
        )
    };
    format!(
        "CREATE VIRTUAL TABLE {table} USING fts5({col_list}, content='{table}_src', content_rowid='id', tokenize='{tokenize}');\n\
         CREATE TRIGGER {table}_ai AFTER INSERT ON messages WHEN {gi} BEGIN \
           INSERT INTO {table}(rowid, {col_list}) SELECT id, {col_list} FROM {table}_src WHERE id = new.id; END;\n\
         CREATE TRIGGER {table}_bd BEFORE DELETE ON messages WHEN {gd} BEGIN \
           INSERT INTO {table}({table}, rowid, {col_list}) SELECT 'delete', id, {col_list} FROM {table}_src WHERE id = old.id; END;\n",
        gi = gate("new"),
        gd = gate("old"),
    )
}

pub(crate) fn schema_sql() -> String {
    let mut s = String::from(
        "CREATE TABLE sessions (
           id TEXT PRIMARY KEY,
           source TEXT NOT NULL DEFAULT 'chat',
           title TEXT NOT NULL DEFAULT '',
           model TEXT NOT NULL DEFAULT '',
           started_at REAL NOT NULL,
           last_active REAL NOT NULL,
           parent_session_id TEXT NOT NULL DEFAULT '',
           end_reason TEXT NOT NULL DEFAULT '',
           message_count INTEGER NOT NULL DEFAULT 0
         );
         CREATE INDEX sessions_recent ON sessions(last_active DESC);
         CREATE INDEX sessions_title ON sessions(title COLLATE NOCASE, started_at DESC);
         CREATE INDEX sessions_parent ON sessions(parent_session_id);
         CREATE TABLE messages (
           id INTEGER PRIMARY KEY AUTOINCREMENT,
           session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
           message_uid TEXT NOT NULL,
           role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
           content TEXT NOT NULL,
           tool_call_id TEXT NOT NULL DEFAULT '',
           tool_name TEXT NOT NULL DEFAULT '',
           tool_calls TEXT NOT NULL DEFAULT '',
           timestamp REAL NOT NULL,
           provenance TEXT NOT NULL DEFAULT 'observed' CHECK (provenance IN ('observed', 'legacy_snapshot')),
           active INTEGER NOT NULL DEFAULT 1,
           compacted INTEGER NOT NULL DEFAULT 0,
           UNIQUE (session_id, message_uid)
         );
         CREATE INDEX messages_session ON messages(session_id, id);
         -- Only compacted/rewound rows: keeps status counts off a full scan of the bodies.
         CREATE INDEX messages_inactive ON messages(compacted) WHERE active = 0;
         CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE deleted_sessions (id TEXT PRIMARY KEY, deleted_at REAL NOT NULL);
         CREATE TRIGGER messages_count_ai AFTER INSERT ON messages BEGIN
           UPDATE sessions SET message_count = message_count + 1,
             last_active = MAX(last_active, new.timestamp) WHERE id = new.session_id;
         END;
         CREATE TRIGGER messages_count_ad AFTER DELETE ON messages BEGIN
           UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id;
         END;
",
    );
    s.push_str(&view_sql());
    for def in FTS_DEFS {
        s.push_str(&def.create_sql());
    }
    s.push_str(&format!(
        "INSERT INTO state_meta (key, value) VALUES ('{}', '{}');\n",
        crate::backfill::TOKENIZER_VERSION_KEY,
        crate::tokenizer::TOKENIZER_VERSION
    ));
    s
}

/// Open one connection with the policy of spec §2.3. Reads `user_version` before any PRAGMA that
/// writes, so a newer database is refused untouched.
fn open_connection(db: &Path, busy: Duration) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(db, flags)?;
    crate::tokenizer::register_cjk_tokenizer(&conn)?;
    conn.busy_timeout(busy)?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(HistoryError::SchemaTooNew {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(mode, "history database is not in WAL mode");
    }
    conn.execute_batch(
        "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; \
         PRAGMA journal_size_limit = 67108864; PRAGMA temp_store = MEMORY;",
    )?;
    if version < SCHEMA_VERSION {
        migrate(&conn, version)?;
    }
    Ok(conn)
}

fn migrate(conn: &Connection, from: i64) -> Result<()> {
    if from == 0 {
        let sql = format!(
            "BEGIN IMMEDIATE; {} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;",
            schema_sql()
        );
        // Another process may have migrated between our version read and BEGIN IMMEDIATE.
        let again: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if again == 0
            && let Err(e) = conn.execute_batch(&sql)
        {
            let _ = conn.execute_batch("ROLLBACK");
            let now: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if now != SCHEMA_VERSION {
                return Err(e.into());
            }
        }
    }
    Ok(())
}

/// A lazily opened per-user store with a small connection pool.
pub(crate) struct UserStore {
    pub(crate) db: PathBuf,
    busy: Duration,
    deadline: Duration,
    pool: Mutex<Vec<Connection>>,
    /// Serialises writers of this process so concurrent appends never spin on SQLITE_BUSY;
    /// other processes are handled by `busy_timeout`.
    write_lock: Mutex<()>,
    maintenance_due: AtomicBool,
    /// After a failed backfill round, no new task before this instant (a broken file would
    /// otherwise start, fail and log once per append or search).
    backfill_retry_at: Mutex<Option<Instant>>,
}

impl UserStore {
    pub(crate) fn open(data_dir: &Path, user: &UserKey, deadline: Duration) -> Result<Self> {
        check_user_key(user)?;
        let db = prepare_files(data_dir, user)?;
        let busy = deadline.max(Duration::from_secs(3));
        let mut conn = open_connection(&db, busy)?;
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
        Ok(Self {
            db,
            busy,
            deadline,
            pool: Mutex::new(vec![conn]),
            write_lock: Mutex::new(()),
            maintenance_due: AtomicBool::new(building),
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
        !backing_off && self.maintenance_due.load(Ordering::Acquire)
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
            None => open_connection(&self.db, self.busy),
        }
    }

    fn give_back(&self, conn: Connection) {
        if let Ok(mut p) = self.pool.lock()
            && p.len() < POOL_SIZE
        {
            p.push(conn);
        }
    }

    /// Run a read in one snapshot under the query deadline (a VM-step progress handler).
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.read_with_deadline(self.deadline, f)
    }

    pub(crate) fn read_with_deadline<T>(
        &self,
        deadline: Duration,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> Result<T> {
        let mut conn = self.take()?;
        let until = Instant::now() + deadline;
        conn.progress_handler(100, Some(move || Instant::now() >= until))?;
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
        out
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

/// The roles evidence may have (spec §6.1): user, assistant and tool.
pub(crate) fn evidence_role(role: &str) -> Option<Role> {
    [Role::User, Role::Assistant, Role::Tool]
        .into_iter()
        .find(|r| r.as_str() == role)
}

/// Validation that happens before any storage access (spec §6.1).
pub(crate) fn validate_append(session: &SessionMeta, msgs: &[CapturedMessage]) -> Result<()> {
    if msgs.len() > MAX_BATCH {
        return Err(HistoryError::InvalidInput(format!(
            "batch of {} messages exceeds the limit of {MAX_BATCH}",
            msgs.len()
        )));
    }
    validate_session_id(&session.session_id)?;
    if let Some(p) = &session.parent_session_id
        && p.chars().count() > MAX_SESSION_ID_CHARS
    {
        return Err(HistoryError::InvalidInput(
            "parent_session_id is too long".into(),
        ));
    }
    for (i, m) in msgs.iter().enumerate() {
        if m.message_uid.trim().is_empty() || m.message_uid.chars().count() > MAX_SESSION_ID_CHARS {
            return Err(HistoryError::InvalidInput(format!(
                "message {i}: message_uid must be 1..={MAX_SESSION_ID_CHARS} characters"
            )));
        }
        if !matches!(m.role, Role::User | Role::Assistant | Role::Tool) {
            return Err(HistoryError::InvalidInput(format!(
                "message {i}: role {} is not user, assistant or tool",
                m.role.as_str()
            )));
        }
    }
    Ok(())
}

pub(crate) fn validate_session_id(id: &str) -> Result<()> {
    if id.trim().is_empty() || id.chars().count() > MAX_SESSION_ID_CHARS {
        return Err(HistoryError::InvalidInput(format!(
            "session id must be 1..={MAX_SESSION_ID_CHARS} characters"
        )));
    }
    Ok(())
}

/// A message after redaction, ready to insert.
pub(crate) struct PreparedMessage {
    uid: String,
    role: &'static str,
    content: String,
    tool_name: String,
    tool_call_id: String,
    tool_calls: String,
    ts: Option<f64>,
    provenance: Provenance,
}

/// Redaction runs outside the write lock: it is the only CPU-heavy part of an append.
pub(crate) fn prepare(msgs: Vec<CapturedMessage>) -> Vec<PreparedMessage> {
    msgs.into_iter()
        .map(|m| {
            let tool_calls = match &m.tool_calls {
                None | Some(serde_json::Value::Null) => String::new(),
                Some(v) => crate::redact::redact(&v.to_string()).into_owned(),
            };
            let content = match crate::redact::redact(&m.content) {
                std::borrow::Cow::Borrowed(_) => m.content,
                std::borrow::Cow::Owned(s) => s,
            };
            PreparedMessage {
                uid: m.message_uid,
                role: m.role.as_str(),
                content,
                tool_name: m.tool_name.unwrap_or_default(),
                tool_call_id: m.tool_call_id.unwrap_or_default(),
                tool_calls,
                ts: m.ts.as_ref().map(to_epoch),
                provenance: m.provenance,
            }
        })
        .collect()
}

pub(crate) fn append(
    conn: &Connection,
    session: &SessionMeta,
    msgs: &[PreparedMessage],
) -> Result<AppendReport> {
    let sid = session.session_id.as_str();
    let tombstoned: bool = conn
        .prepare("SELECT 1 FROM deleted_sessions WHERE id = ?1")?
        .exists([sid])?;
    if tombstoned {
        return Ok(AppendReport {
            inserted: 0,
            duplicates: 0,
            tombstoned: true,
        });
    }
    let now = now_epoch();
    let existing_last: Option<f64> = conn
        .prepare("SELECT last_active FROM sessions WHERE id = ?1")?
        .query_row([sid], |r| r.get(0))
        .optional()?;
    let min_ts = msgs
        .iter()
        .filter_map(|m| m.ts)
        .fold(None, |a: Option<f64>, t| Some(a.map_or(t, |a| a.min(t))));
    let max_ts = msgs
        .iter()
        .filter_map(|m| m.ts)
        .fold(None, |a: Option<f64>, t| Some(a.map_or(t, |a| a.max(t))));
    let started = session
        .started_at
        .as_ref()
        .map(to_epoch)
        .or(min_ts)
        .unwrap_or(now);
    let source = if session.source.trim().is_empty() {
        "chat"
    } else {
        session.source.trim()
    };
    let title = session
        .title
        .as_deref()
        .map(|t| crate::redact::redact(t).into_owned())
        .unwrap_or_default();
    conn.prepare(
        "INSERT INTO sessions (id, source, title, model, started_at, last_active, parent_session_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)
         ON CONFLICT(id) DO UPDATE SET
           title = CASE WHEN excluded.title <> '' THEN excluded.title ELSE title END,
           model = CASE WHEN excluded.model <> '' THEN excluded.model ELSE model END,
           parent_session_id = CASE WHEN parent_session_id = '' THEN excluded.parent_session_id
                                    ELSE parent_session_id END",
    )?
    .execute(params![
        sid,
        source,
        title,
        session.model.as_deref().unwrap_or(""),
        started,
        session.parent_session_id.as_deref().unwrap_or("")
    ])?;
    // Legacy rows without a timestamp must never look as if they happened at import time.
    let legacy_ts = existing_last.or(max_ts).unwrap_or(started);
    let mut ins = conn.prepare(
        "INSERT INTO messages (session_id, message_uid, role, content, tool_call_id, tool_name,
           tool_calls, timestamp, provenance)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT(session_id, message_uid) DO NOTHING",
    )?;
    let mut inserted = 0;
    for m in msgs {
        let ts = m.ts.unwrap_or(match m.provenance {
            Provenance::Observed => now,
            Provenance::LegacySnapshot => legacy_ts,
        });
        inserted += ins.execute(params![
            sid,
            m.uid,
            m.role,
            m.content,
            m.tool_call_id,
            m.tool_name,
            m.tool_calls,
            ts,
            m.provenance.as_str()
        ])?;
    }
    Ok(AppendReport {
        inserted,
        duplicates: msgs.len() - inserted,
        tombstoned: false,
    })
}

/// Mark rows compacted (`active=0, compacted=1`). Only currently active rows change: the
/// carried tail is never re-marked and rewound rows stay rewound (Hermes #86366).
pub(crate) fn set_flags(
    conn: &Connection,
    sid: &str,
    uids: &[String],
    compacted: bool,
) -> Result<usize> {
    let mut st = conn.prepare(
        "UPDATE messages SET active = 0, compacted = ?3 WHERE session_id = ?1 AND message_uid = ?2 AND active = 1",
    )?;
    let mut n = 0;
    for uid in uids {
        n += st.execute(params![sid, uid, compacted as i64])?;
    }
    Ok(n)
}

/// Record an end reason. The first reason wins, except that a reason meaning "left live
/// context" may replace one that does not, so late compression/reset reasons still count.
pub(crate) fn end_session(conn: &Connection, sid: &str, reason: &str) -> Result<()> {
    let left = LEFT_CONTEXT_REASONS.contains(&reason);
    let list = LEFT_CONTEXT_REASONS.map(|r| format!("'{r}'")).join(",");
    let sql = format!(
        "UPDATE sessions SET end_reason = ?2 WHERE id = ?1 AND (end_reason = '' OR (?3 AND end_reason NOT IN ({list})))"
    );
    conn.execute(&sql, params![sid, reason, left])?;
    Ok(())
}

/// Tombstone, then messages (their FTS rows go through the triggers while the session row still
/// exists for the joined views), then the session — one transaction.
pub(crate) fn delete_session(conn: &Connection, sid: &str) -> Result<DeleteReport> {
    conn.execute(
        "INSERT OR IGNORE INTO deleted_sessions (id, deleted_at) VALUES (?1, ?2)",
        params![sid, now_epoch()],
    )?;
    let messages_deleted = conn.execute("DELETE FROM messages WHERE session_id = ?1", [sid])?;
    let existed = conn.execute("DELETE FROM sessions WHERE id = ?1", [sid])? > 0;
    Ok(DeleteReport {
        session_id: sid.to_owned(),
        session_existed: existed,
        messages_deleted,
    })
}

/// Expire up to one batch of sessions whose own `last_active` is before `cutoff`.
pub(crate) fn expire_batch(conn: &Connection, cutoff: f64) -> Result<(usize, usize)> {
    let ids: Vec<String> = conn
        .prepare("SELECT id FROM sessions WHERE last_active < ?1 ORDER BY last_active LIMIT ?2")?
        .query_map(params![cutoff, CLEANUP_BATCH as i64], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut msgs = 0;
    for id in &ids {
        msgs += delete_session(conn, id)?.messages_deleted;
    }
    Ok((ids.len(), msgs))
}

pub(crate) fn cleanup(store: &UserStore, older_than_days: u32) -> Result<CleanupReport> {
    if older_than_days == 0 {
        return Ok(CleanupReport {
            enabled: false,
            cutoff: None,
            sessions_expired: 0,
            messages_deleted: 0,
        });
    }
    let cutoff = now_epoch() - f64::from(older_than_days) * 86400.0;
    let mut report = CleanupReport {
        enabled: true,
        cutoff: Some(cutoff),
        sessions_expired: 0,
        messages_deleted: 0,
    };
    loop {
        let (s, m) = store.write(|c| expire_batch(c, cutoff))?;
        report.sessions_expired += s;
        report.messages_deleted += m;
        if s < CLEANUP_BATCH {
            break;
        }
    }
    Ok(report)
}

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
