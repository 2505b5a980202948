//! `update_plan` (spec runtime.md §1): atomically replaces the session plan; a validation failure
//! is a recoverable tool error that keeps the previous plan.

use super::guardrails::LoopClass;
use super::{ToolContext, ToolMeta, ToolOutput, ToolResult, TypedTool};
use crate::plan::{PLAN_METADATA_KEY, Plan};
use async_trait::async_trait;

pub struct UpdatePlan;

#[async_trait]
impl TypedTool for UpdatePlan {
    type Args = Plan;
    const NAME: &'static str = "update_plan";

    fn description(&self) -> String {
        "Record or replace the structured plan for multi-step work: the objective and the complete list \
         of 1-12 steps, each pending, in_progress, completed or blocked. Completed and blocked steps need \
         evidence (the observed result or the concrete blocker). Call it at most once per response. \
         The plan is working state, not proof and not permission."
            .into()
    }

    fn meta(&self) -> ToolMeta {
        // Changes only the session's working state, so it counts as a read for the ledger and
        // for read-only scopes; one per response because it replaces the whole plan.
        ToolMeta::read()
            .internal()
            .self_capped()
            .once_per_response()
            .loop_class(LoopClass::SESSION_STATE)
    }

    async fn run(&self, ctx: ToolContext, args: Plan) -> ToolOutput {
        let plan = match args.validated() {
            Ok(p) => p,
            Err(msg) => {
                return ToolOutput::failure(
                    "invalid_plan",
                    format!("plan not updated: {msg}; the previous plan is kept"),
                );
            }
        };
        let json = plan.to_json();
        ctx.session.put(crate::plan::PlanState(Some(plan)));
        ToolOutput::result(&PlanUpdated {
            success: true,
            message: "plan updated; step statuses are model claims, not verified facts",
            plan: json,
        })
    }
}

#[derive(serde::Serialize)]
struct PlanUpdated {
    success: bool,
    message: &'static str,
    plan: serde_json::Value,
}

impl ToolResult for PlanUpdated {
    fn metadata(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert(PLAN_METADATA_KEY.into(), self.plan.clone());
        m
    }
}
