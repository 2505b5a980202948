//! Adapters for the learning tools: `memory`, `search_memory` (mpa-memory) and `skills_list`,
//! `skill_view`, `skill_manage` (mpa-skills). The hubs do file I/O, so each call runs on the
//! blocking pool. The write origin (foreground or a background review with its cancel flag) comes
//! from the host's [`ToolContext`], never from tool arguments.

use super::{JsonTool, ReviewUse, ToolContext, ToolMeta, ToolOutput};
use async_trait::async_trait;
use mpa_protocol::{ToolSpec, WriteOrigin};
use serde_json::Value;

/// Which learning operation an adapter performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LearningOp {
    Memory,
    SearchMemory,
    SkillsList,
    SkillView,
    SkillManage,
}

impl LearningOp {
    pub const ALL: [LearningOp; 5] = [
        LearningOp::Memory,
        LearningOp::SearchMemory,
        LearningOp::SkillsList,
        LearningOp::SkillView,
        LearningOp::SkillManage,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LearningOp::Memory => "memory",
            LearningOp::SearchMemory => "search_memory",
            LearningOp::SkillsList => "skills_list",
            LearningOp::SkillView => "skill_view",
            LearningOp::SkillManage => "skill_manage",
        }
    }
}

#[derive(Clone)]
pub struct LearningTool {
    pub op: LearningOp,
    pub memory: mpa_memory::MemoryHub,
    pub skills: mpa_skills::SkillHub,
}

impl LearningTool {
    fn origin(ctx: &ToolContext) -> WriteOrigin {
        match &ctx.review {
            Some(token) => WriteOrigin::BackgroundReview(token.clone()),
            None => WriteOrigin::Foreground,
        }
    }

    fn handle(&self, ctx: &ToolContext, args: Value) -> Value {
        let actor = &ctx.actor;
        match self.op {
            LearningOp::Memory => self.memory.memory_tool(actor, &Self::origin(ctx), args),
            LearningOp::SearchMemory => self.memory.search_memory_tool(actor, args),
            LearningOp::SkillsList => self.skills.skills_list(actor, args),
            LearningOp::SkillView => self.skills.skill_view(actor, &Self::origin(ctx), args),
            LearningOp::SkillManage => self.skills.skill_manage(actor, &Self::origin(ctx), args),
        }
    }
}

#[async_trait]
impl JsonTool for LearningTool {
    fn spec(&self) -> ToolSpec {
        let (description, parameters) = match self.op {
            LearningOp::Memory => (
                mpa_memory::memory_tool_description(),
                mpa_memory::memory_tool_schema(),
            ),
            LearningOp::SearchMemory => (
                mpa_memory::search_memory_description(),
                mpa_memory::search_memory_schema(),
            ),
            LearningOp::SkillsList => (
                mpa_skills::skills_list_description(),
                mpa_skills::skills_list_schema(),
            ),
            LearningOp::SkillView => (
                mpa_skills::skill_view_description(),
                mpa_skills::skill_view_schema(),
            ),
            LearningOp::SkillManage => (
                mpa_skills::skill_manage_description(),
                mpa_skills::skill_manage_schema(),
            ),
        };
        ToolSpec {
            name: self.op.name().into(),
            description: description.to_string(),
            parameters,
        }
    }

    fn meta(&self) -> ToolMeta {
        let (effect, review) = match self.op {
            LearningOp::Memory => (
                mpa_protocol::EffectClass::ReversibleWrite,
                ReviewUse::WhenMemoryDue,
            ),
            LearningOp::SkillManage => (
                mpa_protocol::EffectClass::ReversibleWrite,
                ReviewUse::Always,
            ),
            LearningOp::SkillsList | LearningOp::SkillView => {
                (mpa_protocol::EffectClass::SafeRead, ReviewUse::Always)
            }
            LearningOp::SearchMemory => {
                (mpa_protocol::EffectClass::SensitiveRead, ReviewUse::Never)
            }
        };
        ToolMeta::new(effect)
            .internal()
            .self_capped()
            .review(review)
    }

    async fn call(&self, ctx: ToolContext, args: Value) -> ToolOutput {
        let this = self.clone();
        let joined = tokio::task::spawn_blocking(move || this.handle(&ctx, args)).await;
        match joined {
            Ok(v) => ToolOutput::classified(v.to_string(), false),
            Err(_) => ToolOutput::failure(
                "tool_failed",
                "tool failed (internal error); check arguments or query current state",
            ),
        }
    }
}
