//! Invocation-ledger costs (issue 14). Targets: claim + finish per write ≤ 1 ms p50 on a real
//! WAL database file; 100 sessions claiming writes at once lose and duplicate nothing (checked
//! after every batch).
//! Run: `cargo bench -p mpa-store --bench ledger`.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use divan::Bencher;
use mpa_store::{Claim, LedgerKey, LedgerStatus, Store};
use std::sync::atomic::{AtomicU64, Ordering};

fn main() {
    divan::main();
}

static NEXT: AtomicU64 = AtomicU64::new(0);

fn key(session: &str) -> LedgerKey {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    LedgerKey {
        principal_id: "4f0c2b8e9d7a4e1f8a3b6c5d2e1f0a9b".into(),
        session_id: session.into(),
        invocation_id: format!("{n:064x}"),
        tool_name: "moviepilot_api".into(),
        arguments_digest: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn claim_and_finish(store: &Store, session: &str) {
    let Claim::Acquired { id, claim_token } = store.ledger_claim(key(session)).await.unwrap()
    else {
        panic!("a fresh identity is acquired");
    };
    assert!(
        store
            .ledger_finish(id, &claim_token, LedgerStatus::Succeeded)
            .await
            .unwrap()
    );
}

/// One write's ledger overhead: the committed claim, then the conditional finish.
#[divan::bench(sample_count = 2000)]
fn claim_plus_finish(b: Bencher) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let rt = runtime();
    b.bench_local(|| rt.block_on(claim_and_finish(&store, "bench-session")));
}

/// 100 sessions, each claiming and finishing one write at the same time; the row count is
/// checked after every batch (zero lost, zero duplicated).
#[divan::bench(sample_count = 50)]
fn hundred_concurrent_sessions(b: Bencher) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let rt = runtime();
    let conn = rusqlite::Connection::open(dir.path().join("agent.db")).unwrap();
    let mut batches = 0i64;
    b.bench_local(|| {
        rt.block_on(async {
            let tasks: Vec<_> = (0..100)
                .map(|s| {
                    let store = store.clone();
                    tokio::spawn(async move { claim_and_finish(&store, &format!("s{s}")).await })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
        batches += 1;
        let (rows, distinct): (i64, i64) = conn
            .query_row(
                "SELECT COUNT(*), COUNT(DISTINCT invocation_id) FROM agent_invocations \
                 WHERE status = 'succeeded'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((rows, distinct), (batches * 100, batches * 100));
    });
}

/// The recovery snapshot written after every step of a turn: one chat upsert of a conversation
/// of `n` messages (user, assistant with a tool call, ~1.5 KB tool result, repeated).
#[divan::bench(args = [30, 150], sample_count = 200)]
fn chat_snapshot_per_step(b: Bencher, n: usize) {
    use mpa_protocol::{Message, Outcome, ToolCall};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let rt = runtime();
    let user = rt.block_on(store.ensure_local_user("kim")).unwrap();
    let result = serde_json::json!({"success": true, "data": (0..12).map(|i| serde_json::json!({
        "id": i, "title": "三体 The Three-Body Problem S01E0", "state": "downloading", "progress": 0.42}))
        .collect::<Vec<_>>()})
    .to_string();
    let messages: Vec<Message> = (0..n)
        .map(|i| match i % 3 {
            0 => Message::user("看看下载队列里还有什么"),
            1 => Message::assistant(
                "",
                vec![ToolCall {
                    id: format!("call_{i}"),
                    name: "moviepilot_api".into(),
                    arguments: r#"{"operation_id":"download.list"}"#.into(),
                }],
            ),
            _ => Message::tool(
                format!("call_{}", i - 1),
                "moviepilot_api",
                &*result,
                Outcome::Succeeded,
            ),
        })
        .collect();
    let display = serde_json::to_value(&messages).unwrap();
    b.bench_local(|| {
        rt.block_on(store.save_chat(mpa_store::Chat {
            session_id: "bench".into(),
            user_id: user.id.clone(),
            channel: "web".into(),
            title: "下载队列".into(),
            agent_messages: messages.clone(),
            display_messages: display.clone(),
            message_count: n as i64,
            session_state: serde_json::json!({}),
            turn_status: None,
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        }))
        .unwrap()
    });
}
