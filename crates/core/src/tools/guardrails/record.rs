//! What the guardrails remember of one loop run (a slot of the turn's state, so every turn,
//! review and nested loop starts from nothing): failures per call and per tool, repeats of a
//! read's result, the current streak of identical calls and the last [`WINDOW`] calls. Every
//! collection has a fixed capacity, allocated once: a run of any length holds the same memory
//! (the least recently touched entry makes room).

use super::signature::Signature;
use std::collections::VecDeque;

/// The calls cycle detection looks back over.
pub const WINDOW: usize = 64;
/// Signatures (or tools) each axis keeps counting; a loop repeats a few of them, so the least
/// recently touched beyond this many has long stopped mattering.
pub const TRACKED: usize = 64;

/// A small map with a fixed capacity, most recently touched last.
#[derive(Debug)]
pub struct Recent<K, V> {
    items: Vec<(K, V)>,
}

impl<K: PartialEq + Copy, V> Default for Recent<K, V> {
    fn default() -> Self {
        Self {
            items: Vec::with_capacity(TRACKED),
        }
    }
}

impl<K: PartialEq + Copy, V> Recent<K, V> {
    fn position(&self, key: K) -> Option<usize> {
        self.items.iter().rposition(|(k, _)| *k == key)
    }

    pub fn get(&self, key: K) -> Option<&V> {
        self.position(key).map(|i| &self.items[i].1)
    }

    /// The entry for `key` (made with `fresh` when absent), now the most recent.
    pub fn touch(&mut self, key: K, fresh: impl FnOnce() -> V) -> &mut V {
        let value = match self.position(key) {
            Some(i) => self.items.remove(i).1,
            None => {
                if self.items.len() >= TRACKED {
                    self.items.remove(0);
                }
                fresh()
            }
        };
        self.items.push((key, value));
        let last = self.items.len() - 1;
        &mut self.items[last].1
    }

    pub fn remove(&mut self, key: K) {
        if let Some(i) = self.position(key) {
            self.items.remove(i);
        }
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Failures of one call in a row (a changed failure counts anew).
#[derive(Debug, Clone, Copy)]
pub struct Failures {
    pub count: u32,
    /// What the last failure was (its outcome and error code).
    pub last: u128,
}

/// The same result of one read, in a row.
#[derive(Debug, Clone, Copy)]
pub struct Repeats {
    pub result: u128,
    pub count: u32,
}

/// One call as the stall guards see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub call: Signature,
    pub result: u128,
    pub polls: bool,
}

/// Consecutive identical calls with identical results.
#[derive(Debug, Clone, Copy)]
pub struct Streak {
    pub step: Step,
    pub count: u32,
}

/// A repeated cycle at the end of the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cycle {
    pub period: usize,
    pub laps: u32,
    /// Every call of the lap polls (allowed).
    pub polls: bool,
}

/// The guardrails' state for one loop run.
#[derive(Debug)]
pub struct LoopRecord {
    /// Failures per call signature since its last success (or the last progress).
    pub exact: Recent<Signature, Failures>,
    /// Failures per tool (or tool and operation) since its last success (or the last progress).
    pub same_tool: Recent<u64, u32>,
    /// Repeats of the same result per read signature.
    pub no_progress: Recent<Signature, Repeats>,
    pub streak: Option<Streak>,
    window: VecDeque<Step>,
    /// Units used per budget ([`super::TurnBudget::index`]).
    pub budgets: [u32; 2],
}

impl Default for LoopRecord {
    fn default() -> Self {
        Self {
            exact: Recent::default(),
            same_tool: Recent::default(),
            no_progress: Recent::default(),
            streak: None,
            window: VecDeque::with_capacity(WINDOW),
            budgets: [0; 2],
        }
    }
}

impl LoopRecord {
    /// A success that proves progress (a write landed): every failure count starts over.
    pub fn progress(&mut self) {
        self.exact.clear();
        self.same_tool.clear();
    }

    /// Records `step` as the latest call; returns the length of the streak it makes.
    pub fn push(&mut self, step: Step) -> u32 {
        let count = match &mut self.streak {
            Some(s) if s.step.call == step.call && s.step.result == step.result => {
                s.count += 1;
                s.count
            }
            _ => {
                self.streak = Some(Streak { step, count: 1 });
                1
            }
        };
        if self.window.len() >= WINDOW {
            self.window.pop_front();
        }
        self.window.push_back(step);
        count
    }

    /// The shortest cycle (2 to 4 calls) the window ends with at least `min_laps` times.
    pub fn cycle(&self, min_laps: u32) -> Option<Cycle> {
        let n = self.window.len();
        (2..=4).find_map(|period| {
            if n < period * min_laps as usize {
                return None;
            }
            let same = |lap: usize| {
                (0..period).all(|i| self.window[n - 1 - i] == self.window[n - 1 - i - lap * period])
            };
            let mut laps = 1;
            while (laps + 1) * period <= n && same(laps) {
                laps += 1;
            }
            let laps = u32::try_from(laps).unwrap_or(u32::MAX);
            (laps >= min_laps).then(|| Cycle {
                period,
                laps,
                polls: (0..period).all(|i| self.window[n - 1 - i].polls),
            })
        })
    }

    /// How many calls the window holds (at most [`WINDOW`]).
    pub fn window_len(&self) -> usize {
        self.window.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(call: u128, result: u128) -> Step {
        Step {
            call: Signature(call),
            result,
            polls: false,
        }
    }

    #[test]
    fn the_least_recently_touched_entry_makes_room() {
        let mut r: Recent<u64, u32> = Recent::default();
        let capacity = r.items.capacity();
        for k in 0..(TRACKED as u64 + 10) {
            *r.touch(k, || 0) += 1;
            // Key 0 stays the most used and the most recent.
            *r.touch(0, || 0) += 1;
        }
        assert_eq!(r.len(), TRACKED);
        assert!(r.get(0).is_some() && r.get(1).is_none());
        assert_eq!(r.items.capacity(), capacity);
    }

    #[test]
    fn a_streak_needs_the_same_call_and_the_same_result() {
        let mut rec = LoopRecord::default();
        assert_eq!(rec.push(step(1, 7)), 1);
        assert_eq!(rec.push(step(1, 7)), 2);
        assert_eq!(rec.push(step(1, 8)), 1);
        assert_eq!(rec.push(step(2, 8)), 1);
    }

    #[test]
    fn cycles_of_two_to_four_calls_are_found_shortest_first() {
        let mut rec = LoopRecord::default();
        for _ in 0..3 {
            rec.push(step(1, 1));
            rec.push(step(2, 2));
        }
        assert_eq!(
            rec.cycle(3),
            Some(Cycle {
                period: 2,
                laps: 3,
                polls: false
            })
        );
        let mut rec = LoopRecord::default();
        rec.push(step(9, 9));
        for _ in 0..3 {
            for c in 1..=4 {
                rec.push(step(c, c));
            }
        }
        assert_eq!(rec.cycle(3).map(|c| (c.period, c.laps)), Some((4, 3)));
        // A changed result breaks the cycle.
        rec.push(step(1, 1));
        rec.push(step(2, 99));
        assert_eq!(rec.cycle(3), None);
    }

    #[test]
    fn the_window_never_grows_past_its_capacity() {
        let mut rec = LoopRecord::default();
        let capacity = rec.window.capacity();
        for i in 0..10_000u128 {
            rec.push(step(i % 5, 0));
        }
        assert_eq!(rec.window_len(), WINDOW);
        assert_eq!(rec.window.capacity(), capacity);
    }
}
