//! The one policy function: for every call, from who acts, where the call comes from, the tool's
//! metadata and the call's effect, it decides whether the call may run. Later rules (the MoviePilot
//! gateway's roles, read-only subagents, the write ledger) are added here, nowhere else.

use super::{ReviewUse, ToolMeta, ToolOutput};
use mpa_protocol::{Actor, EffectClass};

/// Where a call comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A model response inside a user's turn.
    Turn,
    /// `mpagent tool`: one call outside any turn, with the same rules as a turn.
    Direct,
    /// The background learning review: only tools whose [`ReviewUse`] allows it.
    Review { memory_due: bool },
    /// A read-only subagent: reads only.
    ReadOnly,
}

/// What the policy decides from.
#[derive(Debug, Clone, Copy)]
pub struct CallFacts<'a> {
    pub actor: &'a Actor,
    pub origin: Origin,
    pub tool: &'a str,
    pub meta: &'a ToolMeta,
    pub effect: EffectClass,
    /// This call needs an administrator (the tool's own flag, or e.g. an admin-only operation).
    pub requires_admin: bool,
    /// What needs the administrator when it is not the whole tool ("the MoviePilot operation
    /// scheduler.list"): the refusal names it, so the tool is not taken for admin-only.
    pub admin_subject: Option<&'a str>,
    /// How many calls of this same tool the model response holds (1 outside a turn).
    pub same_tool_in_response: usize,
}

/// Allowed, or refused with the tool message the model reads instead (nothing runs).
#[derive(Debug)]
pub enum Decision {
    Allow,
    Deny(ToolOutput),
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
        Origin::ReadOnly if !f.effect.is_read() => {
            return Decision::Deny(ToolOutput::failure(
                "read_only_scope",
                format!(
                    "{} may change something ({}); this scope may only read",
                    f.tool, f.effect
                ),
            ));
        }
        Origin::Turn | Origin::Direct | Origin::ReadOnly => {}
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
    use mpa_protocol::{Outcome, UserId};

    fn actor(is_admin: bool) -> Actor {
        Actor {
            user_id: UserId("1".into()),
            user_name: "u".into(),
            is_admin,
        }
    }

    fn decide_for(actor: &Actor, origin: Origin, meta: ToolMeta, n: usize) -> Option<String> {
        let facts = CallFacts {
            actor,
            origin,
            tool: "t",
            meta: &meta,
            effect: meta.effect,
            requires_admin: false,
            admin_subject: None,
            same_tool_in_response: n,
        };
        match decide(&facts) {
            Decision::Allow => None,
            Decision::Deny(out) => {
                assert_eq!(out.outcome, Outcome::Failed);
                let v: serde_json::Value = serde_json::from_str(&out.content).unwrap();
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
            decide_for(&actor(true), Origin::ReadOnly, memory, 1).as_deref(),
            Some("read_only_scope")
        );
        assert_eq!(
            decide_for(&actor(true), Origin::ReadOnly, ToolMeta::read(), 1),
            None
        );
    }
}
