//! The one writer. SQLite lets one connection write a file at a time, so a single thread owns
//! the write connection and runs writes back to back: short writes (a login's token, a ledger
//! claim) before the chat snapshots waiting with them, so a short write waits at most for the
//! write already running — a snapshot of a long chat holds the writer for tens of
//! milliseconds. A waiting snapshot goes after at most [`SHORT_STREAK`] short writes, so a
//! stream of them cannot starve it. Callers wait for their answer asynchronously; a write
//! whose caller gave up still runs to its end.

use crate::{Result, StoreError};
use rusqlite::Connection;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// Which queue a write waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Short,
    /// A whole chat snapshot: waits while short writes are queued.
    Snapshot,
}

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// Short writes run in a row while a snapshot waits, at most.
const SHORT_STREAK: usize = 64;

#[derive(Default)]
struct Queue {
    short: VecDeque<Job>,
    snapshot: VecDeque<Job>,
    /// No more jobs come: the thread runs what is queued and ends.
    closed: bool,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Only queue operations run under this lock (never a write), and none of them can
        // leave the queue half changed, so a poisoned lock still guards a sound queue.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(crate) struct Writer {
    shared: Arc<Shared>,
}

impl Writer {
    /// Starts the thread that owns `conn`.
    pub(crate) fn start(conn: Connection) -> Result<Writer> {
        let shared = Arc::new(Shared::default());
        let own = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("mpa-store-writer".into())
            .spawn(move || serve(&own, conn))
            .map_err(|e| StoreError::Worker(format!("cannot start the database writer: {e}")))?;
        Ok(Writer { shared })
    }

    /// Queues `job` without waiting for it.
    pub(crate) fn submit(&self, class: Class, job: Job) {
        let mut q = self.shared.lock();
        match class {
            Class::Short => q.short.push_back(job),
            Class::Snapshot => q.snapshot.push_back(job),
        }
        drop(q);
        self.shared.ready.notify_one();
    }

    /// Runs `f` on the writer after the writes ahead of it and waits for its answer.
    pub(crate) async fn run<T, F>(&self, class: Class, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(
            class,
            Box::new(move |conn| {
                // The caller may have given up; the write is done either way.
                let _ = tx.send(f(conn));
            }),
        );
        rx.await.map_err(|_| {
            StoreError::Worker("the database writer failed while running this write".into())
        })?
    }

    /// Writes queued and not started yet.
    pub(crate) fn queued(&self) -> usize {
        let q = self.shared.lock();
        q.short.len() + q.snapshot.len()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_one();
    }
}

fn serve(shared: &Shared, mut conn: Connection) {
    let mut streak = 0;
    loop {
        let job = {
            let mut q = shared.lock();
            loop {
                // Counted only while a snapshot waits.
                if q.snapshot.is_empty() {
                    streak = 0;
                }
                let snapshot_due = streak >= SHORT_STREAK;
                if !snapshot_due && let Some(job) = q.short.pop_front() {
                    if !q.snapshot.is_empty() {
                        streak += 1;
                    }
                    break job;
                }
                if let Some(job) = q.snapshot.pop_front() {
                    streak = 0;
                    break job;
                }
                if q.closed {
                    return;
                }
                q = shared.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
            }
        };
        // A panicking write drops its answer channel (its caller gets an error); the writer goes
        // on with the next one. Each write is its own unit: whatever transaction it left open
        // (a panic, an early return) is rolled back, never carried into the next write.
        let _ = catch_unwind(AssertUnwindSafe(|| job(&mut conn)));
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
    }
}
