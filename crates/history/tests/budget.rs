//! A call's budget: its deadline, its stop, a shutdown epoch.

use mpa_history::HistoryError;
use mpa_history::budget::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[test]
fn a_stopped_call_or_a_later_shutdown_epoch_spends_the_budget() {
    let epoch = Arc::new(AtomicU64::new(0));
    let stop = Stop::new(epoch.clone());
    let b = Budget::new(Duration::from_secs(60), Some(stop.clone()));
    assert!(b.check().is_ok());
    epoch.fetch_add(1, Ordering::AcqRel);
    assert!(matches!(b.check(), Err(HistoryError::Cancelled)));
    // A call that starts after the shutdown is not stopped by it.
    let later = Budget::new(Duration::from_secs(60), Some(Stop::new(epoch)));
    assert!(later.check().is_ok());
    drop(StopOnDrop(stop));
    assert!(b.is_spent());
}

#[test]
fn a_passed_deadline_is_reported_as_such() {
    let b = Budget::new(Duration::ZERO, None);
    assert!(matches!(b.check(), Err(HistoryError::DeadlineExceeded)));
    let mut pacer = Pacer::new(&b);
    let first_err = (0..Pacer::EVERY)
        .map(|_| pacer.tick())
        .position(|r| r.is_err());
    assert_eq!(first_err, Some(Pacer::EVERY as usize - 1));
}
