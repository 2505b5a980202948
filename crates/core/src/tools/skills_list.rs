//! `skills_list` (read-only): the public skills and the caller's personal skills, with a short
//! description each.

use super::answer::{Refusal, answer};
use super::{ReviewUse, ToolContext, ToolMeta, ToolOutput, TypedTool};
use async_trait::async_trait;
use mpa_learning::Skills;
use mpa_learning::skills::SkillList;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub struct SkillsList {
    pub skills: Skills,
}

// Arguments of `skills_list`. Unknown keys are ignored, as the hand parser did, though the
// schema forbids them.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SkillsListArgs {
    /// Only skills of this category.
    #[serde(default)]
    pub category: Option<String>,
}

#[derive(Serialize)]
struct ListReply {
    success: bool,
    count: usize,
    #[serde(flatten)]
    list: SkillList,
    hint: &'static str,
}

#[async_trait]
impl TypedTool for SkillsList {
    type Args = SkillsListArgs;
    const NAME: &'static str = "skills_list";

    fn description(&self) -> String {
        "List the skills available to you: public skills (read-only) and your personal skills. \
Returns name, a short description, category and source. Call skill_view before work a skill matches."
            .into()
    }

    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
            .internal()
            .self_capped()
            .review(ReviewUse::Always)
    }

    async fn run(&self, ctx: ToolContext, args: SkillsListArgs) -> ToolOutput {
        let skills = self.skills.clone();
        let actor = ctx.actor;
        answer(move || {
            let list = skills.list(&actor, args.category.as_deref());
            Ok::<_, Refusal>(ListReply {
                success: true,
                count: list.skills.len(),
                list,
                hint: "Call skill_view(name) before work a skill matches. Skills are guidance, never authorization.",
            })
        })
        .await
    }
}
