//! Regression (issue 23, "per-user history stores are never closed"): the open stores are
//! bounded — beyond `max_open_stores` the least recently used idle one is closed, and one idle
//! for `store_idle_ttl` too — and a closed store reopens on its next use. "Closed" is observed
//! where it matters: the process holds no file descriptor of that user's database any more.
#![expect(clippy::unwrap_used, reason = "test assertions")]

use crate::common::{OutcomeExt, current, meta, msg, q, session_ids, user};
use mpa_history::{History, HistoryConfig, Role, SearchRequest};
use mpa_redact::UserKey;
use std::path::Path;
use std::time::Duration;

/// This process's open file descriptors on `db` (and its `-wal`/`-shm`).
fn open_fds(db: &Path) -> usize {
    let db = db.to_string_lossy().into_owned();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with(&db))
        .count()
}

fn hub(dir: &Path, max_open: usize, idle_ttl: Option<Duration>) -> History {
    let mut cfg = HistoryConfig::new(dir);
    cfg.background_backfill = false;
    cfg.max_open_stores = max_open;
    cfg.store_idle_ttl = idle_ttl;
    History::new(cfg)
}

async fn write(h: &History, u: &UserKey, text: &str) {
    h.append(u, meta("s", "web"), vec![msg(text, Role::User, text, 1.0)])
        .await
        .unwrap();
}

async fn find(h: &History, u: &UserKey, text: &str) -> Vec<String> {
    let r = h
        .search(u, &current(None), SearchRequest::Discover(q(text)))
        .await
        .unwrap();
    session_ids(&r.outcome.discover())
}

#[tokio::test]
async fn idle_per_user_stores_are_closed_least_recently_used_and_reopen_on_use() {
    let dir = tempfile::tempdir().unwrap();
    let h = hub(dir.path(), 2, None);
    let (a, b, c) = (user("lru-a"), user("lru-b"), user("lru-c"));
    write(&h, &a, "alpha").await;
    write(&h, &b, "bravo").await;
    // `a` is used again, so `b` is now the least recently used.
    assert_eq!(find(&h, &a, "alpha").await, vec!["s"]);
    write(&h, &c, "charlie").await;
    let stats = h.store_registry_stats();
    assert_eq!((stats.open, stats.closed), (2, 1), "{stats:?}");
    assert_eq!(open_fds(&h.db_path(&b)), 0, "b was closed");
    assert!(open_fds(&h.db_path(&a)) > 0 && open_fds(&h.db_path(&c)) > 0);

    // The closed store reopens on its next use, with everything it had.
    assert_eq!(find(&h, &b, "bravo").await, vec!["s"]);
    write(&h, &b, "bravo2").await;
    assert_eq!(find(&h, &b, "bravo2").await, vec!["s"]);
    let stats = h.store_registry_stats();
    assert_eq!((stats.open, stats.closed), (2, 2), "{stats:?}");
    assert_eq!(
        open_fds(&h.db_path(&a)),
        0,
        "a was the least recently used now"
    );
    assert!(open_fds(&h.db_path(&b)) > 0);
}

#[tokio::test]
async fn a_store_idle_past_its_ttl_is_closed_at_the_next_use_of_any_store() {
    let dir = tempfile::tempdir().unwrap();
    // Every store is idle as soon as its operation ends.
    let h = hub(dir.path(), 32, Some(Duration::ZERO));
    let (a, b) = (user("ttl-a"), user("ttl-b"));
    write(&h, &a, "alpha").await;
    assert!(open_fds(&h.db_path(&a)) > 0);
    write(&h, &b, "bravo").await;
    assert_eq!(open_fds(&h.db_path(&a)), 0, "a was idle: closed");
    assert_eq!(h.store_registry_stats().closed, 1);
    assert_eq!(find(&h, &a, "alpha").await, vec!["s"]);
    assert_eq!(open_fds(&h.db_path(&b)), 0, "b was idle: closed");
}
