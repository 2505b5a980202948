//! The session's current plan, re-shown on every model call (spec runtime.md §1).

use super::{Contributor, Outbound, StepView};
use crate::plan::{PlanState, current_plan_block};

pub struct PlanBlock;

impl Contributor for PlanBlock {
    fn name(&self) -> &'static str {
        "plan_block"
    }

    fn contribute(&self, view: &StepView<'_>, out: &mut Outbound) {
        if let Some(plan) = PlanState::of(view.session) {
            out.blocks.push(current_plan_block(&plan));
        }
    }
}
