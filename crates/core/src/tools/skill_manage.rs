//! `skill_manage`: one ordered, all-or-nothing batch of changes to the caller's personal skills
//! (create, patch, write_file, remove_file, delete). The write origin comes from
//! [`ToolContext::write_origin`]; a background review may only maintain skills it created, after
//! viewing them, and only archives on delete.

use super::answer::answer;
use super::args::{Batch, choice};
use super::{ReviewUse, ToolContext, ToolMeta, ToolOutput, TypedTool};
use async_trait::async_trait;
use mpa_learning::Skills;
use mpa_learning::skills::{ManageOp, Patch};
use mpa_protocol::EffectClass;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use std::borrow::Cow;

pub struct SkillManage {
    pub skills: Skills,
}

/// Arguments of `skill_manage`: `{operations: [...]}`. A lone operation object at the top level
/// is accepted too (the schema shows only the batch form).
#[derive(Debug)]
pub struct SkillManageArgs {
    pub operations: Vec<ManageOpArgs>,
}

// The schema of `SkillManageArgs` (a plain comment: a doc comment would become its description).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "only its schema is used")]
struct SkillManageSchema {
    /// 1-20 operations, applied in order; if any fails, nothing is changed.
    #[schemars(length(min = 1, max = 20))]
    operations: Vec<ManageOpArgs>,
}

/// One operation.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ManageOpArgs {
    pub action: ManageAction,
    /// The personal skill's name.
    #[schemars(pattern(r"^[a-z0-9][a-z0-9_-]{0,63}$"))]
    pub name: String,
    /// create: the SKILL.md; patch: a full SKILL.md rewrite (instead of old_string/new_string).
    #[serde(default)]
    pub content: Option<String>,
    /// create: the category directory to put the skill in.
    #[serde(default)]
    pub category: Option<String>,
    /// patch: a unique part of the current text (copy it from skill_view).
    #[serde(default)]
    pub old_string: Option<String>,
    /// patch: the text that replaces old_string.
    #[serde(default)]
    pub new_string: Option<String>,
    /// patch: replace every match instead of requiring exactly one.
    #[serde(default)]
    pub replace_all: bool,
    /// patch / write_file / remove_file: a support file under references/, templates/, scripts/ or assets/ (patch: omit for SKILL.md).
    #[serde(default)]
    pub file_path: Option<String>,
    /// write_file: the file's new content.
    #[serde(default)]
    pub file_content: Option<String>,
    /// delete: the skill that now holds this one's content (required for background review).
    #[serde(default)]
    pub absorbed_into: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ManageAction {
    Create,
    Patch,
    WriteFile,
    RemoveFile,
    Delete,
}

choice!(ManageAction,
    |w| format!("Unknown action '{w}'. Use create, patch, write_file, remove_file or delete."),
    "create" => ManageAction::Create, "patch" => ManageAction::Patch,
    "write_file" => ManageAction::WriteFile, "remove_file" => ManageAction::RemoveFile,
    "delete" => ManageAction::Delete);

impl<'de> Deserialize<'de> for SkillManageArgs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let serde_json::Value::Object(obj) = serde_json::Value::deserialize(d)? else {
            return Err(D::Error::custom("Arguments must be a JSON object."));
        };
        let operations = match obj.get("operations") {
            Some(_) if obj.len() > 1 => {
                return Err(D::Error::custom("Pass only operations at the top level."));
            }
            Some(ops) => {
                Batch::<ManageOpArgs>::deserialize(ops)
                    .map_err(D::Error::custom)?
                    .0
            }
            None if obj.contains_key("action") => {
                let op = ManageOpArgs::deserialize(serde_json::Value::Object(obj))
                    .map_err(|e| D::Error::custom(format!("Operation 1: {e}")))?;
                vec![op]
            }
            None => {
                return Err(D::Error::custom(
                    "operations is required: [{action, name, ...}].",
                ));
            }
        };
        Ok(SkillManageArgs { operations })
    }
}

impl JsonSchema for SkillManageArgs {
    fn schema_name() -> Cow<'static, str> {
        "SkillManageArgs".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        SkillManageSchema::json_schema(generator)
    }
}

impl From<ManageOpArgs> for ManageOp {
    fn from(a: ManageOpArgs) -> Self {
        match a.action {
            ManageAction::Create => ManageOp::Create {
                name: a.name,
                content: a.content.unwrap_or_default(),
                category: a.category,
            },
            ManageAction::Patch => ManageOp::Patch(Patch {
                name: a.name,
                file_path: a.file_path,
                content: a.content,
                old_string: a.old_string,
                new_string: a.new_string,
                replace_all: a.replace_all,
            }),
            ManageAction::WriteFile => ManageOp::WriteFile {
                name: a.name,
                file_path: a.file_path.unwrap_or_default(),
                file_content: a.file_content.unwrap_or_default(),
            },
            ManageAction::RemoveFile => ManageOp::RemoveFile {
                name: a.name,
                file_path: a.file_path.unwrap_or_default(),
            },
            ManageAction::Delete => ManageOp::Delete {
                name: a.name,
                absorbed_into: a.absorbed_into,
            },
        }
    }
}

#[async_trait]
impl TypedTool for SkillManage {
    type Args = SkillManageArgs;
    const NAME: &'static str = "skill_manage";

    fn description(&self) -> String {
        "Maintain personal skills in one ordered batch: {operations: [...]} with 1-20 operations, each \
{action, name, ...}: create {name, content (SKILL.md with name/description frontmatter), category?}; \
patch {name, old_string, new_string, file_path?, replace_all?} (fuzzy matching tolerates whitespace, \
indentation and quote differences; ambiguous matches are refused) or patch {name, content} for a full \
SKILL.md rewrite; write_file {name, file_path under references/|templates/|scripts/|assets/, file_content}; \
remove_file {name, file_path}; delete {name, absorbed_into?} (alone in its batch). Any failing operation \
means nothing is changed. Public skills are read-only; frontmatter may not declare allowed-tools. \
Read the file with skill_view first and copy old_string exactly."
            .into()
    }

    fn meta(&self) -> ToolMeta {
        ToolMeta::new(EffectClass::ReversibleWrite)
            .internal()
            .self_capped()
            .review(ReviewUse::Always)
    }

    async fn run(&self, ctx: ToolContext, args: SkillManageArgs) -> ToolOutput {
        let ops: Vec<ManageOp> = args.operations.into_iter().map(ManageOp::from).collect();
        let skills = self.skills.clone();
        let origin = ctx.write_origin();
        let actor = ctx.actor;
        answer(move || skills.manage(&actor, &origin, ops)).await
    }
}
