//! Schema migrations against real database files.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_protocol::UserId;
use mpa_store::migrations::MIGRATIONS;
use mpa_store::{SCHEMA_VERSION, Store, StoreError};
use rusqlite::Connection;

/// A version-1 database file with one user, one live token and one chat, written the way the
/// version-1 binary wrote them (WAL mode, RFC 3339 timestamps, JSON columns).
fn write_v1_database(path: &std::path::Path) {
    let c = Connection::open(path).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.execute_batch(&format!(
        "BEGIN; {} PRAGMA user_version = 1; COMMIT;",
        MIGRATIONS[0]
    ))
    .unwrap();
    c.execute_batch(
        r#"
        INSERT INTO users VALUES ('u1', 'alice', 1, '$argon2id$v=19$m=19456,t=2,p=1$x$y',
                                  '2025-01-02T03:04:05.000006Z');
        INSERT INTO auth_tokens VALUES ('tokenhash', 'u1', '2025-01-02T03:04:05.000006Z',
                                        '2999-01-01T00:00:00+00:00');
        INSERT INTO chats VALUES ('s1', 'u1', 'web', 'Hello',
            '[{"role":"user","content":"hello"}]',
            '[{"role":"user","content":"hello"}]', 1,
            '2025-01-02T03:04:05+00:00', '2025-01-02T03:05:00+00:00');
        "#,
    )
    .unwrap();
}

fn user_version(path: &std::path::Path) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_version_1_database_is_migrated_in_place_and_keeps_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    write_v1_database(&path);
    assert_eq!(user_version(&path), 1);

    let store = Store::open(&path).unwrap();
    assert_eq!(SCHEMA_VERSION, 6);
    assert_eq!(user_version(&path), 6);

    // The old chat reads back whole, with an empty session state.
    let chat = store.chat("s1").await.unwrap().unwrap();
    assert_eq!(chat.user_id, UserId("u1".into()));
    assert_eq!(chat.title, "Hello");
    assert_eq!(chat.agent_messages.len(), 1);
    assert_eq!(chat.agent_messages[0].text(), "hello");
    assert_eq!(chat.message_count, 1);
    assert_eq!(chat.session_state, serde_json::json!({}));
    // No turn ended under this version: no status, in the chat and its list row.
    assert_eq!(chat.turn_status, None);
    assert_eq!(
        store.list_chats(None, 1, 10).await.unwrap()[0].turn_status,
        None
    );
    // Users and tokens are untouched.
    let alice = store.token_user("tokenhash".into()).await.unwrap().unwrap();
    assert_eq!((alice.name.as_str(), alice.is_admin), ("alice", true));
    assert!(alice.password_hash.is_some());

    // The new column is written and read like every other.
    let mut next = chat.clone();
    next.session_state = serde_json::json!({"frozen_memory": "m", "turns_since_review": 2});
    next.turn_status = Some(mpa_protocol::TurnStatus::Waiting);
    store.save_chat(next.clone()).await.unwrap();
    drop(store);

    // Opening again migrates nothing and loses nothing.
    let store = Store::open(&path).unwrap();
    assert_eq!(user_version(&path), 6);
    let again = store.chat("s1").await.unwrap().unwrap();
    assert_eq!(again.session_state, next.session_state);
    assert_eq!(again.turn_status, Some(mpa_protocol::TurnStatus::Waiting));
    assert_eq!(
        store.list_chats(None, 1, 10).await.unwrap()[0].turn_status,
        Some(mpa_protocol::TurnStatus::Waiting)
    );
    // A status this version does not know reads as none, never as an error.
    Connection::open(&path)
        .unwrap()
        .execute("UPDATE chats SET turn_status = 'paused_by_future'", [])
        .unwrap();
    assert_eq!(store.chat("s1").await.unwrap().unwrap().turn_status, None);
}

#[tokio::test]
async fn a_new_database_starts_at_the_current_version() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    assert_eq!(user_version(store.path()), SCHEMA_VERSION);
}

#[test]
fn newer_schema_is_refused_and_untouched() {
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

#[test]
fn a_failing_migration_leaves_the_database_at_its_old_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    write_v1_database(&path);
    // A table in the way of migration 3: migrations 2–4 run in one transaction, so the
    // column migration 2 adds must not be left behind either.
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE agent_invocations (x);")
        .unwrap();
    assert!(matches!(Store::open(&path), Err(StoreError::Sqlite(_))));
    assert_eq!(user_version(&path), 1);
    let columns: Vec<String> = Connection::open(&path)
        .unwrap()
        .prepare("SELECT name FROM pragma_table_info('chats')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(!columns.iter().any(|c| c == "session_state"), "{columns:?}");
}
