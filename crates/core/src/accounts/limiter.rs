//! Login attempt accounting. An attempt is *reserved* before its password is checked and counted
//! as a failure unless it is marked a success, so parallel guesses cannot all slip in before the
//! first failure is recorded.
//!
//! Three counters per window: `(name, address)` — the lock a guesser meets; `address` — a higher
//! ceiling for one address trying many names (a reverse proxy's users share it, so it is not the
//! per-account limit); `name` — failures for one account from every address, which only *slows*
//! that account's logins (an attacker elsewhere cannot lock its owner out).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The limits of [`LoginLimiter`].
#[derive(Debug, Clone)]
pub struct LoginLimits {
    /// Failed (or in-flight) attempts per `(name, address)` before 429.
    pub per_name_and_address: u32,
    /// Failed (or in-flight) attempts per address, over all names, before 429.
    pub per_address: u32,
    /// Failures per name, over all addresses, after which each attempt on that name waits
    /// [`LoginLimits::slowdown`] before its password is checked.
    pub slow_after_per_name: u32,
    pub slowdown: Duration,
    /// How long failures are remembered (a fixed window from the first one).
    pub window: Duration,
}

impl Default for LoginLimits {
    fn default() -> Self {
        Self {
            per_name_and_address: 5,
            per_address: 50,
            slow_after_per_name: 10,
            slowdown: Duration::from_secs(1),
            window: Duration::from_secs(300),
        }
    }
}

/// One counter's window.
#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
    in_flight: u32,
}

impl Window {
    fn fresh() -> Self {
        Window {
            started: Instant::now(),
            failures: 0,
            in_flight: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Pair(String, IpAddr),
    Address(IpAddr),
    Name(String),
}

/// Keys kept before expired windows are swept (each key is a few dozen bytes).
const SWEEP_AT: usize = 10_000;

pub(crate) struct LoginLimiter {
    limits: LoginLimits,
    windows: Mutex<HashMap<Key, Window>>,
}

/// Why an attempt may not go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Blocked {
    pub retry_after_secs: u64,
}

/// A reserved attempt. Dropping it without [`Attempt::succeeded`] or [`Attempt::unchecked`]
/// records a failure — a client that hangs up mid-check gets no free guess.
pub(crate) struct Attempt {
    limiter: Arc<LoginLimiter>,
    name: String,
    address: IpAddr,
    /// Whether this name is under attack: the caller waits [`LoginLimits::slowdown`] first.
    pub slow: bool,
    settled: bool,
}

impl LoginLimiter {
    pub(crate) fn new(limits: LoginLimits) -> Self {
        Self {
            limits,
            windows: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn limits(&self) -> &LoginLimits {
        &self.limits
    }

    /// Reserves an attempt for `name` from `address`, or says how long to wait.
    pub(crate) fn reserve(
        self: &Arc<Self>,
        name: &str,
        address: IpAddr,
    ) -> Result<Attempt, Blocked> {
        let name = name.to_lowercase();
        let pair = Key::Pair(name.clone(), address);
        let addr = Key::Address(address);
        let window = self.limits.window;
        let Ok(mut map) = self.windows.lock() else {
            // A poisoned table cannot count: refuse rather than allow unlimited guesses.
            return Err(Blocked {
                retry_after_secs: window.as_secs(),
            });
        };
        if map.len() > SWEEP_AT {
            map.retain(|_, w| w.in_flight > 0 || w.started.elapsed() < window);
        }
        let current = |k: &Key| -> Window {
            let w = map.get(k).copied().unwrap_or_else(Window::fresh);
            if w.started.elapsed() >= window && w.in_flight == 0 {
                Window::fresh()
            } else {
                w
            }
        };
        let (p, a, n) = (
            current(&pair),
            current(&addr),
            current(&Key::Name(name.clone())),
        );
        let full = |w: &Window, limit: u32| w.failures + w.in_flight >= limit;
        let blocked: Vec<&Window> = [
            (&p, self.limits.per_name_and_address),
            (&a, self.limits.per_address),
        ]
        .into_iter()
        .filter(|(w, limit)| full(w, *limit))
        .map(|(w, _)| w)
        .collect();
        if !blocked.is_empty() {
            let retry_after_secs = blocked
                .iter()
                .map(|w| window.saturating_sub(w.started.elapsed()).as_secs() + 1)
                .max()
                .unwrap_or(1);
            return Err(Blocked { retry_after_secs });
        }
        let slow = n.failures >= self.limits.slow_after_per_name;
        map.insert(
            pair,
            Window {
                in_flight: p.in_flight + 1,
                ..p
            },
        );
        map.insert(
            addr,
            Window {
                in_flight: a.in_flight + 1,
                ..a
            },
        );
        map.insert(Key::Name(name.clone()), n);
        Ok(Attempt {
            limiter: Arc::clone(self),
            name,
            address,
            slow,
            settled: false,
        })
    }

    /// Ends an attempt: its reservation is released and, if `failed`, counted as a failure. A
    /// success forgets the pair's failures (the owner mistyped, then got it right) but not the
    /// address's or the name's, so a valid login does not reset an attacker's budget.
    fn settle(&self, name: &str, address: IpAddr, outcome: Settled) {
        let Ok(mut map) = self.windows.lock() else {
            return;
        };
        let pair = Key::Pair(name.to_string(), address);
        let window = self.limits.window;
        for key in [
            pair.clone(),
            Key::Address(address),
            Key::Name(name.to_string()),
        ] {
            let reserved = !matches!(key, Key::Name(_));
            let w = map.entry(key).or_insert_with(Window::fresh);
            if reserved {
                w.in_flight = w.in_flight.saturating_sub(1);
            }
            if w.in_flight == 0 && w.started.elapsed() >= window {
                *w = Window::fresh();
            }
            if outcome == Settled::Failed {
                w.failures += 1;
            }
        }
        if outcome == Settled::Succeeded {
            map.remove(&pair);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    Succeeded,
    Failed,
    /// The password was never checked (the server was too busy): nothing is counted.
    Unchecked,
}

impl Attempt {
    pub(crate) fn succeeded(mut self) {
        self.settle(Settled::Succeeded);
    }

    pub(crate) fn failed(mut self) {
        self.settle(Settled::Failed);
    }

    pub(crate) fn unchecked(mut self) {
        self.settle(Settled::Unchecked);
    }

    fn settle(&mut self, outcome: Settled) {
        if !self.settled {
            self.settled = true;
            self.limiter.settle(&self.name, self.address, outcome);
        }
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        self.settle(Settled::Failed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter() -> Arc<LoginLimiter> {
        Arc::new(LoginLimiter::new(LoginLimits::default()))
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    #[test]
    fn reservations_count_before_any_failure_is_recorded() {
        let l = limiter();
        let held: Vec<Attempt> = (0..5).map(|_| l.reserve("alice", A).unwrap()).collect();
        assert!(
            l.reserve("alice", A).is_err(),
            "the sixth in flight is refused"
        );
        // Another address is a different pair.
        let other = l.reserve("alice", B).unwrap();
        other.succeeded();
        for a in held {
            a.failed();
        }
        assert!(
            l.reserve("alice", A).is_err(),
            "five failures hold the pair"
        );
    }

    #[test]
    fn a_success_clears_the_pair_and_an_unchecked_attempt_counts_nothing() {
        let l = limiter();
        for _ in 0..4 {
            l.reserve("bob", A).unwrap().failed();
        }
        l.reserve("bob", A).unwrap().succeeded();
        for _ in 0..4 {
            l.reserve("bob", A).unwrap().failed();
        }
        for _ in 0..10 {
            l.reserve("bob", A).unwrap().unchecked();
        }
        assert!(l.reserve("bob", A).is_ok());
    }

    #[test]
    fn a_dropped_attempt_is_a_failure() {
        let l = limiter();
        for _ in 0..5 {
            drop(l.reserve("carol", A).unwrap());
        }
        assert!(l.reserve("carol", A).is_err());
    }

    #[test]
    fn failures_on_one_name_slow_it_down_everywhere_but_lock_only_their_address() {
        let l = limiter();
        let attackers: Vec<IpAddr> = (1..=2)
            .map(|i| IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, i)))
            .collect();
        for ip in &attackers {
            for _ in 0..5 {
                l.reserve("dave", *ip).unwrap().failed();
            }
            assert!(l.reserve("dave", *ip).is_err());
        }
        let owner = l.reserve("dave", A).unwrap();
        assert!(owner.slow, "ten failures elsewhere slow the name down");
        owner.succeeded();
        assert!(!l.reserve("erin", A).unwrap().slow);
    }

    #[test]
    fn one_address_trying_many_names_meets_the_address_ceiling() {
        let l = limiter();
        for i in 0..50 {
            l.reserve(&format!("user{i}"), A).unwrap().failed();
        }
        assert!(l.reserve("someone-else", A).is_err());
        assert!(l.reserve("someone-else", B).is_ok());
    }
}
