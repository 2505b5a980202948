//! Who may run a cell, and what a cell's helper calls may do (spec runtime.md §10.1–10.2): a
//! gate of the call-gate chain. `execute_code` runs only in a user's own turn, never for a
//! subagent, the background review, a direct or MCP call, or the OpenAI endpoint. A call whose
//! origin is [`Origin::Kernel`] may only be one of the helper tools, and `moviepilot_api` only
//! for an operation whose effect is exactly `safe_read`, whose result sensitivity is `normal`
//! or `private`, and that asks for no secret values. (`Policy` still refuses any effect that is
//! not a read for this origin.)

use super::{HELPER_TOOLS, available};
use crate::tools::gate::{CallFacts, Gate, Verdict};
use crate::tools::policy::Origin;
use crate::tools::{ToolOutput, execute_code, moviepilot_api};
use mpa_gateway::Sensitivity;
use mpa_protocol::EffectClass;
use serde_json::Value;

/// The error of a refused helper call.
pub const DENIED: &str = "kernel_read_only";

pub struct KernelCalls;

impl Gate for KernelCalls {
    fn name(&self) -> &'static str {
        "kernel_calls"
    }

    fn check(&self, call: &CallFacts<'_>) -> Verdict {
        if call.tool == execute_code::NAME && !available(call.origin, call.channel) {
            return Verdict::Answer(ToolOutput::failure(
                "execute_code_unavailable",
                "execute_code runs only in an administrator's own conversation; it is not \
                 available to subagents, the OpenAI-compatible endpoint, MCP or direct calls",
            ));
        }
        if call.origin != Origin::Kernel {
            return Verdict::Allow;
        }
        match decide(call) {
            None => Verdict::Allow,
            Some(out) => Verdict::Answer(out),
        }
    }
}

fn denied(message: impl Into<String>) -> ToolOutput {
    ToolOutput::failure(DENIED, message)
}

/// `None`: the helper call may run.
fn decide(f: &CallFacts<'_>) -> Option<ToolOutput> {
    if !HELPER_TOOLS.contains(&f.tool) || f.meta.external {
        return Some(denied(format!(
            "{} is not a Python helper; the kernel may call only {}",
            f.tool,
            HELPER_TOOLS.join(", ")
        )));
    }
    if f.tool != moviepilot_api::NAME {
        return None;
    }
    let args = f.args.cloned().unwrap_or(Value::Null);
    let Ok(call) = serde_json::from_value::<moviepilot_api::MoviePilotApiArgs>(args) else {
        // The tool's own argument errors are the same for every origin.
        return None;
    };
    // An unknown operation is answered by the tool itself, with suggestions; nothing is sent.
    let op = mpa_gateway::catalogue().get(&call.operation_id)?;
    if op.effect != EffectClass::SafeRead {
        return Some(denied(format!(
            "{} is a {} operation; Python helpers only read — writes, deletes, refreshes and \
             downloads belong to the ordinary tools",
            op.id, op.effect
        )));
    }
    if !matches!(op.sensitivity, Sensitivity::Normal | Sensitivity::Private) {
        return Some(denied(format!(
            "{} returns {} data; Python helpers read only normal or private results",
            op.id, op.sensitivity
        )));
    }
    let secrets = call
        .query
        .as_ref()
        .is_some_and(|q| crate::moviepilot::secret_read::shows_secrets(&Value::Object(q.clone())));
    if secrets {
        return Some(denied(format!(
            "{} with show_secrets is a secret read; Python helpers never read secret values",
            op.id
        )));
    }
    None
}
