//! Locks without silent loss, and typed per-session / per-turn state ([`Slots`]).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Locks `m`, recovering it when a panicking holder poisoned it. Every value kept behind these
/// locks is replaced whole or changed by one call that cannot panic halfway (a plan, a result
/// store entry, a map insert), so what the panicking thread left is still consistent; dropping
/// it instead would silently lose the plan, the stored results or the live sessions.
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Typed state, one value per type: a session's (capabilities, gates, tools) or a turn's (gates
/// counting calls). A value is created with its `Default` on first use; each lives behind its
/// own lock, so two slots never wait on each other.
#[derive(Default)]
pub struct Slots {
    values: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slots")
            .field("len", &lock(&self.values).len())
            .finish()
    }
}

impl Slots {
    pub fn new() -> Self {
        Self::default()
    }

    /// The slot of type `T` (created empty on first use).
    pub fn slot<T: Default + Send + 'static>(&self) -> Arc<Mutex<T>> {
        let mut values = lock(&self.values);
        let any = values
            .entry(TypeId::of::<Mutex<T>>())
            .or_insert_with(|| Arc::new(Mutex::new(T::default())))
            .clone();
        drop(values);
        // The key is the value's own type id, so the downcast cannot fail; a fresh slot is the
        // safe answer should it ever.
        any.downcast::<Mutex<T>>()
            .unwrap_or_else(|_| Arc::new(Mutex::new(T::default())))
    }

    /// Runs `f` on the slot of type `T`. Do not call `with` for the same `T` inside `f`.
    pub fn with<T: Default + Send + 'static, R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let slot = self.slot::<T>();
        let mut guard = lock(&slot);
        f(&mut guard)
    }

    /// Replaces the slot of type `T` with `value`.
    pub fn put<T: Default + Send + 'static>(&self, value: T) {
        self.with(|v: &mut T| *v = value);
    }

    /// Takes the value of slot `T`, leaving its default.
    pub fn take<T: Default + Send + 'static>(&self) -> T {
        self.with(std::mem::take)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_slot_keeps_its_value() {
        let slots = Arc::new(Slots::new());
        slots.put(7u32);
        let s = Arc::clone(&slots);
        let panicked = std::thread::spawn(move || {
            s.with(|_: &mut u32| panic!("holder panics"));
        })
        .join();
        assert!(panicked.is_err());
        assert_eq!(slots.with(|v: &mut u32| *v), 7);
        assert_eq!(slots.take::<u32>(), 7);
        assert_eq!(slots.with(|v: &mut u32| *v), 0);
    }
}
