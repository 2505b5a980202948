//! Who may call what: admin-only tools and calls, the background review's whitelist, read-only
//! origins, once-per-response tools. A gate of the call-gate chain ([`super::gate`]); the rules
//! are [`decide`], applied per call in this order.

use super::gate::{CallFacts, Gate, Verdict};
use super::{ReviewUse, ToolMeta, ToolOutput};
use mpa_protocol::{Actor, AgentOrigin};

/// Where a call comes from (who runs the agent loop, or who calls the tool directly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A model response inside a user's turn (from any front end: the page, the CLI, the
    /// OpenAI-compatible endpoint; the session's channel tells them apart).
    Turn,
    /// `mpagent tool`: one call outside any turn, with the same rules as a turn.
    Direct,
    /// The background learning review: only tools whose [`ReviewUse`] allows it.
    Review { memory_due: bool },
    /// A read-only subagent: reads only.
    Subagent,
    /// A Python kernel's tool RPC: reads only.
    Kernel,
    /// An external MCP client: the rules of a direct call.
    Mcp,
}

impl Origin {
    /// The origin events and front ends know.
    pub fn agent_origin(self) -> AgentOrigin {
        match self {
            Origin::Turn => AgentOrigin::Turn,
            Origin::Direct => AgentOrigin::Direct,
            Origin::Review { .. } => AgentOrigin::Review,
            Origin::Subagent => AgentOrigin::Subagent,
            Origin::Kernel => AgentOrigin::Kernel,
            Origin::Mcp => AgentOrigin::Mcp,
        }
    }

    /// A short name (agent ids start with it).
    pub fn label(self) -> &'static str {
        match self {
            Origin::Turn => "turn",
            Origin::Direct => "direct",
            Origin::Review { .. } => "review",
            Origin::Subagent => "subagent",
            Origin::Kernel => "kernel",
            Origin::Mcp => "mcp",
        }
    }

    /// Origins that may only read.
    pub fn is_read_only(self) -> bool {
        matches!(self, Origin::Subagent | Origin::Kernel)
    }
}

/// Allowed, or refused with the tool message the model reads instead (nothing runs).
#[derive(Debug)]
pub enum Decision {
    Allow,
    Deny(ToolOutput),
}

/// The policy as a gate.
pub struct Policy;

impl Gate for Policy {
    fn name(&self) -> &'static str {
        "policy"
    }

    fn check(&self, call: &CallFacts<'_>) -> Verdict {
        match decide(call) {
            Decision::Allow => Verdict::Allow,
            Decision::Deny(out) => Verdict::Answer(out),
        }
    }
}

pub const REVIEW_DENIED: &str = "cannot execute this tool here; use skills_list/skill_view to read, \
skill_manage to maintain, memory to save facts";

/// Whether the actor is shown the tool at all.
pub fn visible(actor: &Actor, meta: &ToolMeta) -> bool {
    actor.is_admin || !meta.requires_admin
}

pub fn decide(f: &CallFacts<'_>) -> Decision {
    if (f.meta.requires_admin || f.requires_admin) && !f.actor.is_admin {
        let message = match f.admin_subject {
            Some(subject) if !f.meta.requires_admin => format!(
                "{subject} is available to administrators only; {} itself stays available for \
                 the operations your role allows — ask an administrator for this one",
                f.tool
            ),
            _ => format!(
                "{} is available to administrators only; ask an administrator or use another tool",
                f.tool
            ),
        };
        return Decision::Deny(ToolOutput::failure("permission_denied", message));
    }
    match f.origin {
        Origin::Review { memory_due } => {
            let allowed = match f.meta.review {
                ReviewUse::Always => true,
                ReviewUse::WhenMemoryDue => memory_due,
                ReviewUse::Never => false,
            };
            if !allowed {
                return Decision::Deny(ToolOutput::failure(
                    "review_tool_denied",
                    format!("{REVIEW_DENIED} (denied: {})", f.tool),
                ));
            }
        }
        // Subagents have a gate of their own (`subagent::read_only`).
        Origin::Kernel if f.meta.external => {
            return Decision::Deny(ToolOutput::failure(
                "read_only_scope",
                format!(
                    "{} is an external tool; its read tag carries no guarantee, so code may not \
                     call it",
                    f.tool
                ),
            ));
        }
        Origin::Kernel if !f.effect.is_read() => {
            return Decision::Deny(ToolOutput::failure(
                "read_only_scope",
                format!(
                    "{} may change something ({}); this scope may only read",
                    f.tool, f.effect
                ),
            ));
        }
        _ => {}
    }
    if f.meta.once_per_response && f.same_tool_in_response > 1 {
        return Decision::Deny(ToolOutput::failure(
            &format!("multiple_{}", f.tool),
            format!(
                "only one {} per response; nothing was changed, merge the calls into one and retry",
                f.tool
            ),
        ));
    }
    Decision::Allow
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpa_protocol::{EffectClass, Outcome, UserId};

    fn actor(is_admin: bool) -> Actor {
        Actor {
            user_id: UserId("1".into()),
            user_name: "u".into(),
            is_admin,
        }
    }

    fn decide_for(actor: &Actor, origin: Origin, meta: ToolMeta, n: usize) -> Option<String> {
        let (session, turn) = (crate::sync::Slots::new(), crate::sync::Slots::new());
        let facts = CallFacts {
            actor,
            origin,
            channel: "test",
            tool: "t",
            call_id: "c",
            meta: &meta,
            effect: meta.effect,
            requires_admin: false,
            admin_subject: None,
            args: None,
            same_tool_in_response: n,
            session: &session,
            turn: &turn,
        };
        match decide(&facts) {
            Decision::Allow => None,
            Decision::Deny(out) => {
                assert_eq!(out.outcome, Outcome::Failed);
                let v: serde_json::Value = serde_json::from_str(&out.content).unwrap();
                assert_eq!(out.error.as_deref(), v["error"].as_str());
                Some(v["error"].as_str().unwrap().to_string())
            }
        }
    }

    #[test]
    fn rules_in_order() {
        let admin_tool = ToolMeta::new(EffectClass::ArbitraryExecution).admin();
        assert_eq!(
            decide_for(&actor(false), Origin::Turn, admin_tool, 1).as_deref(),
            Some("permission_denied")
        );
        assert_eq!(decide_for(&actor(true), Origin::Turn, admin_tool, 1), None);
        // Admin-only is checked before the review whitelist.
        assert_eq!(
            decide_for(
                &actor(false),
                Origin::Review { memory_due: true },
                admin_tool,
                1
            )
            .as_deref(),
            Some("permission_denied")
        );
        let memory = ToolMeta::new(EffectClass::ReversibleWrite).review(ReviewUse::WhenMemoryDue);
        let skills = ToolMeta::read().review(ReviewUse::Always);
        let review = |due| Origin::Review { memory_due: due };
        assert_eq!(decide_for(&actor(false), review(true), memory, 1), None);
        assert_eq!(
            decide_for(&actor(false), review(false), memory, 1).as_deref(),
            Some("review_tool_denied")
        );
        assert_eq!(decide_for(&actor(false), review(false), skills, 1), None);
        assert_eq!(
            decide_for(&actor(true), review(true), ToolMeta::read(), 1).as_deref(),
            Some("review_tool_denied")
        );
        let plan = ToolMeta::read().once_per_response();
        assert_eq!(decide_for(&actor(false), Origin::Turn, plan, 1), None);
        assert_eq!(
            decide_for(&actor(false), Origin::Turn, plan, 2).as_deref(),
            Some("multiple_t")
        );
        assert_eq!(
            decide_for(&actor(true), Origin::Kernel, memory, 1).as_deref(),
            Some("read_only_scope")
        );
        assert_eq!(
            decide_for(&actor(true), Origin::Kernel, ToolMeta::read(), 1),
            None
        );
    }
}
