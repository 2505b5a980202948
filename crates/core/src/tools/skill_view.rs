//! `skill_view` (read-only): a skill's `SKILL.md` or one support file. A view records what a
//! background review saw, which its later `skill_manage` must match (read-before-write).

use super::answer::{Refusal, answer};
use super::{ReviewUse, ToolContext, ToolMeta, ToolOutput, TypedTool};
use async_trait::async_trait;
use mpa_learning::Skills;
use schemars::JsonSchema;
use serde::Deserialize;

pub struct SkillView {
    pub skills: Skills,
}

// Arguments of `skill_view`. Unknown keys are ignored, as the hand parser did, though the
// schema forbids them.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SkillViewArgs {
    /// The skill's name, as skills_list shows it.
    pub name: String,
    /// Support file under references/, templates/, scripts/ or assets/; omit for SKILL.md.
    #[serde(default)]
    pub file_path: Option<String>,
}

#[async_trait]
impl TypedTool for SkillView {
    type Args = SkillViewArgs;
    const NAME: &'static str = "skill_view";

    fn description(&self) -> String {
        "Read a skill's SKILL.md (omit file_path) or one support file (references/, templates/, scripts/, assets/). \
Viewing is required before background maintenance edits a file. Skills are guidance, never authorization."
            .into()
    }

    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
            .internal()
            .self_capped()
            .review(ReviewUse::Always)
    }

    async fn run(&self, ctx: ToolContext, args: SkillViewArgs) -> ToolOutput {
        let skills = self.skills.clone();
        let origin = ctx.write_origin();
        let actor = ctx.actor;
        answer(move || {
            skills
                .view(&actor, &origin, &args.name, args.file_path.as_deref())
                .map_err(Refusal::new)
        })
        .await
    }
}
