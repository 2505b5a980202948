//! Regressions for issue 24, "session_search outruns its deadline": a stored message of 3,000
//! repeated words and a query naming that word in an OR of 7 terms burned 1.8 s of CPU, of 21
//! terms 26.7 s, of 201 terms hours — in FTS5's `snippet()` and the ranking, where SQLite's
//! progress handler (the deadline) never looked — and kept a core busy after the tool had given
//! up. Each test answers within the deadline and then checks that the threads of its own
//! runtime stop using CPU (measured over a short window from /proc: it asserts that the work
//! stopped, not how fast it ran).
#![expect(clippy::unwrap_used, reason = "test assertions")]

use crate::common::{current, meta, msg, q, session_ids, sorted, user};
use mpa_history::recall::{DiscoverRequest, SearchOutcome};
use mpa_history::{FailureClass, History, HistoryConfig, HistoryError, Role, SearchRequest};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(3);
/// Slack on top of the deadline for a loaded machine; the old code needed minutes to hours.
const GRACE: Duration = Duration::from_secs(20);

/// CPU ticks (user + system) used so far by this process's threads named `name`.
fn cpu_ticks_of_threads(name: &str) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // After the parenthesised command: state is field 3, utime 14, stime 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        if fields.len() > 12 {
            total +=
                fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0);
        }
    }
    total
}

/// A runtime whose worker and blocking threads are all named `name` (at most 15 bytes: the
/// kernel's limit), so their CPU can be told apart from other tests in this binary. Dropped
/// without waiting for blocking work (the old code's would never end, also after a failed
/// assertion).
struct NamedRuntime(Option<tokio::runtime::Runtime>);

impl NamedRuntime {
    fn new(name: &str) -> Self {
        assert!(name.len() <= 15);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(name)
            .enable_all()
            .build()
            .unwrap();
        Self(Some(rt))
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.0.as_ref().unwrap().block_on(f)
    }
}

impl Drop for NamedRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// After the answer was delivered, the runtime's threads stay (nearly) idle over a window: a
/// search still running would use the window's worth of CPU on a core, tens of ticks.
fn assert_no_cpu_after_the_answer(name: &str) {
    const WINDOW: Duration = Duration::from_secs(1);
    let before = cpu_ticks_of_threads(name);
    std::thread::sleep(WINDOW);
    let used = cpu_ticks_of_threads(name) - before;
    assert!(
        used <= 5,
        "threads of {name} used {used} ticks in the second after the answer: work kept running"
    );
}

/// A store holding the 3,000-word message (and a short session) for one user.
async fn store(dir: &std::path::Path) -> (History, mpa_redact::UserKey) {
    let mut cfg = HistoryConfig::new(dir);
    cfg.background_backfill = false;
    cfg.query_deadline = DEADLINE;
    let h = History::new(cfg);
    let u = user("repeats");
    let words = vec!["a"; 3000].join(" ");
    h.append(
        &u,
        meta("many", "web"),
        vec![msg("m0", Role::User, &words, 1.0)],
    )
    .await
    .unwrap();
    h.append(
        &u,
        meta("other", "web"),
        vec![msg("m1", Role::User, "a short one", 2.0)],
    )
    .await
    .unwrap();
    (h, u)
}

/// Runs one discover on a runtime named `name`, bounded by the deadline plus slack (the old
/// code never answered in time); returns the answer.
fn discover_on(name: &str, query: String) -> mpa_history::Result<SearchOutcome> {
    let rt = NamedRuntime::new(name);
    let out = rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (h, u) = store(dir.path()).await;
        let started = Instant::now();
        let req = SearchRequest::Discover(DiscoverRequest {
            limit: 3,
            ..q(&query)
        });
        let answer = tokio::time::timeout(DEADLINE + GRACE, h.search(&u, &current(None), req))
            .await
            .unwrap_or_else(|_| panic!("no answer within the deadline ({name})"));
        assert!(started.elapsed() < DEADLINE + GRACE);
        answer.map(|r| r.outcome)
    });
    assert_no_cpu_after_the_answer(name);
    drop(rt);
    out
}

#[test]
fn session_search_outruns_its_deadline_201_or_terms_are_query_too_complex() {
    let query = vec!["a"; 201].join(" OR ");
    let err = discover_on("hist-deadline-a", query).unwrap_err();
    assert!(
        matches!(
            err,
            HistoryError::QueryTooComplex {
                terms: 201,
                operators: 200,
                max: mpa_history::MAX_QUERY_TERMS
            }
        ),
        "{err}"
    );
    assert_eq!(err.classify(), FailureClass::TooComplex);
}

#[test]
fn session_search_outruns_its_deadline_64_or_terms_over_3000_repeats_answer_in_time() {
    // The most terms a query may have, each occurring 3,000 times in one message: 192,000
    // occurrences, which FTS5's snippet() would compare pairwise.
    let query = vec!["a"; mpa_history::MAX_QUERY_TERMS].join(" OR ");
    let SearchOutcome::Discover(d) = discover_on("hist-deadline-b", query).unwrap() else {
        panic!("not a discover")
    };
    assert_eq!(sorted(session_ids(&d)), vec!["many", "other"], "{d:?}");
    let snippet = |sid: &str| match &d.hits.iter().find(|h| h.session_id == sid).unwrap().snippet {
        mpa_history::recall::Snippet::Text(t) => t.clone(),
        other => panic!("{other:?}"),
    };
    // The plain snippet around the first match instead of snippet()'s window.
    assert!(snippet("many").starts_with("a a a"), "{}", snippet("many"));
    // A row with few matches keeps FTS5's highlighted snippet.
    assert_eq!(snippet("other"), ">>>a<<< short one");
}
