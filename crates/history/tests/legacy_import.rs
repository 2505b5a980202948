//! Legacy importers (issue 5 item 7) against real SQLite files built here in the SOURCE
//! layouts — no mock of the import code.
//!
//! Hermes `state.db` (NousResearch/hermes-agent, `hermes_state.py`; the columns that matter):
//! - `sessions(id TEXT PK, source TEXT NOT NULL, user_id, model, parent_session_id,
//!   started_at REAL NOT NULL, ended_at REAL, end_reason, message_count, tool_call_count, title)`
//! - `messages(id INTEGER PK AUTOINCREMENT, session_id, role, content, tool_call_id,
//!   tool_calls TEXT(JSON), tool_name, timestamp REAL NOT NULL, token_count, finish_reason,
//!   active DEFAULT 1, compacted DEFAULT 0, display_kind)`; list/dict content is stored as
//!   NUL + `json:` + JSON. Roles include `system` and `session_meta`.
//!
//! MoviePilot (jxxghp/MoviePilot) under the config dir:
//! - `user.db`: `"user"(id INTEGER PK, name, email, hashed_password, is_active, is_superuser,
//!   avatar, is_otp, otp_secret, permissions JSON, settings JSON)` and `agentchat(id INTEGER PK,
//!   session_id NOT NULL, client_session_id, user_id, username, channel, source,
//!   original_chat_id, title, preview, agent_messages JSON, display_messages JSON,
//!   message_count, created_at, updated_at)`; `agent_messages` holds LangChain
//!   `messages_to_dict` output: `[{type: human|ai|tool|system, data: {content, id,
//!   additional_kwargs, tool_calls, tool_call_id, name, …}}]`.
//! - `agent/runtime/history/users/<sha256(trimmed user id)>/state.db`: `sessions(id PK, source,
//!   title, model, started_at, last_active, parent_session_id, end_reason, message_count)`,
//!   `messages(id AUTOINCREMENT, session_id, message_uid, role, content, tool_call_id,
//!   tool_name, tool_calls, tool_status, timestamp, provenance, active, compacted,
//!   UNIQUE(session_id, message_uid))`, `deleted_sessions(id PK)`, `state_meta(key, value)`.

#![expect(clippy::unwrap_used, reason = "test assertions")]

use crate::common::{OutcomeExt, current, q};
use mpa_history::legacy::HERMES_JSON_SENTINEL;
use mpa_history::legacy::moviepilot::{py_json, py_str};
use mpa_history::legacy::source::{hermes_content, parse_mp_time};
use mpa_history::legacy::{
    ImportSummary, MoviePilotSource, import_hermes, import_moviepilot, legacy_identity,
    legacy_import_pending,
};
use mpa_history::recall::DiscoverResult;
use mpa_history::{History, HistoryConfig, HistoryError, SearchRequest, SearchResponse};
use mpa_protocol::UserId;
use mpa_redact::UserKey;
use rusqlite::{Connection, params};
use serde_json::{Value, json};
use sha2::Digest;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const T0: f64 = 1_773_566_677.0; // 2026-03-15T09:24:37Z
const SECRET: &str = "sk-proj-abcdefghijklmnop1234567890";

fn user(name: &str) -> UserKey {
    UserKey::for_user(&UserId(name.to_owned()))
}

fn hub(data: &Path) -> History {
    History::new(HistoryConfig::new(data))
}

fn no_progress() -> impl FnMut(mpa_history::legacy::ImportProgress) {
    |_| {}
}

/// A discover of `query` (up to 10 sessions) with what came with it.
async fn find(h: &History, u: &UserKey, query: &str) -> SearchResponse {
    h.search(u, &current(None), SearchRequest::Discover(q(query)))
        .await
        .unwrap()
}

fn hits(r: SearchResponse) -> DiscoverResult {
    r.outcome.discover()
}

// ----------------------------------------------------------------------------- Hermes layout

fn hermes_db(path: &Path) -> Connection {
    let c = Connection::open(path).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=WAL;
         CREATE TABLE sessions (
           id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, model TEXT,
           model_config TEXT, system_prompt TEXT, parent_session_id TEXT,
           started_at REAL NOT NULL, ended_at REAL, end_reason TEXT,
           message_count INTEGER DEFAULT 0, tool_call_count INTEGER DEFAULT 0,
           input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0, title TEXT);
         CREATE TABLE messages (
           id INTEGER PRIMARY KEY AUTOINCREMENT,
           session_id TEXT NOT NULL REFERENCES sessions(id),
           role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT,
           tool_name TEXT, timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT,
           active INTEGER NOT NULL DEFAULT 1, compacted INTEGER NOT NULL DEFAULT 0,
           display_kind TEXT);
         CREATE INDEX idx_messages_session ON messages(session_id, timestamp);",
    )
    .unwrap();
    c
}

fn h_session(
    c: &Connection,
    id: &str,
    source: &str,
    title: Option<&str>,
    parent: Option<&str>,
    end: Option<&str>,
) {
    c.execute(
        "INSERT INTO sessions (id, source, model, parent_session_id, started_at, end_reason, title)
         VALUES (?1, ?2, 'gpt-x', ?3, ?4, ?5, ?6)",
        params![id, source, parent, T0, end, title],
    )
    .unwrap();
}

#[expect(
    clippy::too_many_arguments,
    reason = "one row of the source schema per argument"
)]
fn h_msg(
    c: &Connection,
    sid: &str,
    role: &str,
    content: &str,
    at: f64,
    tool: Option<(&str, &str)>,
    calls: Option<&str>,
    flags: (i64, i64, Option<&str>),
) -> i64 {
    c.execute(
        "INSERT INTO messages (session_id, role, content, tool_call_id, tool_name, tool_calls,
           timestamp, active, compacted, display_kind)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            sid,
            role,
            content,
            tool.map(|t| t.0),
            tool.map(|t| t.1),
            calls,
            at,
            flags.0,
            flags.1,
            flags.2
        ],
    )
    .unwrap();
    c.last_insert_rowid()
}

const LIVE: (i64, i64, Option<&str>) = (1, 0, None);

/// Rows as stored in our database: (session, uid, role, content, tool_calls, timestamp,
/// provenance, active, compacted).
type Row = (
    String,
    String,
    String,
    String,
    String,
    f64,
    String,
    i64,
    i64,
);

fn our_rows(h: &History, u: &UserKey) -> Vec<Row> {
    let c = Connection::open(h.db_path(u)).unwrap();
    let mut st = c
        .prepare(
            "SELECT session_id, message_uid, role, content, tool_calls, timestamp, provenance,
                    active, compacted FROM messages ORDER BY id",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
        ))
    })
    .unwrap()
    .map(|r| r.unwrap())
    .collect()
}

fn session_row(h: &History, u: &UserKey, sid: &str) -> (String, String, String, f64, String) {
    let c = Connection::open(h.db_path(u)).unwrap();
    c.query_row(
        "SELECT source, title, parent_session_id, started_at, end_reason FROM sessions WHERE id = ?1",
        [sid],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )
    .unwrap()
}

fn skipped(s: &ImportSummary) -> Value {
    serde_json::to_value(&s.skipped).unwrap()
}

/// A Hermes database exercising every row kind the importer treats specially.
fn hermes_fixture(dir: &Path) -> PathBuf {
    let p = dir.join("hermes-state.db");
    let c = hermes_db(&p);
    h_session(
        &c,
        "20260315_092437_c9a6ff",
        "cli",
        Some("Docker fix"),
        None,
        Some("compression"),
    );
    h_session(
        &c,
        "20260315_100000_aaaaaa",
        "telegram",
        None,
        Some("20260315_092437_c9a6ff"),
        None,
    );
    let s1 = "20260315_092437_c9a6ff";
    h_msg(&c, s1, "system", "You are Hermes", T0, None, None, LIVE);
    h_msg(&c, s1, "session_meta", "{}", T0, None, None, LIVE);
    h_msg(
        &c,
        s1,
        "user",
        "docker networking is broken",
        T0 + 1.0,
        None,
        None,
        (0, 1, None),
    );
    let calls = r#"[{"id":"call_1","type":"function","function":{"name":"terminal","arguments":"{\"cmd\":\"docker network ls\"}"}}]"#;
    h_msg(&c, s1, "assistant", "", T0 + 2.0, None, Some(calls), LIVE);
    h_msg(
        &c,
        s1,
        "tool",
        &format!("bridge host none; token {SECRET}"),
        T0 + 3.0,
        Some(("call_1", "terminal")),
        None,
        LIVE,
    );
    h_msg(
        &c,
        s1,
        "assistant",
        "undone answer",
        T0 + 4.0,
        None,
        None,
        (0, 0, None),
    );
    h_msg(
        &c,
        s1,
        "assistant",
        "internal marker",
        T0 + 5.0,
        None,
        None,
        (1, 0, Some("hidden")),
    );
    let list = "\u{0}json:[{\"type\":\"text\",\"text\":\"restarted the bridge\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:x\"}}]";
    h_msg(&c, s1, "assistant", list, T0 + 6.0, None, None, LIVE);
    let s2 = "20260315_100000_aaaaaa";
    h_msg(
        &c,
        s2,
        "user",
        "subscribe to Dune please",
        T0 + 100.0,
        None,
        None,
        LIVE,
    );
    h_msg(
        &c,
        s2,
        "assistant",
        "Dune (2021) subscribed",
        T0 + 101.0,
        None,
        None,
        LIVE,
    );
    p
}

#[tokio::test]
async fn hermes_import_keeps_time_and_flags_marks_legacy_and_redacts() {
    let tmp = tempfile::tempdir().unwrap();
    let src = hermes_fixture(tmp.path());
    let h = hub(&tmp.path().join("data"));
    let u = user("alice");
    let mut seen = Vec::new();
    let s = import_hermes(&h, &src, &u, &mut |p| seen.push(p))
        .await
        .unwrap();
    assert_eq!(s.source, "hermes");
    assert_eq!(s.messages_imported, 6, "{s:?}");
    assert_eq!(s.duplicates, 0);
    assert_eq!(s.sessions, 2);
    assert_eq!(s.users, 1);
    assert!(s.complete);
    assert_eq!(
        skipped(&s),
        json!({"role_system": 1, "role_session_meta": 1, "rewound": 1, "hidden_display_row": 1})
    );
    let last = seen.last().unwrap();
    assert_eq!((last.done, last.total, last.imported), (10, 10, 6));

    let rows = our_rows(&h, &u);
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().all(|r| r.6 == "legacy_snapshot"), "{rows:?}");
    let times: Vec<f64> = rows.iter().map(|r| r.5).collect();
    assert_eq!(
        times,
        vec![
            T0 + 1.0,
            T0 + 2.0,
            T0 + 3.0,
            T0 + 6.0,
            T0 + 100.0,
            T0 + 101.0
        ]
    );
    // The compacted source row is an archive: inactive but still searchable.
    assert_eq!((rows[0].7, rows[0].8), (0, 1));
    assert_eq!((rows[1].7, rows[1].8), (1, 0));
    assert!(
        rows[1].4.contains("docker network ls"),
        "tool_calls kept: {}",
        rows[1].4
    );
    assert!(
        !rows[2].3.contains(SECRET),
        "secret must be redacted: {}",
        rows[2].3
    );
    assert!(rows[2].3.contains("bridge host none"));
    assert_eq!(rows[3].3, "restarted the bridge");
    assert_eq!(rows[0].1, "hermes:3");

    let s1 = session_row(&h, &u, "20260315_092437_c9a6ff");
    assert_eq!(
        (s1.0.as_str(), s1.1.as_str(), s1.3),
        ("cli", "Docker fix", T0)
    );
    assert_eq!(s1.4, "compression");
    let s2 = session_row(&h, &u, "20260315_100000_aaaaaa");
    assert_eq!(
        (s2.0.as_str(), s2.2.as_str()),
        ("telegram", "20260315_092437_c9a6ff")
    );

    let r = hits(find(&h, &u, "Dune").await);
    assert_eq!(r.hits.len(), 1, "{r:?}");
    assert!(!legacy_import_pending(&tmp.path().join("data"), &u));
    let cursor: Value = serde_json::from_slice(
        &std::fs::read(
            h.db_path(&u)
                .parent()
                .unwrap()
                .join("import-hermes-cursor.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(cursor["complete"], true, "{cursor}");
}

#[tokio::test]
async fn hermes_reimport_is_idempotent_and_picks_up_only_new_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let src = hermes_fixture(tmp.path());
    let data = tmp.path().join("data");
    let h = hub(&data);
    let u = user("alice");
    import_hermes(&h, &src, &u, &mut no_progress())
        .await
        .unwrap();

    // Same cursor: nothing new is even read.
    let again = import_hermes(&h, &src, &u, &mut no_progress())
        .await
        .unwrap();
    assert_eq!((again.messages_imported, again.duplicates), (0, 0));

    // Cursor lost: everything is re-read, nothing is written twice.
    std::fs::remove_file(
        h.db_path(&u)
            .parent()
            .unwrap()
            .join("import-hermes-cursor.json"),
    )
    .unwrap();
    let fresh = import_hermes(&h, &src, &u, &mut no_progress())
        .await
        .unwrap();
    assert_eq!((fresh.messages_imported, fresh.duplicates), (0, 6));
    assert_eq!(our_rows(&h, &u).len(), 6);

    // Hermes kept running: only the new row arrives.
    let c = Connection::open(&src).unwrap();
    h_msg(
        &c,
        "20260315_100000_aaaaaa",
        "user",
        "and Arrival too",
        T0 + 200.0,
        None,
        None,
        LIVE,
    );
    drop(c);
    let more = import_hermes(&h, &src, &u, &mut no_progress())
        .await
        .unwrap();
    assert_eq!((more.messages_imported, more.duplicates), (1, 0));
    assert_eq!(our_rows(&h, &u).len(), 7);
}

#[tokio::test]
async fn hermes_import_resumes_from_an_interrupted_cursor() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let p = tmp.path().join("big.db");
    let c = hermes_db(&p);
    h_session(&c, "big", "cli", None, None, None);
    let add = |c: &Connection, range: std::ops::Range<i32>| {
        c.execute_batch("BEGIN").unwrap();
        for i in range {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            let text = format!("line {i}");
            h_msg(c, "big", role, &text, T0 + f64::from(i), None, None, LIVE);
        }
        c.execute_batch("COMMIT").unwrap();
    };
    add(&c, 0..500);
    let h = hub(&data);
    let u = user("bob");
    let first = import_hermes(&h, &p, &u, &mut no_progress()).await.unwrap();
    assert_eq!(first.messages_imported, 500);
    add(&c, 500..1200);
    drop(c);

    // What a run killed after its first page (source ids 1..=500 appended) leaves behind: the
    // cursor at 500 and `complete: false`.
    let dir = h.db_path(&u).parent().unwrap().to_path_buf();
    let key = std::fs::canonicalize(&p)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let killed = json!({"version": 1, "complete": false, "updated_at": "",
                        "sources": {key: {"last_id": 500, "complete": false}}});
    std::fs::write(dir.join("import-hermes-cursor.json"), killed.to_string()).unwrap();
    assert_eq!(our_rows(&h, &u).len(), 500);

    assert!(
        legacy_import_pending(&data, &u),
        "unfinished import is reported"
    );
    // Another user is not affected by this user's Hermes cursor.
    assert!(!legacy_import_pending(&data, &user("carol")));
    // Every response says the import is unfinished, and so does status.
    assert!(find(&h, &u, "line").await.legacy_import_pending);
    assert!(!h.status(&u).await.unwrap().legacy_import_complete);

    let mut seen = Vec::new();
    let resumed = import_hermes(&h, &p, &u, &mut |p| seen.push(p))
        .await
        .unwrap();
    assert_eq!((resumed.messages_imported, resumed.duplicates), (700, 0));
    assert_eq!(seen.last().map(|p| (p.done, p.total)), Some((700, 700)));
    assert_eq!(our_rows(&h, &u).len(), 1200);
    assert!(!legacy_import_pending(&data, &u));
    assert!(!find(&h, &u, "line").await.legacy_import_pending);
    assert!(h.status(&u).await.unwrap().legacy_import_complete);
}

#[tokio::test]
async fn hermes_import_rejects_bad_sources_without_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let h = hub(&data);
    let u = user("alice");

    let missing = import_hermes(&h, &tmp.path().join("nope.db"), &u, &mut no_progress()).await;
    assert!(
        matches!(&missing, Err(HistoryError::InvalidInput(m)) if m.contains("does not exist")),
        "{missing:?}"
    );

    let junk = tmp.path().join("junk.db");
    std::fs::write(
        &junk,
        b"this is not sqlite at all, just some text padding padding padding",
    )
    .unwrap();
    let e = import_hermes(&h, &junk, &u, &mut no_progress()).await;
    assert!(
        matches!(&e, Err(HistoryError::InvalidInput(m)) if m.contains("not a readable SQLite")),
        "{e:?}"
    );

    let other = tmp.path().join("other.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        .unwrap();
    let e = import_hermes(&h, &other, &u, &mut no_progress()).await;
    assert!(
        matches!(&e, Err(HistoryError::InvalidInput(m)) if m.contains("not a Hermes state.db")),
        "{e:?}"
    );

    let src = hermes_fixture(tmp.path());
    let system = UserKey::for_user(&UserId("system".into()));
    let e = import_hermes(&h, &src, &system, &mut no_progress()).await;
    assert!(matches!(e, Err(HistoryError::InvalidUser)), "{e:?}");
    assert!(!data.exists(), "nothing may be written for rejected input");
}

// -------------------------------------------------------------------------- MoviePilot layout

fn mp_main_db(path: &Path) -> Connection {
    let c = Connection::open(path).unwrap();
    c.execute_batch(
        "CREATE TABLE \"user\" (
           id INTEGER NOT NULL PRIMARY KEY, name VARCHAR NOT NULL, email VARCHAR,
           hashed_password VARCHAR, is_active BOOLEAN, is_superuser BOOLEAN, avatar VARCHAR,
           is_otp BOOLEAN, otp_secret VARCHAR, permissions JSON, settings JSON);
         CREATE INDEX ix_user_name ON \"user\" (name);
         CREATE TABLE agentchat (
           id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, session_id VARCHAR NOT NULL,
           client_session_id VARCHAR, user_id VARCHAR, username VARCHAR, channel VARCHAR,
           source VARCHAR, original_chat_id VARCHAR, title VARCHAR, preview VARCHAR,
           agent_messages JSON, display_messages JSON, message_count INTEGER,
           created_at VARCHAR, updated_at VARCHAR);
         CREATE INDEX ix_agentchat_session_user ON agentchat (session_id, user_id);
         INSERT INTO \"user\" (id, name, is_active, is_superuser) VALUES (1, 'admin', 1, 1), (2, 'alice', 1, 0);",
    )
    .unwrap();
    c
}

fn mp_snapshot(
    c: &Connection,
    sid: &str,
    user_id: &str,
    username: &str,
    messages: &str,
    created: &str,
) {
    c.execute(
        "INSERT INTO agentchat (session_id, user_id, username, channel, title, agent_messages,
           display_messages, message_count, created_at, updated_at)
         VALUES (?1, ?2, ?3, 'Telegram', 'Snapshot title', ?4, '[]', 0, ?5, ?5)",
        params![sid, user_id, username, messages, created],
    )
    .unwrap();
}

/// MoviePilot's per-user recall database (schema.py, without the FTS projections).
fn mp_state_db(config: &Path, user_id: &str) -> Connection {
    let key = hex::encode(sha2::Sha256::digest(user_id.trim().as_bytes()));
    let dir = config.join("agent/runtime/history/users").join(key);
    std::fs::create_dir_all(&dir).unwrap();
    let c = Connection::open(dir.join("state.db")).unwrap();
    c.execute_batch(
        "CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE sessions (
           id TEXT PRIMARY KEY, source TEXT NOT NULL, title TEXT NOT NULL DEFAULT '',
           model TEXT NOT NULL DEFAULT '', started_at REAL NOT NULL, last_active REAL NOT NULL,
           parent_session_id TEXT NOT NULL DEFAULT '', end_reason TEXT NOT NULL DEFAULT '',
           message_count INTEGER NOT NULL DEFAULT 0);
         CREATE TABLE deleted_sessions (id TEXT PRIMARY KEY);
         CREATE TABLE messages (
           id INTEGER PRIMARY KEY AUTOINCREMENT,
           session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
           message_uid TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,
           tool_call_id TEXT NOT NULL DEFAULT '', tool_name TEXT NOT NULL DEFAULT '',
           tool_calls TEXT NOT NULL DEFAULT '', tool_status TEXT NOT NULL DEFAULT '',
           timestamp REAL NOT NULL, provenance TEXT NOT NULL DEFAULT 'observed',
           active INTEGER NOT NULL DEFAULT 1, compacted INTEGER NOT NULL DEFAULT 0,
           UNIQUE(session_id, message_uid));
         PRAGMA user_version = 1;",
    )
    .unwrap();
    // The derived FTS projections MoviePilot keeps next to the rows, including one whose
    // tokenizer (`cjk_unicode61`, a loadable extension there) the importer's read-only
    // connection does not have: reading `messages` must not need it.
    mpa_history::register_cjk_tokenizer(&c).unwrap();
    for (table, tok) in [
        ("messages_fts", "unicode61"),
        ("messages_fts_cjk", "cjk_unicode61"),
    ] {
        c.execute_batch(&format!(
            "CREATE VIEW {table}_src AS SELECT id, content, tool_name FROM messages;
             CREATE VIRTUAL TABLE {table} USING fts5(content, tool_name,
               content='{table}_src', content_rowid='id', tokenize='{tok}');
             CREATE TRIGGER {table}_insert AFTER INSERT ON messages BEGIN
               INSERT INTO {table}(rowid, content, tool_name) VALUES (new.id, new.content, new.tool_name);
             END;"
        ))
        .unwrap();
    }
    c
}

fn mp_msg(c: &Connection, sid: &str, uid: &str, role: &str, content: &str, at: f64) {
    c.execute(
        "INSERT INTO messages (session_id, message_uid, role, content, timestamp) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![sid, uid, role, content, at],
    )
    .unwrap();
}

fn lc(kind: &str, data: Value) -> Value {
    json!({"type": kind, "data": data})
}

/// A MoviePilot config dir: users admin (id 1) and alice (id 2); a state.db for user "1" and
/// one for an unknown id; snapshots covering every skip reason.
fn moviepilot_fixture(config: &Path) {
    std::fs::create_dir_all(config).unwrap();
    let main = mp_main_db(&config.join("user.db"));

    let st = mp_state_db(config, "1");
    st.execute(
        "INSERT INTO sessions (id, source, title, started_at, last_active) VALUES ('mp-s1', 'web', 'Dune search', ?1, ?1)",
        [T0],
    )
    .unwrap();
    mp_msg(
        &st,
        "mp-s1",
        "lc-1",
        "user",
        "find the Dune remux",
        T0 + 10.0,
    );
    mp_msg(
        &st,
        "mp-s1",
        "lc-2",
        "assistant",
        "found 3 Dune releases",
        T0 + 11.0,
    );
    st.execute("INSERT INTO deleted_sessions (id) VALUES ('mp-dead')", [])
        .unwrap();
    let unknown = mp_state_db(config, "999");
    unknown
        .execute(
            "INSERT INTO sessions (id, source, started_at, last_active) VALUES ('x', 'web', 1, 1)",
            [],
        )
        .unwrap();
    mp_msg(&unknown, "x", "u1", "user", "orphan text", 5.0);

    // Snapshot of mp-s1: two messages MoviePilot already migrated, one new without an id.
    let s1 = json!([
        lc(
            "human",
            json!({"content": "find the Dune remux", "id": "lc-1", "additional_kwargs": {}})
        ),
        lc(
            "ai",
            json!({"content": "found 3 Dune releases", "id": "lc-2", "tool_calls": []})
        ),
        lc(
            "human",
            json!({"content": "and the new part", "additional_kwargs": {}})
        ),
    ]);
    mp_snapshot(
        &main,
        "mp-s1",
        "1",
        "admin",
        &s1.to_string(),
        "2026-03-15T09:24:37+00:00",
    );
    let s2 = json!([
        lc("system", json!({"content": "You are MoviePilot"})),
        lc(
            "human",
            json!({"content": "subscribe to Dune please", "id": null})
        ),
        lc(
            "ai",
            json!({"content": "", "id": "run-1",
            "tool_calls": [{"name": "add_subscribe", "args": {"title": "Dune", "token": SECRET}, "id": "call_9", "type": "tool_call"}]})
        ),
        lc(
            "tool",
            json!({"content": "subscribed: Dune (2021)", "id": "t-1", "tool_call_id": "call_9", "name": "add_subscribe", "status": "success"})
        ),
        lc(
            "ai",
            json!({"content": "summary of earlier turns", "id": "sum-1", "additional_kwargs": {"lc_source": "summarization"}})
        ),
        lc(
            "human",
            json!({"content": [{"type": "text", "text": "what about this poster?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}], "id": "img-1"})
        ),
    ]);
    mp_snapshot(
        &main,
        "snap-2",
        "2",
        "alice",
        &s2.to_string(),
        "2026-03-15T09:24:37+00:00",
    );
    let dead = json!([lc("human", json!({"content": "deleted talk", "id": "d-1"}))]);
    mp_snapshot(
        &main,
        "mp-dead",
        "1",
        "admin",
        &dead.to_string(),
        "2026-03-15 09:00:00",
    );
    let sys = json!([lc(
        "human",
        json!({"content": "internal task", "id": "i-1"})
    )]);
    mp_snapshot(
        &main,
        "task-1",
        "system",
        "",
        &sys.to_string(),
        "2026-03-15 09:00:00",
    );
    mp_snapshot(
        &main,
        "broken",
        "2",
        "alice",
        "{not json",
        "2026-03-15 09:00:00",
    );
}

fn resolve(src: &MoviePilotSource) -> HashMap<String, UserKey> {
    src.user_names()
        .into_iter()
        .map(|n| {
            let k = user(&n);
            (n, k)
        })
        .collect()
}

#[tokio::test]
async fn moviepilot_import_maps_users_dedupes_and_keeps_source_time() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    moviepilot_fixture(&config);
    let data = tmp.path().join("data");
    let h = hub(&data);
    let src = MoviePilotSource::open(&config).unwrap();
    assert_eq!(
        src.user_names(),
        vec!["admin".to_owned(), "alice".to_owned()]
    );
    let users = resolve(&src);
    let mut seen = Vec::new();
    let s = import_moviepilot(&h, &src, &users, &mut |p| seen.push(p))
        .await
        .unwrap();
    assert_eq!(s.source, "moviepilot");
    assert!(s.complete);
    assert_eq!(s.users, 2, "{s:?}");
    // state.db: 2; snapshot mp-s1: 2 duplicates + 1 new; snap-2: human, ai, tool, human.
    assert_eq!((s.messages_imported, s.duplicates), (7, 2), "{s:?}");
    assert_eq!(s.sessions, 2);
    assert_eq!(
        skipped(&s),
        json!({"unmapped_user_dir": 1, "role_system": 1, "synthetic_summary": 1,
               "deleted_in_source": 1, "internal_or_missing_user": 1, "invalid_snapshot_json": 1})
    );
    let last = seen.last().unwrap();
    assert_eq!(
        (last.done, last.total),
        (7, 7),
        "2 state.db rows + 5 snapshot records"
    );

    let admin = our_rows(&h, &user("admin"));
    assert_eq!(admin.len(), 3);
    assert!(admin.iter().all(|r| r.6 == "legacy_snapshot"));
    assert_eq!((admin[0].1.as_str(), admin[0].5), ("lc-1", T0 + 10.0));
    assert_eq!(admin[1].5, T0 + 11.0);
    // MoviePilot's own legacy identity (value computed with CPython's json/hashlib), and no
    // timestamp in the snapshot: dated by the session's last activity, never by the import.
    assert_eq!(
        admin[2].1,
        "legacy:019ed09287862195d781ecdec69c83a813390987f0e5b60913a27519803d9fea"
    );
    assert_eq!(admin[2].5, T0 + 11.0);
    assert_eq!(
        session_row(&h, &user("admin"), "mp-s1").0,
        "web",
        "state.db source wins"
    );

    let alice = our_rows(&h, &user("alice"));
    let uids: Vec<&str> = alice.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(
        uids,
        vec![
            "legacy:8cca0e67246ab80312f77711e60ee0293c700f02a45a908c1c169f3111fbf3dc",
            "run-1",
            "t-1",
            "img-1"
        ]
    );
    assert!(
        alice.iter().all(|r| r.5 == T0 && r.6 == "legacy_snapshot"),
        "{alice:?}"
    );
    assert!(alice[1].4.contains("add_subscribe"));
    assert!(
        !alice[1].4.contains(SECRET),
        "tool_calls redacted: {}",
        alice[1].4
    );
    assert_eq!(alice[3].3, "what about this poster?");
    let sess = session_row(&h, &user("alice"), "snap-2");
    assert_eq!(
        (sess.0.as_str(), sess.1.as_str(), sess.3),
        ("telegram", "Snapshot title", T0)
    );
    assert_eq!(
        legacy_identity("snap-2", 1, "human", &json!("subscribe to Dune please")),
        alice[0].1
    );

    let r = hits(find(&h, &user("alice"), "Dune").await);
    assert_eq!(r.hits.len(), 1, "{r:?}");
    let r = hits(find(&h, &user("admin"), "poster").await);
    assert!(r.hits.is_empty(), "users stay isolated: {r:?}");
    assert!(!legacy_import_pending(&data, &user("alice")));

    // Re-running imports nothing; losing the cursor imports nothing new either.
    let again = import_moviepilot(&h, &src, &users, &mut no_progress())
        .await
        .unwrap();
    assert_eq!((again.messages_imported, again.duplicates), (0, 0));
    std::fs::remove_file(data.join("agent/runtime/history/import-moviepilot-cursor.json")).unwrap();
    let fresh = import_moviepilot(&h, &src, &users, &mut no_progress())
        .await
        .unwrap();
    assert_eq!(fresh.messages_imported, 0, "{fresh:?}");
    assert_eq!(fresh.duplicates, 9);
}

#[tokio::test]
async fn moviepilot_unfinished_import_is_reported_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    let main = mp_main_db(&config.join("user.db"));
    for i in 0..45 {
        let m = json!([lc(
            "human",
            json!({"content": format!("snapshot question {i}"), "id": format!("q{i}")})
        )]);
        mp_snapshot(
            &main,
            &format!("s{i}"),
            "2",
            "alice",
            &m.to_string(),
            "2026-03-15T09:24:37Z",
        );
    }
    drop(main);
    let data = tmp.path().join("data");
    let h = hub(&data);
    let src = MoviePilotSource::open(&config).unwrap();
    let users = resolve(&src);
    let alice = user("alice");

    // A run killed after record 20 leaves this cursor behind.
    std::fs::create_dir_all(data.join("agent/runtime/history")).unwrap();
    let key = format!(
        "{}::user.db#agentchat",
        std::fs::canonicalize(&config).unwrap().to_string_lossy()
    );
    let killed = json!({"version": 1, "complete": false, "updated_at": "",
                        "sources": {key: {"last_id": 20, "complete": false}}});
    std::fs::write(
        data.join("agent/runtime/history/import-moviepilot-cursor.json"),
        killed.to_string(),
    )
    .unwrap();
    assert!(legacy_import_pending(&data, &alice));

    let s = import_moviepilot(&h, &src, &users, &mut no_progress())
        .await
        .unwrap();
    assert_eq!(s.messages_imported, 25, "records 21..=45 only");
    let uids: Vec<String> = our_rows(&h, &alice).into_iter().map(|r| r.1).collect();
    assert_eq!(uids.first().map(String::as_str), Some("q20"));
    assert!(!legacy_import_pending(&data, &alice));
}

#[tokio::test]
async fn moviepilot_rejects_a_directory_without_moviepilot_data() {
    let tmp = tempfile::tempdir().unwrap();
    let e = MoviePilotSource::open(tmp.path()).unwrap_err();
    assert!(
        matches!(&e, HistoryError::InvalidInput(m) if m.contains("no MoviePilot data")),
        "{e}"
    );
    std::fs::write(
        tmp.path().join("user.db"),
        b"garbage garbage garbage garbage garbage garbage garbage garbage",
    )
    .unwrap();
    let e = MoviePilotSource::open(tmp.path()).unwrap_err();
    assert!(
        matches!(&e, HistoryError::InvalidInput(m) if m.contains("not a readable SQLite")),
        "{e}"
    );
}

#[test]
fn python_json_matches_json_dumps() {
    // Expected strings are what CPython's json.dumps(..., ensure_ascii=False,
    // sort_keys=True) prints for the same values.
    let v = serde_json::json!(["s1", 0, "human", [{"type": "text", "text": "hé\n\"x\""}, {"b": 1.0, "a": null}]]);
    let mut s = String::new();
    py_json(&v, &mut s);
    assert_eq!(
        s,
        r#"["s1", 0, "human", [{"text": "hé\n\"x\"", "type": "text"}, {"a": null, "b": 1.0}]]"#
    );
    let mut c = String::new();
    py_str("\u{1}\u{8}", &mut c);
    assert_eq!(c, r#""\u0001\b""#);
}

#[test]
fn hermes_sentinel_content_keeps_text_blocks() {
    let raw = format!(
        "{HERMES_JSON_SENTINEL}{}",
        r#"[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]"#
    );
    assert_eq!(hermes_content(raw), "a\nb");
    assert_eq!(hermes_content("plain".into()), "plain");
}

#[test]
fn naive_mp_time_is_local() {
    assert!(parse_mp_time("2026-03-15 09:24:37").is_some());
    assert_eq!(
        parse_mp_time("2026-03-15T09:24:37Z").map(|t| t.timestamp()),
        Some(1_773_566_677)
    );
    assert!(parse_mp_time("yesterday").is_none());
}
