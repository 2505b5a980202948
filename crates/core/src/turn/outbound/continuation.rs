//! Continuation notes after the transcript: after an empty answer the model is asked once to
//! continue (the settle rule `EmptyAnswer` counts it); after an answer that only announced work
//! it did not do, the host's continuation prompt (the settle rule `ContinuationNudge`, spec
//! learning-guardrails.md §6).

use super::{Contributor, Outbound, StepView};
use crate::turn::nudge::{CONTINUE_NUDGE, Nudges};

pub const EMPTY_ANSWER_NUDGE: &str = "[Host note: your last answer was empty. Continue the task: call a \
tool, or give the final answer to the user.]";

pub struct Continuation;

impl Contributor for Continuation {
    fn name(&self) -> &'static str {
        "continuation"
    }

    fn contribute(&self, view: &StepView<'_>, out: &mut Outbound) {
        if view.state.empty_answers > 0 {
            out.continuation = Some(EMPTY_ANSWER_NUDGE.to_string());
        } else if view.state.turn.with(|n: &mut Nudges| n.asking) {
            out.continuation = Some(CONTINUE_NUDGE.to_string());
        }
    }
}
