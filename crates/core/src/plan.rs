//! The structured task plan (spec runtime.md §1): validation, the `<task_planning>` rules and the
//! `<current_task_plan>` block injected into every model call, and restoring the plan from the
//! newest snapshot in the transcript.

use mpa_protocol::{Message, Role};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const MAX_PLAN_STEPS: usize = 12;
/// Metadata key carrying the plan snapshot on the last AI/tool message of a turn.
pub const PLAN_METADATA_KEY: &str = "moviepilot_task_plan";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    InProgress,
    Completed,
    Blocked,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanStep {
    /// Short description of the step (1-300 characters, unique within the plan).
    pub step: String,
    pub status: StepStatus,
    /// Observed result or concrete blocker (0-600 characters); required for completed and
    /// blocked steps. Never credentials.
    #[serde(default)]
    pub evidence: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    /// The goal, keeping important constraints (1-800 characters).
    pub objective: String,
    /// The complete step list (1-12 steps), not a delta.
    pub steps: Vec<PlanStep>,
    /// Why the plan changed, or continuation context (0-800 characters).
    #[serde(default)]
    pub explanation: String,
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

impl Plan {
    /// Validates and normalises (trims, scrubs secrets). The error text is shown to the model.
    pub fn validated(mut self) -> Result<Plan, String> {
        self.objective = self.objective.trim().to_string();
        self.explanation = self.explanation.trim().to_string();
        if self.objective.is_empty() {
            return Err("objective must not be empty".into());
        }
        if chars(&self.objective) > 800 {
            return Err(format!(
                "objective is {} characters; the limit is 800",
                chars(&self.objective)
            ));
        }
        if chars(&self.explanation) > 800 {
            return Err(format!(
                "explanation is {} characters; the limit is 800",
                chars(&self.explanation)
            ));
        }
        if self.steps.is_empty() {
            return Err("steps must contain at least one step".into());
        }
        if self.steps.len() > MAX_PLAN_STEPS {
            return Err(format!(
                "steps has {} items; at most {MAX_PLAN_STEPS} are allowed — merge steps",
                self.steps.len()
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, s) in self.steps.iter_mut().enumerate() {
            s.step = s.step.trim().to_string();
            s.evidence = s.evidence.trim().to_string();
            let n = i + 1;
            if s.step.is_empty() {
                return Err(format!("step {n}: step text must not be empty"));
            }
            if chars(&s.step) > 300 {
                return Err(format!("step {n}: step text exceeds 300 characters"));
            }
            if chars(&s.evidence) > 600 {
                return Err(format!("step {n}: evidence exceeds 600 characters"));
            }
            if matches!(s.status, StepStatus::Completed | StepStatus::Blocked)
                && s.evidence.is_empty()
            {
                return Err(format!(
                    "step {n} ({:?}) is {}: evidence is required (the observed result or the concrete blocker)",
                    s.step,
                    if s.status == StepStatus::Completed {
                        "completed"
                    } else {
                        "blocked"
                    }
                ));
            }
            if !seen.insert(s.step.to_lowercase()) {
                return Err(format!("step {n}: duplicate step {:?}", s.step));
            }
        }
        Ok(self.scrubbed())
    }

    fn scrubbed(mut self) -> Plan {
        let scrub = |s: &mut String| {
            if let std::borrow::Cow::Owned(o) = crate::redaction::redact(s) {
                *s = o;
            }
        };
        scrub(&mut self.objective);
        scrub(&mut self.explanation);
        for st in &mut self.steps {
            scrub(&mut st.step);
            scrub(&mut st.evidence);
        }
        self
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// Restores the plan from the newest AI/tool message carrying a snapshot. An invalid historical
    /// snapshot is ignored rather than injected.
    pub fn restore_from(messages: &[Message]) -> Option<Plan> {
        messages
            .iter()
            .rev()
            .filter(|m| matches!(m.role, Role::Assistant | Role::Tool))
            .filter_map(|m| m.metadata.get(PLAN_METADATA_KEY))
            .find_map(|v| {
                serde_json::from_value::<Plan>(v.clone())
                    .ok()
                    .and_then(|p| p.validated().ok())
            })
    }
}

/// The `<task_planning>` section given on every model call.
pub const TASK_PLANNING_RULES: &str = "<task_planning>
Use the update_plan tool for multi-step work (three or more steps, or work that spans several tool calls).
- Skip it for simple questions and single-step requests.
- Keep the existing plan when the user only asks how it is going or makes a small correction.
- Replace the objective and all steps when the user clearly starts a new task.
- Send the complete step list every time (at most 12 steps), exactly one update_plan call per response.
- Mark a step completed only with checked evidence (an observed tool result); mark it blocked with the concrete reason.
- The plan grants no permission and is not proof that anything happened.
- After updating the plan, keep working: call the next tool or answer.
- The current plan, when there is one, is shown at the end of the latest message, in a block tagged current_task_plan.
</task_planning>";

/// The session's current plan: a slot of the session state ([`crate::tools::SessionState`]).
#[derive(Debug, Clone, Default)]
pub struct PlanState(pub Option<Plan>);

impl PlanState {
    /// The plan of the session with these slots.
    pub fn of(session: &crate::tools::SessionState) -> Option<Plan> {
        session.with(|p: &mut PlanState| p.0.clone())
    }
}

/// The `<current_task_plan>` block, when a plan exists.
pub fn current_plan_block(plan: &Plan) -> String {
    format!(
        "<current_task_plan>\nThe following plan is model-reported working state, not authorisation or proof.\n{}\n</current_task_plan>",
        serde_json::to_string_pretty(&plan.to_json()).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(steps: Vec<(&str, StepStatus, &str)>) -> Plan {
        Plan {
            objective: " find the film ".into(),
            steps: steps
                .into_iter()
                .map(|(s, st, e)| PlanStep {
                    step: s.into(),
                    status: st,
                    evidence: e.into(),
                })
                .collect(),
            explanation: String::new(),
        }
    }

    #[test]
    fn validation_rules() {
        let ok = plan(vec![("search", StepStatus::Completed, "found 3")])
            .validated()
            .unwrap();
        assert_eq!(ok.objective, "find the film");
        assert!(
            plan(vec![("search", StepStatus::Completed, "")])
                .validated()
                .unwrap_err()
                .contains("evidence is required")
        );
        assert!(
            plan(vec![
                ("a", StepStatus::Pending, ""),
                ("A", StepStatus::Pending, "")
            ])
            .validated()
            .unwrap_err()
            .contains("duplicate")
        );
        let many = (0..13)
            .map(|i| PlanStep {
                step: format!("s{i}"),
                status: StepStatus::Pending,
                evidence: String::new(),
            })
            .collect();
        let mut p = plan(vec![]);
        p.steps = many;
        assert!(p.validated().unwrap_err().contains("at most 12"));
        assert!(plan(vec![]).validated().is_err());
        let mut empty = plan(vec![("a", StepStatus::Pending, "")]);
        empty.objective = "   ".into();
        assert!(empty.validated().unwrap_err().contains("objective"));
    }

    #[test]
    fn restore_takes_newest_valid_snapshot() {
        let p1 = plan(vec![("one", StepStatus::Pending, "")])
            .validated()
            .unwrap();
        let p2 = plan(vec![("two", StepStatus::InProgress, "")])
            .validated()
            .unwrap();
        let mut a = Message::assistant("x", vec![]);
        a.metadata.insert(PLAN_METADATA_KEY.into(), p1.to_json());
        let mut b = Message::tool("c", "t", "r", mpa_protocol::Outcome::Succeeded);
        b.metadata.insert(PLAN_METADATA_KEY.into(), p2.to_json());
        let mut bad = Message::assistant("y", vec![]);
        bad.metadata.insert(
            PLAN_METADATA_KEY.into(),
            serde_json::json!({"objective": ""}),
        );
        let msgs = vec![a, b, bad, Message::user("later")];
        assert_eq!(Plan::restore_from(&msgs), Some(p2));
    }
}
