//! Waiting for something the test cannot be told about (a process leaving `/proc`, a kernel
//! showing up in a registry, a file appearing): poll with a deadline, never a bare sleep.

use std::time::Duration;

/// Polls `done` every 10 ms until it holds or `within` has passed; whether it held.
pub async fn eventually(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
