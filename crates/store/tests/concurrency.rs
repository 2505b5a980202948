//! The connections under load: reads beside a long write, short writes before a waiting
//! snapshot, a snapshot never starved, a failing write alone.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use chrono::Utc;
use mpa_protocol::UserId;
use mpa_store::{Chat, Result, Store, StoreError};
use std::time::Duration;

/// Queues a write on the writer that opens a transaction, inserts a token for `user`, and
/// holds the writer until `release` is sent — a long snapshot being written. Returns once
/// the transaction is open.
async fn hold_the_writer(
    store: &Store,
    user: &UserId,
    token: &str,
) -> (
    std::sync::mpsc::Sender<()>,
    tokio::task::JoinHandle<Result<()>>,
) {
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();
    let (uid, token) = (user.0.clone(), token.to_owned());
    let later = (Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let held = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .run(move |conn| {
                    let tx = conn.transaction()?;
                    tx.execute(
                        "INSERT INTO auth_tokens (token_hash, user_id, created_at, expires_at)
                         VALUES (?1, ?2, ?3, ?4)",
                        rusqlite::params![token, uid, Utc::now().to_rfc3339(), later],
                    )?;
                    let _ = started_tx.send(());
                    let _ = release_rx.recv();
                    tx.commit()?;
                    Ok(())
                })
                .await
        }
    });
    started.await.unwrap();
    (release, held)
}

/// Issue 23: every checkpoint, ledger claim and token lookup waited on one connection, so a
/// long chat snapshot held up every login behind it. Here the writer is held inside an open
/// write transaction (a snapshot being written); reads — the token lookup, the user, the chat
/// list, the chat — complete meanwhile and see only what was committed; a write queued
/// behind the transaction runs once it commits.
#[tokio::test(flavor = "multi_thread")]
async fn a_slow_checkpoint_does_not_block_a_token_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let user = store.ensure_local_user("erin").await.unwrap();
    let later = Utc::now() + chrono::Duration::hours(1);
    store
        .insert_token("t1".into(), &user.id, later)
        .await
        .unwrap();

    let (release, checkpoint) = hold_the_writer(&store, &user.id, "t2").await;
    let queued = tokio::spawn({
        let store = store.clone();
        let id = user.id.clone();
        async move { store.insert_token("t3".into(), &id, later).await }
    });

    // A deadlock guard, not a timing assertion: on one shared connection these never return.
    let guard = Duration::from_secs(60);
    let reads = async {
        let owner = store.token_user("t1".into()).await.unwrap();
        assert_eq!(owner.map(|u| u.id), Some(user.id.clone()));
        assert_eq!(store.token_user("t2".into()).await.unwrap(), None);
        assert_eq!(
            store.user_by_name("erin").await.unwrap().map(|u| u.id),
            Some(user.id.clone())
        );
        assert!(store.list_chats(None, 1, 20).await.unwrap().is_empty());
        assert!(store.chat("none").await.unwrap().is_none());
    };
    tokio::time::timeout(guard, reads)
        .await
        .expect("reads waited for the writer");
    assert!(!queued.is_finished(), "a write ran beside the open one");

    release.send(()).unwrap();
    checkpoint.await.unwrap().unwrap();
    queued.await.unwrap().unwrap();
    for t in ["t2", "t3"] {
        let owner = store.token_user(t.into()).await.unwrap();
        assert_eq!(owner.map(|u| u.id), Some(user.id.clone()), "{t}");
    }
}

/// Makes the writer log what it writes, in order (temporary: its connection only).
async fn log_writes(store: &Store) {
    store
        .run(|c| {
            c.execute_batch(
                "CREATE TEMP TABLE written (what TEXT);
                 CREATE TEMP TRIGGER token_written AFTER INSERT ON auth_tokens
                     BEGIN INSERT INTO written VALUES ('token'); END;
                 CREATE TEMP TRIGGER chat_written AFTER INSERT ON chats
                     BEGIN INSERT INTO written VALUES ('chat'); END;",
            )?;
            Ok(())
        })
        .await
        .unwrap();
}

async fn written(store: &Store) -> Vec<String> {
    store
        .run(|c| {
            let mut stmt = c.prepare("SELECT what FROM written ORDER BY rowid")?;
            let rows = stmt
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
        .await
        .unwrap()
}

fn snapshot_of(owner: &UserId) -> Chat {
    Chat {
        session_id: "s1".into(),
        user_id: owner.clone(),
        channel: "web".into(),
        title: "t".into(),
        agent_messages: vec![mpa_protocol::Message::user("hi")],
        display_messages: serde_json::json!([]),
        message_count: 1,
        session_state: serde_json::json!({}),
        turn_status: None,
        created_at: Utc::now(),
        updated_at: Utc::now(),
    }
}

/// Holds the writer (see [`hold_the_writer`]) and queues a chat snapshot behind it.
async fn snapshot_behind_a_held_writer(
    store: &Store,
    user: &UserId,
) -> (
    std::sync::mpsc::Sender<()>,
    tokio::task::JoinHandle<Result<()>>,
    tokio::task::JoinHandle<Result<()>>,
) {
    let (release, running) = hold_the_writer(store, user, "t0").await;
    let snapshot = tokio::spawn({
        let store = store.clone();
        let chat = snapshot_of(user);
        async move { store.save_chat(chat).await }
    });
    queued(store, 1).await;
    (release, running, snapshot)
}

/// Waits until `n` writes are queued behind the one running.
async fn queued(store: &Store, n: usize) {
    while store.queued_writes() < n {
        tokio::task::yield_now().await;
    }
}

/// A login's token write queued after a chat snapshot, both waiting for the writer, goes
/// first: it waits for the write running now, never for the snapshot too.
#[tokio::test(flavor = "multi_thread")]
async fn a_queued_chat_snapshot_lets_a_waiting_login_write_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let user = store.ensure_local_user("gus").await.unwrap();
    log_writes(&store).await;

    let (release, running, snapshot) = snapshot_behind_a_held_writer(&store, &user.id).await;
    let login = tokio::spawn({
        let store = store.clone();
        let id = user.id.clone();
        let later = Utc::now() + chrono::Duration::hours(1);
        async move { store.insert_token("t1".into(), &id, later).await }
    });
    queued(&store, 2).await;
    release.send(()).unwrap();
    running.await.unwrap().unwrap();
    login.await.unwrap().unwrap();
    snapshot.await.unwrap().unwrap();
    assert_eq!(written(&store).await, ["token", "token", "chat"]);
}

/// Short writes go before a waiting snapshot, but at most 64 in a row: a stream of them
/// cannot starve it.
#[tokio::test(flavor = "multi_thread")]
async fn a_stream_of_short_writes_cannot_starve_a_chat_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let user = store.ensure_local_user("ida").await.unwrap();
    log_writes(&store).await;
    let (release, running, snapshot) = snapshot_behind_a_held_writer(&store, &user.id).await;
    let later = Utc::now() + chrono::Duration::hours(1);
    let logins: Vec<_> = (1..=100)
        .map(|i| {
            let (store, id) = (store.clone(), user.id.clone());
            tokio::spawn(async move { store.insert_token(format!("t{i}"), &id, later).await })
        })
        .collect();
    queued(&store, 101).await;
    release.send(()).unwrap();
    running.await.unwrap().unwrap();
    for l in logins {
        l.await.unwrap().unwrap();
    }
    snapshot.await.unwrap().unwrap();
    let order = written(&store).await;
    // The held write's token, then 64 short writes, the snapshot, the other 36.
    assert_eq!(order.len(), 102);
    assert_eq!(order.iter().position(|w| w == "chat"), Some(65));
}

/// A write that panics fails alone: its caller gets an error, its open transaction is rolled
/// back, the writer goes on.
#[tokio::test]
async fn a_panicking_write_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let failed = store
        .run(|c| -> Result<()> {
            c.execute_batch("BEGIN")?;
            panic!("a bug in a write");
        })
        .await;
    assert!(matches!(failed, Err(StoreError::Worker(_))), "{failed:?}");
    // Its transaction did not swallow the next write: a reader sees it committed.
    store.ensure_local_user("hal").await.unwrap();
    assert!(store.user_by_name("hal").await.unwrap().is_some());
}

#[tokio::test]
async fn read_connections_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    store.ensure_local_user("fay").await.unwrap();
    let refused = store
        .read(|c| Ok(c.execute("DELETE FROM users", [])?))
        .await;
    assert!(matches!(refused, Err(StoreError::Sqlite(_))), "{refused:?}");
    assert_eq!(store.list_users().await.unwrap().len(), 1);
}
