//! Continuation notes after the transcript: after an empty answer the model is asked once to
//! continue (the settle rule `EmptyAnswer` counts it). Continuation nudges (spec
//! learning-guardrails.md §6) add their note here.

use super::{Contributor, Outbound, StepView};

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
        }
    }
}
