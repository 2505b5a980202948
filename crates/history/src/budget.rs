//! What one read may spend: the query deadline (spec §9.7) and whether anybody still waits for
//! its answer.
//!
//! SQLite's progress handler sees only VM steps. Work inside one step (an auxiliary function
//! such as `snippet()`) and work in Rust between statements (the ranked walk, `bm25` sorting)
//! never reaches it, so that work checks the same budget itself, once per block of iterations
//! ([`Pacer`]). A read also stops when its caller stops waiting: the tool timed out, the turn was
//! stopped, the future was dropped, or the host shuts down ([`Stop`]); a blocking thread never
//! keeps a core busy for an answer nobody will read.

use crate::error::{HistoryError, Result};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Why a caller no longer wants a read's answer: its own flag (set when it stops waiting), or
/// the process-wide shutdown epoch moving past the one the read started in.
#[derive(Debug, Clone)]
pub struct Stop {
    call: Arc<AtomicBool>,
    epoch: Arc<AtomicU64>,
    started_in: u64,
}

impl Stop {
    /// A stop flag for one call, tied to the shutdown `epoch` as it is now.
    pub fn new(epoch: Arc<AtomicU64>) -> Self {
        let started_in = epoch.load(Ordering::Acquire);
        Self {
            call: Arc::new(AtomicBool::new(false)),
            epoch,
            started_in,
        }
    }

    /// The caller stopped waiting.
    pub fn set(&self) {
        self.call.store(true, Ordering::Release);
    }

    pub(crate) fn is_set(&self) -> bool {
        self.call.load(Ordering::Acquire) || self.epoch.load(Ordering::Acquire) != self.started_in
    }
}

/// Sets the call's [`Stop`] when dropped: a caller that stops waiting (its future dropped by a
/// tool timeout or a stopped turn) stops the blocking work too.
pub struct StopOnDrop(pub Stop);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// A read's deadline and stop flag.
#[derive(Debug, Clone)]
pub struct Budget {
    until: Instant,
    stop: Option<Stop>,
}

impl Budget {
    pub fn new(deadline: Duration, stop: Option<Stop>) -> Self {
        let now = Instant::now();
        Self {
            until: now
                .checked_add(deadline)
                .unwrap_or(now + Duration::from_secs(86_400)),
            stop,
        }
    }

    /// Whether the read must stop now (the progress handler's question).
    pub fn is_spent(&self) -> bool {
        self.stop.as_ref().is_some_and(Stop::is_set) || Instant::now() >= self.until
    }

    /// `Err` once the read must stop: [`HistoryError::Cancelled`] when nobody waits any more,
    /// [`HistoryError::DeadlineExceeded`] when the deadline passed.
    pub fn check(&self) -> Result<()> {
        if self.stop.as_ref().is_some_and(Stop::is_set) {
            return Err(HistoryError::Cancelled);
        }
        if Instant::now() >= self.until {
            return Err(HistoryError::DeadlineExceeded);
        }
        Ok(())
    }

    /// The budget's error for a statement SQLite interrupted (its progress handler said stop),
    /// or the error itself.
    pub(crate) fn explain(&self, e: HistoryError) -> HistoryError {
        let interrupted = matches!(
            &e,
            HistoryError::Sqlite(rusqlite::Error::SqliteFailure(f, _))
                if f.code == rusqlite::ErrorCode::OperationInterrupted
        );
        match (interrupted, self.check()) {
            (true, Err(spent)) => spent,
            _ => e,
        }
    }
}

/// Checks a [`Budget`] once every [`Pacer::EVERY`] iterations of a loop: a clock read costs
/// about as much as twenty iterations of the loops it guards, so checking each would cost more
/// than the work.
#[derive(Debug)]
pub struct Pacer<'b> {
    budget: &'b Budget,
    left: u32,
}

impl<'b> Pacer<'b> {
    pub const EVERY: u32 = 1024;

    pub fn new(budget: &'b Budget) -> Self {
        Self {
            budget,
            left: Self::EVERY,
        }
    }

    /// Counts one iteration; every [`Pacer::EVERY`]th checks the budget.
    #[inline]
    pub fn tick(&mut self) -> Result<()> {
        self.left -= 1;
        if self.left == 0 {
            self.left = Self::EVERY;
            return self.budget.check();
        }
        Ok(())
    }
}
