//! Failed-login counters keyed by `user:<name>` and `ip:<addr>`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed logins tolerated per key inside [`FAILURE_WINDOW`] before answering "too many".
pub const MAX_FAILURES: u32 = 5;
pub const FAILURE_WINDOW: Duration = Duration::from_secs(300);

#[derive(Default)]
pub(crate) struct LoginLimiter {
    failures: Mutex<HashMap<String, (u32, Instant)>>,
}

impl LoginLimiter {
    /// Seconds until `keys` may try again, if any of them is over the limit.
    pub(crate) fn blocked(&self, keys: &[String]) -> Option<u64> {
        let map = self.failures.lock().ok()?;
        keys.iter()
            .filter_map(|k| map.get(k))
            .filter(|(n, since)| *n >= MAX_FAILURES && since.elapsed() < FAILURE_WINDOW)
            .map(|(_, since)| FAILURE_WINDOW.saturating_sub(since.elapsed()).as_secs() + 1)
            .max()
    }

    pub(crate) fn fail(&self, keys: &[String]) {
        if let Ok(mut map) = self.failures.lock() {
            // Bound the table: forget windows that have passed once it grows.
            if map.len() > 10_000 {
                map.retain(|_, (_, since)| since.elapsed() < FAILURE_WINDOW);
            }
            for k in keys {
                let e = map.entry(k.clone()).or_insert((0, Instant::now()));
                if e.1.elapsed() >= FAILURE_WINDOW {
                    *e = (0, Instant::now());
                }
                e.0 += 1;
            }
        }
    }

    pub(crate) fn succeed(&self, user_key: &str) {
        if let Ok(mut map) = self.failures.lock() {
            map.remove(user_key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_blocks_after_max_failures_and_success_clears_the_name() {
        let l = LoginLimiter::default();
        let keys = ["user:a".to_string(), "ip:1".to_string()];
        for _ in 0..MAX_FAILURES {
            assert!(l.blocked(&keys).is_none());
            l.fail(&keys);
        }
        assert!(l.blocked(&keys).is_some());
        l.succeed("user:a");
        assert!(l.blocked(&["user:a".to_string()]).is_none());
        assert!(l.blocked(&["ip:1".to_string()]).is_some());
    }
}
