//! The main database of moviepilot-agent (`data/agent.db`, SQLite in WAL mode).
//!
//! Public API:
//! - [`Store::open`] opens (creating and migrating) the database; a database written by a newer
//!   binary is refused, never written.
//! - Users: [`Store::create_user`], [`Store::ensure_local_user`], [`Store::user_by_name`],
//!   [`Store::user_by_id`], [`Store::list_users`], [`Store::rename_user`], [`Store::set_password_hash`].
//! - Login tokens (stored hashed by the caller): [`Store::insert_token`], [`Store::token_user`],
//!   [`Store::delete_token`].
//! - Chats: [`Store::save_chat`] (upsert of the end-of-turn snapshot), [`Store::chat`],
//!   [`Store::list_chats`], [`Store::delete_chat`].
//!
//! Invariants: user ids are random UUIDs, never reused and never derived from names, so a rename
//! changes nothing and a re-used name never inherits another user's chats. Every call runs on the
//! blocking pool behind a semaphore, never on the async executor.

use chrono::{DateTime, Utc};
use mpa_protocol::{Message, UserId};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// Schema version this binary writes.
pub const SCHEMA_VERSION: i64 = 1;

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
    #[error("invalid user name {0:?}: use 1-64 letters, digits, '.', '_', '-' or '@'")]
    InvalidName(String),
    #[error("no such user: {0}")]
    NoSuchUser(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("database worker failed: {0}")]
    Worker(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: UserId,
    pub name: String,
    pub is_admin: bool,
    #[serde(skip)]
    pub password_hash: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A chat session as persisted at the end of every turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chat {
    pub session_id: String,
    pub user_id: UserId,
    pub channel: String,
    pub title: String,
    /// The agent transcript (tool calls, results with outcomes, plan metadata).
    pub agent_messages: Vec<Message>,
    /// What a front end shows.
    pub display_messages: serde_json::Value,
    pub message_count: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Chat {
    /// The list row of this chat (no transcript).
    pub fn summary(&self) -> ChatSummary {
        ChatSummary {
            session_id: self.session_id.clone(),
            user_id: self.user_id.clone(),
            channel: self.channel.clone(),
            title: self.title.clone(),
            message_count: self.message_count,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A row of the session list (no transcript).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatSummary {
    pub session_id: String,
    pub user_id: UserId,
    pub channel: String,
    pub title: String,
    pub message_count: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    conn: Mutex<Connection>,
    permits: Semaphore,
}

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

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= 64
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
}

fn ts(s: String) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(&s)
        .map(|d| d.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("bad timestamp {s:?}: {e}")))
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

impl Store {
    /// Opens `data_dir/agent.db`, creating the directory (0700) and database (0600) if needed.
    pub fn open_in(data_dir: &Path) -> Result<Store> {
        create_private_dir(data_dir)?;
        Store::open(&data_dir.join("agent.db"))
    }

    pub fn open(path: &Path) -> Result<Store> {
        let conn = Connection::open(path)?;
        restrict_file(path);
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // The version check comes before anything that writes (switching to WAL rewrites the
        // file header), so a database from a newer binary is left byte-for-byte untouched.
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        if version < 1 {
            conn.execute_batch(&format!(
                "BEGIN; {MIGRATION_1} PRAGMA user_version = 1; COMMIT;"
            ))?;
        }
        for suffix in ["-wal", "-shm"] {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            restrict_file(Path::new(&p));
        }
        Ok(Store {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                conn: Mutex::new(conn),
                permits: Semaphore::new(4),
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` with the connection on the blocking pool.
    async fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let _permit = self
            .inner
            .permits
            .acquire()
            .await
            .map_err(|e| StoreError::Worker(e.to_string()))?;
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let mut conn = inner
                .conn
                .lock()
                .map_err(|_| StoreError::Worker("connection lock poisoned".into()))?;
            f(&mut conn)
        })
        .await
        .map_err(|e| StoreError::Worker(e.to_string()))?
    }

    // ---- users ----

    pub async fn create_user(
        &self,
        name: &str,
        is_admin: bool,
        password_hash: Option<String>,
    ) -> Result<User> {
        if !valid_name(name) {
            return Err(StoreError::InvalidName(name.to_string()));
        }
        let name = name.to_string();
        self.run(move |c| insert_user(c, &name, is_admin, password_hash))
            .await
    }

    /// Returns the user named `name`, creating a non-admin local user on first use. Local CLI use is
    /// trusted: whoever can run the binary owns the data directory.
    pub async fn ensure_local_user(&self, name: &str) -> Result<User> {
        if !valid_name(name) {
            return Err(StoreError::InvalidName(name.to_string()));
        }
        let name = name.to_string();
        self.run(move |c| {
            if let Some(u) = query_user(c, "name", &name)? {
                return Ok(u);
            }
            insert_user(c, &name, false, None)
        })
        .await
    }

    pub async fn user_by_name(&self, name: &str) -> Result<Option<User>> {
        let name = name.to_string();
        self.run(move |c| query_user(c, "name", &name)).await
    }

    pub async fn user_by_id(&self, id: &UserId) -> Result<Option<User>> {
        let id = id.0.clone();
        self.run(move |c| query_user(c, "id", &id)).await
    }

    pub async fn list_users(&self) -> Result<Vec<User>> {
        self.run(|c| {
            let mut stmt = c.prepare(
                "SELECT id, name, is_admin, password_hash, created_at FROM users ORDER BY name",
            )?;
            let rows = stmt.query_map([], user_row)?;
            let mut out = Vec::new();
            for r in rows {
                out.push(finish_user(r?)?);
            }
            Ok(out)
        })
        .await
    }

    pub async fn rename_user(&self, id: &UserId, new_name: &str) -> Result<()> {
        if !valid_name(new_name) {
            return Err(StoreError::InvalidName(new_name.to_string()));
        }
        let (id, new_name) = (id.0.clone(), new_name.to_string());
        self.run(move |c| {
            match c.execute(
                "UPDATE users SET name = ?1 WHERE id = ?2",
                params![new_name, id],
            ) {
                Ok(0) => Err(StoreError::NoSuchUser(id)),
                Ok(_) => Ok(()),
                Err(e) if is_unique_violation(&e) => Err(StoreError::NameTaken(new_name)),
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    pub async fn set_password_hash(&self, id: &UserId, hash: String) -> Result<()> {
        let id = id.0.clone();
        self.run(move |c| {
            let n = c.execute(
                "UPDATE users SET password_hash = ?1 WHERE id = ?2",
                params![hash, id],
            )?;
            if n == 0 {
                return Err(StoreError::NoSuchUser(id));
            }
            Ok(())
        })
        .await
    }

    pub async fn set_admin(&self, id: &UserId, is_admin: bool) -> Result<()> {
        let id = id.0.clone();
        self.run(move |c| {
            let n = c.execute(
                "UPDATE users SET is_admin = ?1 WHERE id = ?2",
                params![is_admin, id],
            )?;
            if n == 0 {
                return Err(StoreError::NoSuchUser(id));
            }
            Ok(())
        })
        .await
    }

    // ---- login tokens ----

    pub async fn insert_token(
        &self,
        token_hash: String,
        user: &UserId,
        expires_at: DateTime<Utc>,
    ) -> Result<()> {
        let user = user.0.clone();
        self.run(move |c| {
            c.execute(
                "INSERT INTO auth_tokens (token_hash, user_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
                params![token_hash, user, now(), expires_at.to_rfc3339()],
            )?;
            Ok(())
        })
        .await
    }

    /// The user owning an unexpired token (expired tokens are deleted on sight).
    pub async fn token_user(&self, token_hash: String) -> Result<Option<User>> {
        self.run(move |c| {
            let row: Option<(String, String)> = c
                .query_row(
                    "SELECT user_id, expires_at FROM auth_tokens WHERE token_hash = ?1",
                    params![token_hash],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let Some((user_id, expires)) = row else {
                return Ok(None);
            };
            if ts(expires)? <= Utc::now() {
                c.execute(
                    "DELETE FROM auth_tokens WHERE token_hash = ?1",
                    params![token_hash],
                )?;
                return Ok(None);
            }
            query_user(c, "id", &user_id)
        })
        .await
    }

    pub async fn delete_token(&self, token_hash: String) -> Result<bool> {
        self.run(move |c| {
            Ok(c.execute(
                "DELETE FROM auth_tokens WHERE token_hash = ?1",
                params![token_hash],
            )? > 0)
        })
        .await
    }

    // ---- chats ----

    /// Inserts or replaces the chat snapshot. `created_at` of an existing chat is kept, and so is
    /// its owner: continuing someone else's chat (an admin) never changes `user_id`.
    pub async fn save_chat(&self, chat: Chat) -> Result<()> {
        let agent = serde_json::to_string(&chat.agent_messages)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let display = serde_json::to_string(&chat.display_messages)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        self.run(move |c| {
            c.execute(
                "INSERT INTO chats (session_id, user_id, channel, title, agent_messages, display_messages,
                                    message_count, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT(session_id) DO UPDATE SET
                    title = excluded.title, agent_messages = excluded.agent_messages,
                    display_messages = excluded.display_messages, message_count = excluded.message_count,
                    updated_at = excluded.updated_at",
                params![
                    chat.session_id,
                    chat.user_id.0,
                    chat.channel,
                    chat.title,
                    agent,
                    display,
                    chat.message_count,
                    chat.created_at.to_rfc3339(),
                    chat.updated_at.to_rfc3339()
                ],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn chat(&self, session_id: &str) -> Result<Option<Chat>> {
        let sid = session_id.to_string();
        self.run(move |c| {
            let row = c
                .query_row(
                    "SELECT session_id, user_id, channel, title, agent_messages, display_messages,
                            message_count, created_at, updated_at FROM chats WHERE session_id = ?1",
                    params![sid],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, String>(4)?,
                            r.get::<_, String>(5)?,
                            r.get::<_, i64>(6)?,
                            r.get::<_, String>(7)?,
                            r.get::<_, String>(8)?,
                        ))
                    },
                )
                .optional()?;
            let Some((
                session_id,
                user_id,
                channel,
                title,
                agent,
                display,
                count,
                created,
                updated,
            )) = row
            else {
                return Ok(None);
            };
            Ok(Some(Chat {
                session_id,
                user_id: UserId(user_id),
                channel,
                title,
                agent_messages: serde_json::from_str(&agent)
                    .map_err(|e| StoreError::Corrupt(format!("agent_messages: {e}")))?,
                display_messages: serde_json::from_str(&display)
                    .map_err(|e| StoreError::Corrupt(format!("display_messages: {e}")))?,
                message_count: count,
                created_at: ts(created)?,
                updated_at: ts(updated)?,
            }))
        })
        .await
    }

    /// Chats of one user (or of everyone when `user` is `None`), newest first; `page` starts at 1.
    pub async fn list_chats(
        &self,
        user: Option<&UserId>,
        page: u32,
        count: u32,
    ) -> Result<Vec<ChatSummary>> {
        let user = user.map(|u| u.0.clone());
        let limit = i64::from(count.clamp(1, 200));
        let offset = i64::from(page.max(1) - 1) * limit;
        self.run(move |c| {
            let mut stmt = c.prepare(
                "SELECT session_id, user_id, channel, title, message_count, created_at, updated_at
                 FROM chats WHERE (?1 IS NULL OR user_id = ?1)
                 ORDER BY updated_at DESC, session_id LIMIT ?2 OFFSET ?3",
            )?;
            let rows = stmt.query_map(params![user, limit, offset], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                ))
            })?;
            let mut out = Vec::new();
            for r in rows {
                let (session_id, user_id, channel, title, message_count, created, updated) = r?;
                out.push(ChatSummary {
                    session_id,
                    user_id: UserId(user_id),
                    channel,
                    title,
                    message_count,
                    created_at: ts(created)?,
                    updated_at: ts(updated)?,
                });
            }
            Ok(out)
        })
        .await
    }

    pub async fn delete_chat(&self, session_id: &str) -> Result<bool> {
        let sid = session_id.to_string();
        self.run(move |c| {
            Ok(c.execute("DELETE FROM chats WHERE session_id = ?1", params![sid])? > 0)
        })
        .await
    }
}

type UserRow = (String, String, bool, Option<String>, String);

fn user_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<UserRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

fn finish_user((id, name, is_admin, password_hash, created): UserRow) -> Result<User> {
    Ok(User {
        id: UserId(id),
        name,
        is_admin,
        password_hash,
        created_at: ts(created)?,
    })
}

fn query_user(c: &Connection, column: &str, value: &str) -> Result<Option<User>> {
    // `column` is one of two literals chosen in this file, never caller input.
    let sql = match column {
        "id" => "SELECT id, name, is_admin, password_hash, created_at FROM users WHERE id = ?1",
        _ => "SELECT id, name, is_admin, password_hash, created_at FROM users WHERE name = ?1",
    };
    c.query_row(sql, params![value], user_row)
        .optional()?
        .map(finish_user)
        .transpose()
}

fn insert_user(
    c: &Connection,
    name: &str,
    is_admin: bool,
    password_hash: Option<String>,
) -> Result<User> {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let created = now();
    match c.execute(
        "INSERT INTO users (id, name, is_admin, password_hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![id, name, is_admin, password_hash, created],
    ) {
        Ok(_) => {}
        Err(e) if is_unique_violation(&e) => return Err(StoreError::NameTaken(name.to_string())),
        Err(e) => return Err(e.into()),
    }
    finish_user((id, name.to_string(), is_admin, password_hash, created))
}

fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
            || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(sid: &str, user: &UserId) -> Chat {
        Chat {
            session_id: sid.into(),
            user_id: user.clone(),
            channel: "cli".into(),
            title: "t".into(),
            agent_messages: vec![Message::user("hello")],
            display_messages: serde_json::json!([{"role": "user", "content": "hello"}]),
            message_count: 1,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    #[tokio::test]
    async fn users_have_stable_ids_across_renames_and_names_are_unique() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let alice = store.create_user("alice", false, None).await.unwrap();
        assert!(matches!(
            store.create_user("alice", true, None).await,
            Err(StoreError::NameTaken(_))
        ));
        store.rename_user(&alice.id, "alice2").await.unwrap();
        let again = store.user_by_name("alice2").await.unwrap().unwrap();
        assert_eq!(again.id, alice.id);
        // A re-used name is a new user with a new id.
        let newcomer = store.ensure_local_user("alice").await.unwrap();
        assert_ne!(newcomer.id, alice.id);
        assert!(matches!(
            store.create_user("../x", false, None).await,
            Err(StoreError::InvalidName(_))
        ));
    }

    #[tokio::test]
    async fn chat_snapshot_roundtrip_keeps_owner_and_created_at() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let u = store.ensure_local_user("bob").await.unwrap();
        let c1 = chat("s1", &u.id);
        store.save_chat(c1.clone()).await.unwrap();
        let mut c2 = c1.clone();
        c2.user_id = UserId("someone-else".into());
        c2.message_count = 2;
        store.save_chat(c2).await.unwrap();
        let got = store.chat("s1").await.unwrap().unwrap();
        assert_eq!(got.user_id, u.id);
        assert_eq!(got.message_count, 2);
        assert_eq!(got.agent_messages, c1.agent_messages);
        assert_eq!(store.list_chats(Some(&u.id), 1, 30).await.unwrap().len(), 1);
        assert!(store.delete_chat("s1").await.unwrap());
        assert!(store.chat("s1").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn newer_schema_is_refused_and_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.db");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch("PRAGMA user_version = 99; CREATE TABLE x(y);")
                .unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        assert!(matches!(
            Store::open(&path),
            Err(StoreError::NewerSchema { found: 99, .. })
        ));
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[tokio::test]
    async fn expired_tokens_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let u = store.ensure_local_user("carol").await.unwrap();
        store
            .insert_token("h1".into(), &u.id, Utc::now() + chrono::Duration::hours(1))
            .await
            .unwrap();
        store
            .insert_token(
                "h2".into(),
                &u.id,
                Utc::now() - chrono::Duration::seconds(1),
            )
            .await
            .unwrap();
        assert_eq!(
            store.token_user("h1".into()).await.unwrap().unwrap().id,
            u.id
        );
        assert!(store.token_user("h2".into()).await.unwrap().is_none());
        assert!(store.delete_token("h1".into()).await.unwrap());
        assert!(store.token_user("h1".into()).await.unwrap().is_none());
    }
}

/// Argon2id password hashing (PHC string with a random salt).
pub mod password {
    use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

    pub fn hash(password: &str) -> Result<String, String> {
        let mut salt_bytes = [0u8; 16];
        rand::Rng::fill(&mut rand::rng(), &mut salt_bytes);
        let salt = SaltString::encode_b64(&salt_bytes).map_err(|e| e.to_string())?;
        argon2::Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| e.to_string())
    }

    /// Whether `password` matches the stored PHC hash (false for a malformed hash).
    pub fn verify(stored: &str, password: &str) -> bool {
        PasswordHash::new(stored).is_ok_and(|h| {
            argon2::Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn hash_and_verify() {
            let h = super::hash("correct horse").unwrap();
            assert!(h.starts_with("$argon2"));
            assert!(super::verify(&h, "correct horse"));
            assert!(!super::verify(&h, "wrong"));
            assert!(!super::verify("garbage", "x"));
        }
    }
}
