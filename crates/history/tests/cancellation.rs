//! A blocking read stops as soon as nobody waits for it: the caller's cancellation token, the
//! caller's future being dropped (a tool timeout, a stopped turn) and a shutdown each stop a
//! statement that would otherwise never end. Regressions for issue 24 ("session_search outruns
//! its deadline": the tool timeout did not cancel blocking work, and a search kept a core busy
//! after its result was delivered).
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_history::budget::Budget;
use mpa_history::error::HistoryError;
use mpa_history::{CapturedMessage, History, HistoryConfig, Provenance, Role, SessionMeta};
use mpa_protocol::UserId;
use mpa_redact::UserKey;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A statement that never ends by itself.
const ENDLESS: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                       SELECT count(*) FROM c";

async fn hub(dir: &std::path::Path) -> (History, UserKey) {
    let mut cfg = HistoryConfig::new(dir);
    cfg.background_backfill = false;
    // Far beyond the test: only the stop flag can end the statement.
    cfg.query_deadline = Duration::from_secs(3600);
    cfg.blocking_permits = 2;
    let h = History::new(cfg);
    let u = UserKey::for_user(&UserId("stopper".into()));
    let m = CapturedMessage {
        message_uid: "m".into(),
        role: Role::User,
        content: "hello".into(),
        tool_name: None,
        tool_call_id: None,
        tool_calls: None,
        ts: None,
        provenance: Provenance::Observed,
    };
    let meta = SessionMeta {
        session_id: "s".into(),
        ..Default::default()
    };
    h.append(&u, meta, vec![m]).await.unwrap();
    (h, u)
}

/// Runs the endless statement the way a search runs its reads.
async fn endless(
    h: &History,
    u: &UserKey,
    cancel: Option<&CancellationToken>,
) -> mpa_history::Result<i64> {
    let deadline = h.config().query_deadline;
    h.run_until(u, cancel, move |s, stop| {
        let budget = Budget::new(deadline, Some(stop.clone()));
        s.read_within(&budget, |c| Ok(c.query_row(ENDLESS, [], |r| r.get(0))?))
    })
    .await
}

/// Waits (polling, with a deadline) until every blocking permit is free again: the blocking
/// work has really ended, not just the caller.
async fn wait_idle(h: &History) {
    let all = h.config().blocking_permits;
    assert!(
        mpa_test_support::eventually(Duration::from_secs(60), || h.free_blocking_permits() == all)
            .await,
        "the blocking read kept running"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn session_search_outruns_its_deadline_a_cancelled_call_stops_its_statement() {
    let dir = tempfile::tempdir().unwrap();
    let (h, u) = hub(dir.path()).await;
    let token = CancellationToken::new();
    let cancel = token.clone();
    let canceller = tokio::spawn(async move { cancel.cancel() });
    let err = endless(&h, &u, Some(&token)).await.unwrap_err();
    assert!(matches!(err, HistoryError::Cancelled), "{err}");
    canceller.await.unwrap();
    wait_idle(&h).await;
    // The store is fine afterwards.
    assert_eq!(h.status(&u).await.unwrap().messages, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn session_search_outruns_its_deadline_a_dropped_call_stops_its_statement() {
    let dir = tempfile::tempdir().unwrap();
    let (h, u) = hub(dir.path()).await;
    // What a tool timeout does to the call: stop polling it and drop it.
    let gave_up = tokio::time::timeout(Duration::from_millis(1), endless(&h, &u, None)).await;
    assert!(
        gave_up.is_err(),
        "the endless statement cannot have answered"
    );
    wait_idle(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn session_search_outruns_its_deadline_shutdown_stops_running_statements_only() {
    let dir = tempfile::tempdir().unwrap();
    let (h, u) = hub(dir.path()).await;
    let running = {
        let (h, u) = (h.clone(), u.clone());
        tokio::spawn(async move { endless(&h, &u, None).await })
    };
    // Once the statement holds its permit, shut down.
    let all = h.config().blocking_permits;
    assert!(
        mpa_test_support::eventually(Duration::from_secs(60), || h.free_blocking_permits() < all)
            .await,
        "the read never started"
    );
    h.shutdown().await;
    let err = running.await.unwrap().unwrap_err();
    assert!(matches!(err, HistoryError::Cancelled), "{err}");
    wait_idle(&h).await;
    // Calls made after the shutdown run as usual.
    assert_eq!(h.status(&u).await.unwrap().messages, 1);
}
