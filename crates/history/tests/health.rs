//! The store health book: a damaged store is reported once an hour and once when it recovers.

use mpa_history::HistoryError;
use mpa_history::health::*;
use mpa_protocol::UserId;
use mpa_redact::UserKey;
use std::time::{Duration, Instant};

fn damage() -> HistoryError {
    HistoryError::StorageUnavailable("the database file is damaged".into())
}

#[test]
fn a_damaged_store_is_reported_once_an_hour_and_once_when_it_recovers() {
    let mut book = HealthBook::default();
    let u = UserKey::for_user(&UserId("u".into()));
    let t0 = Instant::now();
    assert_eq!(book.failed(&u, &damage(), t0), Report::Unavailable);
    for minute in 1..60 {
        let at = t0 + Duration::from_secs(60 * minute);
        assert_eq!(book.failed(&u, &damage(), at), Report::Nothing);
    }
    assert_eq!(book.summary().stores_unavailable, 1);
    assert_eq!(book.summary().status, "degraded");
    assert_eq!(
        book.failed(&u, &damage(), t0 + LOG_EVERY),
        Report::Unavailable
    );
    // A query problem says nothing about the store.
    assert_eq!(
        book.failed(&u, &HistoryError::DeadlineExceeded, t0),
        Report::Nothing
    );
    assert_eq!(book.succeeded(&u), Report::Recovered);
    assert_eq!(book.succeeded(&u), Report::Nothing);
    assert_eq!(book.summary().status, "ok");
}
