//! The per-user stores this process has open. Each holds a few SQLite connections (with their
//! page caches), so the set is bounded: beyond `max_open` stores, and after `idle_ttl` without
//! use, a store is closed, least recently used first, and reopened on its next use. A store in
//! use (an operation holds it) is never closed under that operation: it stays until released,
//! and a second copy is never opened beside it, so one writer lock per file still holds.

use super::UserStore;
use mpa_redact::UserKey;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Open {
    store: Arc<UserStore>,
    last_used: Instant,
}

pub(crate) struct StoreRegistry {
    open: HashMap<UserKey, Open>,
    max_open: usize,
    idle_ttl: Option<Duration>,
    /// Stores closed so far (for tests and diagnostics).
    closed: u64,
}

impl StoreRegistry {
    pub(crate) fn new(max_open: usize, idle_ttl: Option<Duration>) -> Self {
        Self {
            open: HashMap::new(),
            max_open: max_open.max(1),
            idle_ttl,
            closed: 0,
        }
    }

    /// The user's store if it is open (marked used).
    pub(crate) fn get(&mut self, user: &UserKey, now: Instant) -> Option<Arc<UserStore>> {
        let o = self.open.get_mut(user)?;
        o.last_used = now;
        Some(o.store.clone())
    }

    /// The user's store if it is open, without marking it used.
    pub(crate) fn peek(&self, user: &UserKey) -> Option<Arc<UserStore>> {
        self.open.get(user).map(|o| o.store.clone())
    }

    /// Adds a newly opened store, then takes out what the bounds ask to close (see
    /// [`StoreRegistry::close_idle`]).
    #[must_use = "the returned stores close when dropped; drop them outside the registry's lock"]
    pub(crate) fn insert(
        &mut self,
        user: UserKey,
        store: Arc<UserStore>,
        now: Instant,
    ) -> Vec<Arc<UserStore>> {
        self.open.insert(
            user,
            Open {
                store,
                last_used: now,
            },
        );
        self.close_idle(now)
    }

    /// Takes out the stores idle longer than the TTL, then the least recently used idle ones
    /// while more than `max_open` are open. Only stores nobody holds are taken (the registry's
    /// reference is the last one), so an operation never loses its store and the file is never
    /// open twice. The caller drops them after releasing the lock: closing the last connection
    /// of a file checkpoints its WAL, which is disk work.
    #[must_use = "the returned stores close when dropped; drop them outside the registry's lock"]
    pub(crate) fn close_idle(&mut self, now: Instant) -> Vec<Arc<UserStore>> {
        let idle = |o: &Open| Arc::strong_count(&o.store) == 1;
        let mut out = Vec::new();
        if let Some(ttl) = self.idle_ttl {
            let expired: Vec<UserKey> = self
                .open
                .iter()
                .filter(|(_, o)| idle(o) && now.saturating_duration_since(o.last_used) >= ttl)
                .map(|(k, _)| k.clone())
                .collect();
            out.extend(expired.iter().filter_map(|k| self.open.remove(k)));
        }
        while self.open.len() > self.max_open {
            let Some(oldest) = self
                .open
                .iter()
                .filter(|(_, o)| idle(o))
                .min_by_key(|(_, o)| o.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            out.extend(self.open.remove(&oldest));
        }
        self.closed += out.len() as u64;
        out.into_iter().map(|o| o.store).collect()
    }

    pub(crate) fn stats(&self) -> RegistryStats {
        RegistryStats {
            open: self.open.len(),
            closed: self.closed,
        }
    }
}

/// How many per-user stores are open, and how many were closed since start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryStats {
    pub open: usize,
    pub closed: u64,
}
