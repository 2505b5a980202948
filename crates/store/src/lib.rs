//! The main database of moviepilot-agent (`data/agent.db`, SQLite in WAL mode).
//!
//! Public API, one module per table family:
//! - [`Store::open`] / [`Store::open_in`] open the database, creating it or migrating it in place
//!   ([`migrations`]: an ordered list, [`SCHEMA_VERSION`] = its length, the missing steps applied
//!   in one transaction); a database written by a newer binary is refused before anything is
//!   written. `open_with` / `open_in_with` take a [`Durability`]: WAL with `synchronous =
//!   NORMAL` for the product, no fsync for a throwaway data directory (evaluation runs).
//! - [`users`]: [`Store::create_user`], [`Store::ensure_local_user`], [`Store::user_by_name`],
//!   [`Store::user_by_id`], [`Store::list_users`], [`Store::rename_user`],
//!   [`Store::set_password_hash`] (optionally revoking the user's tokens), [`Store::set_admin`],
//!   [`Store::delete_user`].
//! - [`tokens`] (stored hashed by the caller): [`Store::insert_token`], [`Store::token_user`],
//!   [`Store::delete_token`], [`Store::delete_user_tokens`].
//! - [`ledger`]: the invocation ledger — [`Store::ledger_claim`] (one committed statement before
//!   a write runs), [`Store::ledger_finish`] (conditional on the claim token),
//!   [`Store::ledger_unresolved`], [`Store::ledger_get`], [`Store::ledger_recover_running`] (cold
//!   start), retention.
//! - [`chats`]: [`Store::save_chat`] (upsert of the end-of-turn snapshot, with the agent's opaque
//!   [`Chat::session_state`]), [`Store::chat`], [`Store::list_chats`], [`Store::delete_chat`].
//!
//! Invariants: user ids are random UUIDs, never reused and never derived from names, so a rename
//! changes nothing and a re-used name never inherits another user's chats. The store never sees a
//! password or a login token, only their hashes; the one secret it keeps is a MoviePilot user's own
//! sign-in token ([`moviepilot`]), needed to call MoviePilot as that user.
//!
//! Connections: one writer thread runs the writes back to back, short ones before waiting chat
//! snapshots (`writer`); up to four read connections (`query_only`, on the blocking pool) read
//! while it writes, as WAL allows — so a long chat snapshot never holds up a login's token
//! lookup, a ledger read or a chat list, and a login's token write waits at most for the write
//! already running. Nothing runs on the async executor.

pub mod chats;
pub mod ledger;
pub mod mcp_servers;
pub mod migrations;
pub mod moviepilot;
pub mod tokens;
pub mod users;
mod writer;

pub use chats::{Chat, ChatSummary, TurnJournal};
pub use ledger::{Claim, LedgerKey, LedgerRecord, LedgerStatus};
pub use mcp_servers::McpServerRow;
pub use migrations::SCHEMA_VERSION;
pub use moviepilot::{MoviePilotLink, MoviePilotSignIn};
pub use mpa_protocol::Durability;
pub use users::User;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use writer::{Class, Writer};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot create data directory {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "database {path} has schema version {found}, newer than this binary supports ({supported}); refusing to touch it"
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("user name {0:?} is already taken")]
    NameTaken(String),
    /// One MoviePilot user links to one account.
    #[error("MoviePilot user {moviepilot_user} is already linked to {account}")]
    AlreadyLinked {
        moviepilot_user: String,
        account: String,
    },
    #[error("invalid user name {0:?}: use 1-64 letters, digits, '.', '_', '-' or '@'")]
    InvalidName(String),
    #[error("no such user: {0}")]
    NoSuchUser(String),
    #[error("a chat's session state must be a JSON object")]
    SessionStateNotObject,
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("database worker failed: {0}")]
    Worker(String),
}

impl StoreError {
    /// The write failed because the disk (or the file system's quota) is full: SQLite's
    /// `SQLITE_FULL`, or `ENOSPC` from a file operation.
    pub fn is_disk_full(&self) -> bool {
        match self {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => {
                e.code == rusqlite::ErrorCode::DiskFull
            }
            StoreError::Io { source, .. } => source.kind() == std::io::ErrorKind::StorageFull,
            _ => false,
        }
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// Read connections at most; more concurrent reads wait for one.
const READERS: usize = 4;

/// How long a statement waits for another process's lock on the file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A handle to the main database; clones share the writer and the read connections.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    writer: Writer,
    read_permits: Semaphore,
    /// Idle read connections, opened when first needed.
    readers: Mutex<Vec<Connection>>,
}

fn worker_error(e: impl std::fmt::Display) -> StoreError {
    StoreError::Worker(e.to_string())
}

/// A read connection: it cannot write (`query_only`), and it never creates the file.
fn open_reader(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "query_only", "ON")?;
    Ok(conn)
}

pub(crate) fn ts(s: String) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(&s)
        .map(|d| d.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("bad timestamp {s:?}: {e}")))
}

pub(crate) fn now() -> String {
    Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

pub(crate) fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
            || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY)
}

impl Store {
    /// Opens `data_dir/agent.db`, creating the directory (0700) and database (0600) if needed.
    pub fn open_in(data_dir: &Path) -> Result<Store> {
        Store::open_in_with(data_dir, Durability::Durable)
    }

    /// [`Store::open_in`] with a chosen [`Durability`] (`Throwaway` only for a data directory
    /// that is deleted after use).
    pub fn open_in_with(data_dir: &Path, durability: Durability) -> Result<Store> {
        create_private_dir(data_dir)?;
        Store::open_with(&data_dir.join("agent.db"), durability)
    }

    pub fn open(path: &Path) -> Result<Store> {
        Store::open_with(path, Durability::Durable)
    }

    /// [`Store::open`] with a chosen [`Durability`].
    pub fn open_with(path: &Path, durability: Durability) -> Result<Store> {
        let mut conn = Connection::open(path)?;
        restrict_file(path);
        conn.busy_timeout(BUSY_TIMEOUT)?;
        migrations::check_version(&conn, path)?;
        if durability == Durability::Throwaway {
            // Before the switch to WAL, which on a new file is a rollback-journal write.
            conn.pragma_update(None, "synchronous", "OFF")?;
        }
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.pragma_update(None, "synchronous", durability.sqlite_synchronous())?;
        migrations::migrate(&mut conn, path)?;
        for suffix in ["-wal", "-shm"] {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            restrict_file(Path::new(&p));
        }
        Ok(Store {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                writer: Writer::start(conn)?,
                read_permits: Semaphore::new(READERS),
                readers: Mutex::new(Vec::with_capacity(READERS)),
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs the write `f` on the writer, after the write running now and the short writes
    /// queued before it.
    // public for the crate's tests (tests/all.rs); not part of the API
    #[doc(hidden)]
    pub async fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        self.inner.writer.run(Class::Short, f).await
    }

    /// Writes queued and not started yet.
    // public for the crate's tests (tests/all.rs); not part of the API
    #[doc(hidden)]
    pub fn queued_writes(&self) -> usize {
        self.inner.writer.queued()
    }

    /// [`Store::run`] for a whole chat snapshot: short writes queued with it go first.
    pub(crate) async fn run_snapshot<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        self.inner.writer.run(Class::Snapshot, f).await
    }

    /// Queues a short write nobody waits for (housekeeping a read noticed).
    pub(crate) fn run_later(&self, f: impl FnOnce(&mut Connection) -> Result<()> + Send + 'static) {
        self.inner.writer.submit(
            Class::Short,
            Box::new(move |conn| {
                // Housekeeping: a failure leaves things as they were, and the next sight retries.
                let _ = f(conn);
            }),
        );
    }

    /// Runs `f` with a read connection on the blocking pool. It sees every write committed
    /// before it started and never waits for the writer.
    // public for the crate's tests (tests/all.rs); not part of the API
    #[doc(hidden)]
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let _permit = self
            .inner
            .read_permits
            .acquire()
            .await
            .map_err(worker_error)?;
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let idle = inner
                .readers
                .lock()
                .map_err(|_| StoreError::Worker("reader pool lock poisoned".into()))?
                .pop();
            let conn = match idle {
                Some(c) => c,
                None => open_reader(&inner.path)?,
            };
            let out = f(&conn);
            let mut idle = inner
                .readers
                .lock()
                .map_err(|_| StoreError::Worker("reader pool lock poisoned".into()))?;
            // More than READERS only when callers gave up while their reads ran.
            if idle.len() < READERS {
                idle.push(conn);
            }
            out
        })
        .await
        .map_err(worker_error)?
    }
}

fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| StoreError::Io {
            path: dir.to_path_buf(),
            source,
        })
}

fn restrict_file(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    // Best effort: the file may not exist yet (-wal/-shm appear lazily).
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
}
