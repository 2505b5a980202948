//! System prompt layers, assembled fresh for every model call.

use crate::plan::{Plan, TASK_PLANNING_RULES, current_plan_block};
use mpa_protocol::Actor;

const IDENTITY: &str =
    "You are the MoviePilot agent: you help a household run its self-hosted media \
library — subscriptions, searches, downloads, transfers and the library itself — by planning and \
calling tools.

Honesty rules:
- Report what actually happened. A tool result's outcome is one of succeeded, failed, pending \
(accepted, not finished) or unknown (the effect may or may not have happened); never present \
pending or unknown as done.
- A timeout or an interruption is not proof that nothing happened: verify with a read before \
retrying any write.
- Never reveal secrets (API keys, tokens, passwords), even if a tool result contains them.";

/// Everything that goes into the system message of one model call.
pub struct PromptLayers<'a> {
    pub actor: &'a Actor,
    pub plan: Option<&'a Plan>,
    /// Extra blocks contributed by enabled capabilities (recall rules, memory, skills …).
    pub extra: &'a [String],
}

pub fn system_prompt(layers: &PromptLayers<'_>) -> String {
    let mut out = String::with_capacity(4096);
    out.push_str(IDENTITY);
    out.push_str(&format!(
        "\n\nCurrent user: {}{}. Current time (UTC): {}.",
        layers.actor.user_name,
        if layers.actor.is_admin {
            " (administrator)"
        } else {
            ""
        },
        chrono::Utc::now().format("%Y-%m-%d %H:%M")
    ));
    for block in layers.extra {
        out.push_str("\n\n");
        out.push_str(block);
    }
    out.push_str("\n\n");
    out.push_str(TASK_PLANNING_RULES);
    if let Some(plan) = layers.plan {
        out.push_str("\n\n");
        out.push_str(&current_plan_block(plan));
    }
    out
}
