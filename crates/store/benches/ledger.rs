//! Invocation-ledger costs (issue 14). Targets: claim + finish per write ≤ 1 ms p50 on a real
//! WAL database file; 100 sessions claiming writes at once lose and duplicate nothing (checked
//! after every batch).
//! Run: `cargo bench -p mpa-store --bench ledger`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

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
