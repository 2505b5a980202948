//! Read-only subagents, enforced at the host boundary (spec runtime.md §8.2): a gate of the
//! call-gate chain that decides every call whose origin is [`Origin::Subagent`], whatever the
//! child's prompt says and whoever its parent is. An admin parent's identity reaches the child
//! (MoviePilot answers as that user), so this gate — not the role — is what keeps a child from
//! adding a download.
//!
//! The rules, in order: no nesting (`task`, `subagent_task`); external tools never (their "read"
//! tag proves nothing); `moviepilot_api` only for an operation whose effect is exactly
//! `safe_read`, whose arguments pass its contract and that asks for no secret values; tools with
//! actions only for the actions of [`ACTION_ALLOW_LIST`]; everything else only when its effect is
//! a read.

use crate::tools::gate::{CallFacts, Gate, Verdict};
use crate::tools::policy::Origin;
use crate::tools::{ToolOutput, moviepilot_api};
use mpa_protocol::EffectClass;
use serde_json::{Value, json};

/// The error every refusal carries.
pub const DENIED: &str = "subagent_read_only";

/// Tools whose calls are read-only for some actions only: (tool, allowed actions, arguments
/// that are never allowed).
pub const ACTION_ALLOW_LIST: &[(&str, &[&str], &[&str])] = &[
    ("execute_command", &["read", "wait"], &[]),
    (
        "browse_webpage",
        &["snapshot", "get_content", "screenshot", "wait", "list_tabs"],
        &["cookies", "user_agent"],
    ),
    ("persona", &["list"], &[]),
    ("agent_task", &["list"], &[]),
];

/// The subagent tools themselves: a child never delegates again.
pub const NESTING: [&str; 2] = [crate::tools::task::NAME, crate::tools::subagent_task::NAME];

/// Whether a child is offered this tool at all (the same rules without the arguments): the
/// tools a child may call for some arguments.
pub fn offered(name: &str, meta: &crate::tools::ToolMeta) -> bool {
    if NESTING.contains(&name) || meta.external {
        return false;
    }
    name == moviepilot_api::NAME
        || ACTION_ALLOW_LIST.iter().any(|(tool, _, _)| *tool == name)
        || meta.effect.is_read()
}

pub struct SubagentReadOnly;

impl Gate for SubagentReadOnly {
    fn name(&self) -> &'static str {
        "subagent_read_only"
    }

    fn check(&self, call: &CallFacts<'_>) -> Verdict {
        if call.origin != Origin::Subagent {
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

/// `None`: the child may make this call.
pub fn decide(f: &CallFacts<'_>) -> Option<ToolOutput> {
    if NESTING.contains(&f.tool) {
        return Some(denied(format!(
            "{} is not available to a subagent: subagents do not start subagents; report back \
             to the main agent instead",
            f.tool
        )));
    }
    if f.meta.external {
        return Some(denied(format!(
            "{} is an external tool; its read tag carries no guarantee, so only the main agent \
             may call it",
            f.tool
        )));
    }
    if f.tool == moviepilot_api::NAME {
        return moviepilot_read(f);
    }
    if let Some((_, actions, forbidden)) = ACTION_ALLOW_LIST.iter().find(|(t, _, _)| *t == f.tool) {
        return action_read(f, actions, forbidden);
    }
    (!f.effect.is_read()).then(|| {
        denied(format!(
            "{} may change something ({}); a subagent may only read — leave writes to the main \
             agent",
            f.tool, f.effect
        ))
    })
}

fn moviepilot_read(f: &CallFacts<'_>) -> Option<ToolOutput> {
    let args = f.args.cloned().unwrap_or(Value::Null);
    let Ok(call) = serde_json::from_value::<moviepilot_api::MoviePilotApiArgs>(args) else {
        // The tool's own argument errors are the same for every origin.
        return None;
    };
    // An unknown operation is answered by the tool itself, with suggestions; nothing is sent.
    let op = mpa_gateway::catalogue().get(&call.operation_id)?;
    if op.effect != EffectClass::SafeRead {
        return Some(denied(format!(
            "{} is a {} operation; writes, deletes, refreshes, downloads, service operations and \
             sensitive reads belong to the main agent — report what should be done instead",
            op.id, op.effect
        )));
    }
    let secrets = call
        .query
        .as_ref()
        .is_some_and(|q| crate::moviepilot::secret_read::shows_secrets(&Value::Object(q.clone())));
    if secrets {
        return Some(denied(format!(
            "{} with show_secrets is a secret read; a subagent never reads secret values",
            op.id
        )));
    }
    if let Some(Err(e)) = moviepilot_api::prepare(&call) {
        let mut out = json!({
            "success": false,
            "error": DENIED,
            "message": format!(
                "{} is a safe read, but these arguments do not pass its contract ({e}); fix them \
                 from input_contract and call again",
                op.id
            ),
            "operation_id": op.id,
            "input_contract": moviepilot_api::contract(op),
        });
        if let Some(m) = out.as_object_mut() {
            m.retain(|_, v| !v.is_null());
        }
        return Some(ToolOutput::json(&out, mpa_protocol::Outcome::Failed).with_error(DENIED));
    }
    None
}

fn action_read(f: &CallFacts<'_>, actions: &[&str], forbidden: &[&str]) -> Option<ToolOutput> {
    let action = f
        .args
        .and_then(|a| a.get("action"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(arg) = forbidden.iter().find(|k| {
        f.args
            .and_then(|a| a.get(**k))
            .is_some_and(|v| !v.is_null())
    }) {
        return Some(denied(format!(
            "{} with {arg} is not available to a subagent",
            f.tool
        )));
    }
    if actions.contains(&action) {
        return None;
    }
    // A terminal session a child did not get a write/kill grant for answers exactly as a
    // foreign session does: the child's scope may not act on it.
    if f.tool == crate::tools::execute_command::NAME
        && f.args.and_then(|a| a.get("session_id")).is_some()
    {
        return Some(crate::tools::execute_command::access_denied(action));
    }
    Some(denied(format!(
        "{} action {} is not available to a subagent (allowed: {}); leave it to the main agent",
        f.tool,
        if action.is_empty() { "(none)" } else { action },
        actions.join(", ")
    )))
}
