//! An honest turn status (spec runtime.md §14.5, learning-guardrails.md §5.8): a turn whose
//! model gave its final answer, or that a guardrail stopped, still ends `unknown` when one of its
//! writes may or may not have happened, and `waiting` when a write it submitted was accepted but
//! has not finished. [`WriteOutcomes`] is a gate that only observes: it keeps, per write call,
//! the latest outcome, and [`honest_status`] reads it when the loop ends.
//!
//! Only a later success of the same write (a retry, or the ledger's read-back) clears an
//! `unknown`; a failure after it does not prove the first attempt did nothing. A `pending` is
//! cleared by the same write succeeding or failing. Polling calls are not writes.

use super::class::LoopClass;
use super::signature::Signature;
use crate::sync::Slots;
use crate::tools::ToolOutput;
use crate::tools::gate::{CallFacts, Gate, Halt};
use mpa_protocol::{Outcome, TurnStatus};

/// Writes tracked per turn; past this many open ones, the turn is `unknown` (or `waiting`)
/// whatever happens to the rest.
const OPEN: usize = 64;

/// The writes of this loop run whose outcome is still open.
#[derive(Debug, Default)]
pub struct OpenWrites {
    unknown: Vec<Signature>,
    pending: Vec<Signature>,
    /// More were open than could be tracked: they stay open.
    unknown_overflow: bool,
    pending_overflow: bool,
}

impl OpenWrites {
    fn record(&mut self, call: Signature, outcome: Outcome, ledgered: bool) {
        match outcome {
            Outcome::Unknown => {
                self.pending.retain(|s| *s != call);
                add(&mut self.unknown, &mut self.unknown_overflow, call);
            }
            // A pending receipt is a durable write accepted and not finished; a terminal
            // started in the background is polled, not waited for.
            Outcome::Pending if ledgered => {
                add(&mut self.pending, &mut self.pending_overflow, call)
            }
            Outcome::Pending => {}
            Outcome::Succeeded => {
                self.unknown.retain(|s| *s != call);
                self.pending.retain(|s| *s != call);
            }
            Outcome::Failed => self.pending.retain(|s| *s != call),
        }
    }

    pub fn any_unknown(&self) -> bool {
        self.unknown_overflow || !self.unknown.is_empty()
    }

    pub fn any_pending(&self) -> bool {
        self.pending_overflow || !self.pending.is_empty()
    }
}

fn add(list: &mut Vec<Signature>, overflow: &mut bool, call: Signature) {
    if list.contains(&call) {
        return;
    }
    if list.len() >= OPEN {
        *overflow = true;
        return;
    }
    list.push(call);
}

/// Observes every call's outcome (see the module docs).
pub struct WriteOutcomes;

impl Gate for WriteOutcomes {
    fn name(&self) -> &'static str {
        "write_outcomes"
    }

    fn observe(
        &self,
        call: &CallFacts<'_>,
        output: &mut ToolOutput,
        _full: Option<&str>,
    ) -> Option<Halt> {
        let class = LoopClass::of(call.tool, call.meta.loop_class);
        if call.effect.is_read() || class.changes_state || class.polls(call.args) {
            return None;
        }
        // A duplicate answered while the first call runs: that call's own result counts.
        if output.error.as_deref() == Some(crate::tools::ledger::WRITE_STILL_RUNNING) {
            return None;
        }
        let sig = Signature::of(call.tool, call.args);
        let ledgered = crate::tools::ledger::is_ledgered(call.meta, call.effect);
        call.turn
            .with(|w: &mut OpenWrites| w.record(sig, output.outcome, ledgered));
        None
    }
}

/// The status a loop that ended with `status` really ended with: a final answer, a cut-off one,
/// or a guardrail's stop becomes `unknown` when a write's outcome is unknown, else `waiting`
/// when a write is pending. A stop, a failure or the iteration limit keeps its own status.
pub fn honest_status(status: TurnStatus, turn: &Slots) -> TurnStatus {
    match status {
        TurnStatus::Completed | TurnStatus::Partial | TurnStatus::Blocked => {}
        TurnStatus::Stopped
        | TurnStatus::Failed
        | TurnStatus::IterationLimit
        | TurnStatus::Waiting
        | TurnStatus::Unknown => return status,
    }
    let (unknown, pending) = turn.with(|w: &mut OpenWrites| (w.any_unknown(), w.any_pending()));
    if unknown {
        TurnStatus::Unknown
    } else if pending {
        TurnStatus::Waiting
    } else {
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_after(steps: &[(u128, Outcome, bool)], ended: TurnStatus) -> TurnStatus {
        let turn = Slots::new();
        for (sig, outcome, ledgered) in steps {
            turn.with(|w: &mut OpenWrites| w.record(Signature(*sig), *outcome, *ledgered));
        }
        honest_status(ended, &turn)
    }

    #[test]
    fn only_a_later_success_clears_an_unknown_write() {
        use Outcome::*;
        let done = TurnStatus::Completed;
        assert_eq!(
            status_after(&[(1, Unknown, true)], done),
            TurnStatus::Unknown
        );
        assert_eq!(
            status_after(&[(1, Unknown, true), (1, Failed, true)], done),
            TurnStatus::Unknown
        );
        assert_eq!(
            status_after(&[(1, Unknown, true), (1, Succeeded, true)], done),
            done
        );
        assert_eq!(
            status_after(&[(1, Unknown, true), (2, Succeeded, true)], done),
            TurnStatus::Unknown
        );
    }

    #[test]
    fn a_pending_receipt_waits_and_unknown_outranks_it() {
        use Outcome::*;
        let done = TurnStatus::Completed;
        assert_eq!(
            status_after(&[(1, Pending, true)], done),
            TurnStatus::Waiting
        );
        assert_eq!(status_after(&[(1, Pending, false)], done), done);
        assert_eq!(
            status_after(&[(1, Pending, true), (2, Unknown, false)], done),
            TurnStatus::Unknown
        );
        assert_eq!(
            status_after(&[(1, Pending, true), (1, Failed, true)], done),
            done
        );
        assert_eq!(
            status_after(&[(1, Pending, true)], TurnStatus::Blocked),
            TurnStatus::Waiting
        );
        assert_eq!(status_after(&[], TurnStatus::Blocked), TurnStatus::Blocked);
    }

    #[test]
    fn a_stop_a_failure_and_the_limit_keep_their_status() {
        use Outcome::*;
        for ended in [
            TurnStatus::Stopped,
            TurnStatus::Failed,
            TurnStatus::IterationLimit,
        ] {
            assert_eq!(status_after(&[(1, Unknown, true)], ended), ended);
        }
    }

    #[test]
    fn open_writes_beyond_the_tracked_ones_stay_open() {
        let mut w = OpenWrites::default();
        for i in 0..(OPEN as u128 + 5) {
            w.record(Signature(i), Outcome::Unknown, true);
        }
        for i in 0..(OPEN as u128 + 5) {
            w.record(Signature(i), Outcome::Succeeded, true);
        }
        assert!(
            w.any_unknown(),
            "an untracked unknown write is never forgotten"
        );
    }
}
