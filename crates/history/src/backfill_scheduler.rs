//! Background maintenance tasks (spec §11.4): after an append or a search, a user whose store
//! has an index to build, or a complete id segment without ranking statistics, gets one task
//! that advances it batch by batch (index batches first, then one segment per index per
//! round), pausing `max(0.2 s, 4 × batch time)` between batches. At most one task per user and
//! [`crate::backfill::MAX_TASKS`] per process; all are cancelled at shutdown, between batches
//! (a batch is one transaction: it either commits with its progress or is not counted).

use crate::History;
use crate::backfill::{MAX_TASKS, pause_after};
use mpa_redact::UserKey;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a user's background backfill waits after a failed round before a new trigger may
/// start it again.
const RETRY_AFTER_FAILURE: std::time::Duration = std::time::Duration::from_secs(60);

pub(crate) struct BackfillScheduler {
    /// Users with a task (queued or running).
    users: Mutex<HashSet<UserKey>>,
    slots: Arc<Semaphore>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    /// Tasks holding a slot right now, and the most ever seen at once (for `stats`).
    running: AtomicUsize,
    peak: AtomicUsize,
}

/// Counters for tests and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerStats {
    /// Users with a queued or running task.
    pub scheduled: usize,
    /// Tasks running a backfill now (≤ `MAX_TASKS`).
    pub running: usize,
    /// The largest `running` ever observed.
    pub peak_running: usize,
}

impl BackfillScheduler {
    pub(crate) fn new() -> Self {
        Self {
            users: Mutex::new(HashSet::new()),
            slots: Arc::new(Semaphore::new(MAX_TASKS)),
            cancel: CancellationToken::new(),
            tracker: TaskTracker::new(),
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    pub(crate) fn stats(&self) -> SchedulerStats {
        SchedulerStats {
            scheduled: self.users.lock().map(|u| u.len()).unwrap_or(0),
            running: self.running.load(Ordering::Acquire),
            peak_running: self.peak.load(Ordering::Acquire),
        }
    }

    pub(crate) async fn shutdown(&self) {
        self.cancel.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// Releases the user's slot however the task ends (also when cancelled before it first ran).
struct Scheduled<'a> {
    m: &'a BackfillScheduler,
    user: UserKey,
}

impl Drop for Scheduled<'_> {
    fn drop(&mut self) {
        if let Ok(mut u) = self.m.users.lock() {
            u.remove(&self.user);
        }
    }
}

struct Running<'a>(&'a BackfillScheduler);

impl<'a> Running<'a> {
    fn enter(m: &'a BackfillScheduler) -> Self {
        let now = m.running.fetch_add(1, Ordering::AcqRel) + 1;
        m.peak.fetch_max(now, Ordering::AcqRel);
        Running(m)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Start a task for `user` if its store has backfill work and none is scheduled yet.
pub(crate) fn schedule(hub: &History, user: &UserKey) {
    let cfg = hub.config();
    if !cfg.background_backfill || hub.inner.maint.cancel.is_cancelled() {
        return;
    }
    let due = hub
        .inner
        .opened(user)
        .is_some_and(|store| store.maintenance_due());
    if !due {
        return;
    }
    {
        let Ok(mut users) = hub.inner.maint.users.lock() else {
            return;
        };
        if !users.insert(user.clone()) {
            return;
        }
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        if let Ok(mut users) = hub.inner.maint.users.lock() {
            users.remove(user);
        }
        return;
    };
    let tracker = hub.inner.maint.tracker.clone();
    let hub = hub.clone();
    let user = user.clone();
    let task = async move {
        let m = &hub.inner.maint;
        let scheduled = Scheduled {
            m,
            user: user.clone(),
        };
        let permit = tokio::select! {
            p = m.slots.clone().acquire_owned() => p,
            _ = m.cancel.cancelled() => return,
        };
        let Ok(_permit) = permit else { return };
        let running = Running::enter(m);
        let batch = hub.config().backfill_batch;
        let mut failed = false;
        loop {
            if m.cancel.is_cancelled() {
                break;
            }
            let backfill = hub
                .inner
                .opened(&user)
                .is_some_and(|store| store.backfill_due());
            // Index batches first; then the ranking statistics of complete segments.
            let round = if backfill {
                hub.run(&user, move |s| s.backfill_round(batch))
                    .await
                    .map(|(report, took)| (report.pending, took))
            } else {
                hub.run(&user, |s| s.rank_round())
                    .await
                    .map(|(written, pending, took)| (written > 0 && pending, took))
            };
            match round {
                Ok((true, took)) => {
                    tokio::select! {
                        _ = tokio::time::sleep(pause_after(took)) => {}
                        _ = m.cancel.cancelled() => break,
                    }
                }
                Ok((false, _)) if backfill => {}
                Ok((false, _)) => break,
                Err(e) => {
                    // The markers survive, so a later trigger resumes where this one stopped.
                    tracing::warn!(error = %e, "history backfill stopped; retrying in a minute");
                    if let Some(store) = hub.inner.opened(&user) {
                        store.backfill_failed(RETRY_AFTER_FAILURE);
                    }
                    failed = true;
                    break;
                }
            }
        }
        drop(running);
        drop(scheduled);
        // A detach may have happened after the last round: pick it up.
        if !failed && !m.cancel.is_cancelled() {
            schedule(&hub, &user);
        }
    };
    tracker.spawn_on(task, &rt);
}
