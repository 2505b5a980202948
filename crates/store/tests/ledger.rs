//! The invocation ledger on a real SQLite file: claim once per identity, finish only with the
//! claim token, cold start turns running rows unknown under a fresh token, retention never drops
//! open rows, and parallel claims neither lose nor duplicate a row.

use mpa_store::{Claim, LedgerKey, LedgerStatus, Store};

fn key(invocation: &str, digest: &str) -> LedgerKey {
    LedgerKey {
        principal_id: "u1".into(),
        session_id: "s1".into(),
        invocation_id: invocation.into(),
        tool_name: "moviepilot_api".into(),
        arguments_digest: digest.into(),
    }
}

#[tokio::test]
async fn one_claim_per_identity_and_finish_needs_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let Claim::Acquired { id, claim_token } = store.ledger_claim(key("i1", "d1")).await.unwrap()
    else {
        panic!("first claim acquires")
    };
    let Claim::Existing(rec) = store.ledger_claim(key("i1", "d1")).await.unwrap() else {
        panic!("second claim finds the row")
    };
    assert_eq!(rec.id, id);
    assert_eq!(rec.status, LedgerStatus::Running);
    assert_eq!(rec.summary, "write started, awaiting result");
    assert!(
        !store
            .ledger_finish(id, "not-the-token", LedgerStatus::Succeeded)
            .await
            .unwrap()
    );
    assert!(
        store
            .ledger_finish(id, &claim_token, LedgerStatus::Unknown)
            .await
            .unwrap()
    );
    // An unknown row can still be finished by its token (a late result), a resolved one cannot.
    assert!(
        store
            .ledger_finish(id, &claim_token, LedgerStatus::Succeeded)
            .await
            .unwrap()
    );
    assert!(
        !store
            .ledger_finish(id, &claim_token, LedgerStatus::Failed)
            .await
            .unwrap()
    );
    let rec = store.ledger_get("u1", "s1", "i1").await.unwrap().unwrap();
    assert_eq!(rec.status, LedgerStatus::Succeeded);
    // Other users and sessions never see it.
    assert!(store.ledger_get("u2", "s1", "i1").await.unwrap().is_none());
    assert!(store.ledger_get("u1", "s2", "i1").await.unwrap().is_none());
    // Bad identities are refused before anything is written.
    let mut bad = key("", "d");
    assert!(store.ledger_claim(bad.clone()).await.is_err());
    bad.invocation_id = "x".into();
    bad.tool_name = "no spaces".into();
    assert!(store.ledger_claim(bad).await.is_err());
}

#[tokio::test]
async fn unresolved_rows_are_found_by_tool_and_digest() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    store.ledger_claim(key("i1", "d1")).await.unwrap();
    let found = store
        .ledger_unresolved("u1", "s1", "moviepilot_api", "d1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.invocation_id, "i1");
    assert!(
        store
            .ledger_unresolved("u1", "s1", "moviepilot_api", "other")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .ledger_unresolved("u1", "s1", "execute_command", "d1")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn cold_start_turns_running_rows_unknown_so_old_executors_cannot_finish_them() {
    let dir = tempfile::tempdir().unwrap();
    let (id, token) = {
        let store = Store::open_in(dir.path()).unwrap();
        let Claim::Acquired { id, claim_token } =
            store.ledger_claim(key("i1", "d1")).await.unwrap()
        else {
            panic!()
        };
        let Claim::Acquired {
            id: done,
            claim_token: t2,
        } = store.ledger_claim(key("i2", "d2")).await.unwrap()
        else {
            panic!()
        };
        store
            .ledger_finish(done, &t2, LedgerStatus::Succeeded)
            .await
            .unwrap();
        (id, claim_token)
    };
    let store = Store::open_in(dir.path()).unwrap();
    assert_eq!(store.ledger_recover_running().await.unwrap(), 1);
    let rec = store.ledger_get("u1", "s1", "i1").await.unwrap().unwrap();
    assert_eq!(rec.status, LedgerStatus::Unknown);
    assert_ne!(rec.claim_token, token);
    assert!(
        !store
            .ledger_finish(id, &token, LedgerStatus::Succeeded)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .ledger_get("u1", "s1", "i2")
            .await
            .unwrap()
            .unwrap()
            .status,
        LedgerStatus::Succeeded
    );
}

#[tokio::test]
async fn deleting_a_session_and_retention_keep_open_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    store.ledger_claim(key("open", "d1")).await.unwrap();
    let Claim::Acquired { id, claim_token } = store.ledger_claim(key("done", "d2")).await.unwrap()
    else {
        panic!()
    };
    store
        .ledger_finish(id, &claim_token, LedgerStatus::Failed)
        .await
        .unwrap();
    let future = chrono::Utc::now() + chrono::Duration::days(1);
    assert_eq!(store.ledger_cleanup(future).await.unwrap(), 1);
    assert!(
        store
            .ledger_get("u1", "s1", "open")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .ledger_get("u1", "s1", "done")
            .await
            .unwrap()
            .is_none()
    );
    let Claim::Acquired { id, claim_token } = store.ledger_claim(key("done2", "d3")).await.unwrap()
    else {
        panic!()
    };
    store
        .ledger_finish(id, &claim_token, LedgerStatus::Pending)
        .await
        .unwrap();
    assert_eq!(store.ledger_delete_resolved("u1", "s1").await.unwrap(), 1);
    assert!(
        store
            .ledger_get("u1", "s1", "open")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_claims_from_many_sessions_lose_and_duplicate_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let mut tasks = Vec::new();
    for s in 0..100 {
        for i in 0..5 {
            // Every identity is claimed twice at once: exactly one claim acquires it.
            for _ in 0..2 {
                let store = store.clone();
                tasks.push(tokio::spawn(async move {
                    let mut k = key(&format!("i{i}"), "d");
                    k.session_id = format!("s{s}");
                    matches!(store.ledger_claim(k).await.unwrap(), Claim::Acquired { .. })
                }));
            }
        }
    }
    let mut acquired = 0;
    for t in tasks {
        acquired += usize::from(t.await.unwrap());
    }
    assert_eq!(acquired, 500);
    let conn = rusqlite::Connection::open(dir.path().join("agent.db")).unwrap();
    let rows: i64 = conn
        .query_row("SELECT COUNT(*) FROM agent_invocations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 500);
    // The status CHECK refuses anything else.
    assert!(
        conn.execute(
            "UPDATE agent_invocations SET status = 'done' WHERE id = 1",
            []
        )
        .is_err()
    );
}

#[tokio::test]
async fn open_rows_of_a_session_are_listed_newest_first_and_only_for_that_user() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let mut ids = Vec::new();
    for (inv, principal, session) in [
        ("a", "u1", "s1"),
        ("b", "u1", "s1"),
        ("c", "u1", "s1"),
        ("other-user", "u2", "s1"),
        ("other-session", "u1", "s2"),
    ] {
        let mut k = key(inv, "d");
        k.principal_id = principal.into();
        k.session_id = session.into();
        let Claim::Acquired { id, claim_token } = store.ledger_claim(k).await.unwrap() else {
            panic!()
        };
        ids.push((id, claim_token));
    }
    // a: unknown, b: succeeded (resolved, not listed), c: still running.
    store
        .ledger_finish(ids[0].0, &ids[0].1, LedgerStatus::Unknown)
        .await
        .unwrap();
    store
        .ledger_finish(ids[1].0, &ids[1].1, LedgerStatus::Succeeded)
        .await
        .unwrap();
    let open = store.ledger_open_in_session("u1", "s1", 10).await.unwrap();
    let listed: Vec<(&str, LedgerStatus)> = open
        .iter()
        .map(|r| (r.invocation_id.as_str(), r.status))
        .collect();
    assert_eq!(
        listed,
        [("c", LedgerStatus::Running), ("a", LedgerStatus::Unknown)]
    );
    assert_eq!(
        store
            .ledger_open_in_session("u1", "s1", 1)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        store
            .ledger_open_in_session("u3", "s1", 10)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hundred_sessions_claiming_and_finishing_at_once_leave_exactly_one_finished_row_each() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let mut tasks = Vec::new();
    for s in 0..100 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut finished = 0;
            for i in 0..10 {
                let mut k = key(&format!("w{i}"), &format!("d{i}"));
                k.session_id = format!("s{s}");
                // A racing duplicate of the same write: one of the two claims acquires it.
                let (a, b) = tokio::join!(store.ledger_claim(k.clone()), store.ledger_claim(k));
                for claim in [a.unwrap(), b.unwrap()] {
                    if let Claim::Acquired { id, claim_token } = claim {
                        assert!(
                            store
                                .ledger_finish(id, &claim_token, LedgerStatus::Succeeded)
                                .await
                                .unwrap()
                        );
                        finished += 1;
                    }
                }
            }
            finished
        }));
    }
    let mut finished = 0;
    for t in tasks {
        finished += t.await.unwrap();
    }
    assert_eq!(finished, 1000, "every write acquired exactly once");
    let conn = rusqlite::Connection::open(dir.path().join("agent.db")).unwrap();
    let (rows, succeeded, distinct): (i64, i64, i64) = conn
        .query_row(
            "SELECT COUNT(*), SUM(status = 'succeeded'), \
             COUNT(DISTINCT session_id || '/' || invocation_id) FROM agent_invocations",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((rows, succeeded, distinct), (1000, 1000, 1000));
}
