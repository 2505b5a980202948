#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]
//! End-to-end contract of `mpagent history import-hermes` / `import-moviepilot`, driving the
//! real binary against SQLite files built here in the source layouts:
//! - Hermes `state.db`: `sessions(id, source, started_at, end_reason, title, …)` and
//!   `messages(id AUTOINCREMENT, session_id, role, content, tool_call_id, tool_calls,
//!   tool_name, timestamp REAL, active, compacted, display_kind)`.
//! - MoviePilot `<config>/user.db`: `"user"(id, name, …)` and `agentchat(id, session_id,
//!   user_id, username, channel, title, agent_messages JSON (LangChain `messages_to_dict`),
//!   created_at, updated_at, …)`.

use rusqlite::{Connection, params};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Output;

const T0: f64 = 1_773_566_677.0; // 2026-03-15T09:24:37Z

use crate::common;

fn mpagent(data: &Path, args: &[&str]) -> Output {
    common::mpagent_sync(data, args)
}

fn summary(o: &Output) -> Value {
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {text}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("summary is not JSON ({e}): {text}"))
}

fn hermes_db(path: &Path) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, model TEXT,
           parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL, end_reason TEXT,
           message_count INTEGER DEFAULT 0, title TEXT);
         CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
           role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
           timestamp REAL NOT NULL, active INTEGER NOT NULL DEFAULT 1,
           compacted INTEGER NOT NULL DEFAULT 0, display_kind TEXT);",
    )
    .unwrap();
    c.execute(
        "INSERT INTO sessions (id, source, started_at, title) VALUES ('h1', 'cli', ?1, 'Docker')",
        [T0],
    )
    .unwrap();
    for (i, (role, text)) in [
        ("system", "You are Hermes"),
        ("user", "docker networking is broken"),
        ("assistant", "restarted the docker bridge"),
    ]
    .into_iter()
    .enumerate()
    {
        c.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('h1', ?1, ?2, ?3)",
            params![role, text, T0 + i as f64],
        )
        .unwrap();
    }
}

fn moviepilot_config(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let c = Connection::open(dir.join("user.db")).unwrap();
    c.execute_batch(
        "CREATE TABLE \"user\" (id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, email VARCHAR,
           hashed_password VARCHAR, is_active BOOLEAN, is_superuser BOOLEAN);
         CREATE TABLE agentchat (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id VARCHAR NOT NULL,
           client_session_id VARCHAR, user_id VARCHAR, username VARCHAR, channel VARCHAR,
           source VARCHAR, original_chat_id VARCHAR, title VARCHAR, preview VARCHAR,
           agent_messages JSON, display_messages JSON, message_count INTEGER,
           created_at VARCHAR, updated_at VARCHAR);
         INSERT INTO \"user\" (id, name, is_active, is_superuser) VALUES (2, 'alice', 1, 0);",
    )
    .unwrap();
    let msgs = json!([
        {"type": "system", "data": {"content": "You are MoviePilot"}},
        {"type": "human", "data": {"content": "subscribe to Dune please", "id": "m1"}},
        {"type": "ai", "data": {"content": "Dune (2021) subscribed", "id": "m2", "tool_calls": []}},
    ]);
    c.execute(
        "INSERT INTO agentchat (session_id, user_id, username, channel, title, agent_messages,
           created_at, updated_at) VALUES ('mp1', '2', 'alice', 'Web', 'Dune', ?1, ?2, ?2)",
        params![msgs.to_string(), "2026-03-15T09:24:37+00:00"],
    )
    .unwrap();
}

fn search(data: &Path, user: &str, query: &str) -> Value {
    let o = mpagent(
        data,
        &["history", "search", "--user", user, "--query", query],
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn import_hermes_prints_a_summary_and_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let src = tmp.path().join("state.db");
    hermes_db(&src);
    let args = [
        "history",
        "import-hermes",
        "--state-db",
        src.to_str().unwrap(),
        "--user",
        "alice",
    ];
    let s = summary(&mpagent(&data, &args));
    assert_eq!(s["source"], "hermes");
    assert_eq!(s["messages_imported"], 2, "{s}");
    assert_eq!(s["sessions"], 1);
    assert_eq!(s["duplicates"], 0);
    assert_eq!(s["skipped"], json!({"role_system": 1}));
    assert_eq!(s["complete"], true);

    let r = search(&data, "alice", "docker");
    assert_eq!(r["count"], 1, "{r}");

    let again = summary(&mpagent(&data, &args));
    assert_eq!(again["messages_imported"], 0, "{again}");
}

#[test]
fn import_hermes_fails_clearly_on_a_missing_file() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let missing = tmp.path().join("nope.db");
    let o = mpagent(
        &data,
        &[
            "history",
            "import-hermes",
            "--state-db",
            missing.to_str().unwrap(),
            "--user",
            "alice",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("does not exist"), "{err}");
}

#[test]
fn import_moviepilot_creates_users_by_name_and_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = tmp.path().join("config");
    moviepilot_config(&config);
    let args = [
        "history",
        "import-moviepilot",
        "--config-dir",
        config.to_str().unwrap(),
    ];
    let s = summary(&mpagent(&data, &args));
    assert_eq!(s["source"], "moviepilot");
    assert_eq!(s["messages_imported"], 2, "{s}");
    assert_eq!(s["users"], 1);
    assert_eq!(s["skipped"], json!({"role_system": 1}));

    let r = search(&data, "alice", "Dune");
    assert_eq!(r["count"], 1, "{r}");
    let again = summary(&mpagent(&data, &args));
    assert_eq!(again["messages_imported"], 0, "{again}");

    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = mpagent(
        &data,
        &[
            "history",
            "import-moviepilot",
            "--config-dir",
            empty.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no MoviePilot data"));
}
