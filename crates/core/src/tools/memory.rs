//! `memory` (spec learning-guardrails §1.4–§1.7): add / replace / remove stable-memory entries,
//! one operation or an all-or-nothing batch, and list the proposals a background review staged.
//! The write origin comes from [`ToolContext::write_origin`], never from the arguments; a
//! review's rewrites become proposals only the user approves (`/memory approve`).

use super::answer::answer_write;
use super::args::{Batch, choice};
use super::{ReviewUse, ToolContext, ToolMeta, ToolOutput, TypedTool};
use async_trait::async_trait;
use mpa_learning::Memory;
use mpa_learning::memory::{
    Applied, Change, Op, PendingProposals, ReplaceMode, Scope, Staged, Target, WriteRequest,
    Written,
};
use mpa_protocol::EffectClass;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub struct MemoryTool {
    pub memory: Memory,
}

// Arguments of `memory` (a plain comment: a doc comment would become the schema's description).
// Unknown top-level keys are ignored, as the hand parser did, though the schema forbids them;
// unknown keys inside an operation are refused.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct MemoryArgs {
    /// Single operation; omit when using operations.
    #[serde(default)]
    pub action: Option<MemoryAction>,
    /// memory = environment facts (MEMORY.md); user = preferences (USER.md).
    #[serde(default)]
    #[schemars(extend("default" = "memory"))]
    pub target: Option<TargetArg>,
    /// global = the shared MEMORY.md (administrators only).
    #[serde(default)]
    #[schemars(extend("default" = "user"))]
    pub scope: Option<ScopeArg>,
    /// Entry text for add/replace.
    #[serde(default, alias = "new_text")]
    pub content: Option<String>,
    /// Short unique part of the entry to replace/remove.
    #[serde(default)]
    pub old_text: Option<String>,
    /// replace only: entry = replace the whole entry (default); substring = replace just old_text inside it.
    #[serde(default)]
    #[schemars(extend("default" = "entry"))]
    pub mode: Option<ModeArg>,
    /// All changes in one all-or-nothing call; the size limit is checked on the final result.
    #[serde(default)]
    #[schemars(length(min = 1, max = 20))]
    pub operations: Option<Batch<MemoryOpArgs>>,
}

/// One operation of a batch.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryOpArgs {
    pub action: OpAction,
    /// Entry text for add/replace.
    #[serde(default, alias = "new_text")]
    pub content: Option<String>,
    /// Short unique part of the entry to replace/remove.
    #[serde(default)]
    pub old_text: Option<String>,
    #[serde(default)]
    #[schemars(extend("default" = "entry"))]
    pub mode: Option<ModeArg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MemoryAction {
    Add,
    Replace,
    Remove,
    Pending,
}

choice!(MemoryAction, |w| format!("Unknown action '{w}'. Use add, replace or remove."),
    "add" => MemoryAction::Add, "replace" => MemoryAction::Replace,
    "remove" => MemoryAction::Remove, "pending" => MemoryAction::Pending);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OpAction {
    Add,
    Replace,
    Remove,
}

choice!(OpAction, |w| format!("Unknown action '{w}'. Use add, replace or remove."),
    "add" => OpAction::Add, "replace" => OpAction::Replace, "remove" => OpAction::Remove);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TargetArg {
    Memory,
    User,
}

choice!(TargetArg,
    |w| format!("Invalid target '{w}'. Use 'memory' (environment facts) or 'user' (preferences)."),
    "memory" => TargetArg::Memory, "user" => TargetArg::User);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ScopeArg {
    User,
    Global,
}

choice!(ScopeArg, |w| format!("Invalid scope '{w}'. Use 'user' or 'global'."),
    "user" => ScopeArg::User, "global" => ScopeArg::Global);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ModeArg {
    Entry,
    Substring,
}

choice!(ModeArg,
    |w| format!("Invalid mode '{w}'. Use 'entry' (replace the whole entry) or 'substring'."),
    "entry" => ModeArg::Entry, "substring" => ModeArg::Substring);

/// What the arguments ask for.
enum Call {
    Pending,
    Write(WriteRequest),
}

fn op(
    action: OpAction,
    content: Option<String>,
    old_text: Option<String>,
    mode: Option<ModeArg>,
) -> Op {
    let content = content.unwrap_or_default();
    let old_text = old_text.unwrap_or_default();
    match action {
        OpAction::Add => Op::Add { content },
        OpAction::Replace => Op::Replace {
            old_text,
            content,
            mode: match mode {
                Some(ModeArg::Substring) => ReplaceMode::Substring,
                Some(ModeArg::Entry) | None => ReplaceMode::Entry,
            },
        },
        OpAction::Remove => Op::Remove { old_text },
    }
}

impl MemoryArgs {
    fn into_call(self) -> Result<Call, &'static str> {
        if self.action == Some(MemoryAction::Pending) {
            return Ok(Call::Pending);
        }
        let target = match self.target {
            Some(TargetArg::User) => Target::User,
            Some(TargetArg::Memory) | None => Target::Memory,
        };
        let scope = match self.scope {
            Some(ScopeArg::Global) => Scope::Global,
            Some(ScopeArg::User) | None => Scope::User,
        };
        let single = |action| op(action, self.content, self.old_text, self.mode);
        let change = match (self.operations, self.action) {
            (Some(_), Some(_)) => {
                return Err(
                    "Omit action when using operations (each operation has its own action).",
                );
            }
            (Some(Batch(ops)), None) => Change::Batch(
                ops.into_iter()
                    .map(|o| op(o.action, o.content, o.old_text, o.mode))
                    .collect(),
            ),
            (None, Some(MemoryAction::Add)) => Change::Single(single(OpAction::Add)),
            (None, Some(MemoryAction::Replace)) => Change::Single(single(OpAction::Replace)),
            (None, Some(MemoryAction::Remove)) => Change::Single(single(OpAction::Remove)),
            (None, Some(MemoryAction::Pending)) | (None, None) => {
                return Err(
                    "action is required (add, replace, remove or pending), or pass operations for a batch.",
                );
            }
        };
        Ok(Call::Write(WriteRequest {
            target,
            scope,
            change,
        }))
    }
}

/// What the model reads back when the call succeeds (a refusal is the capability's `WriteFailure`).
#[derive(Serialize)]
#[serde(untagged)]
enum MemoryDone {
    Applied(AppliedReply),
    Staged(Staged),
    Pending(PendingReply),
}

#[derive(Serialize)]
struct AppliedReply {
    #[serde(flatten)]
    applied: Applied,
    /// Echoing entries on success made models keep "fixing" and repeat identical writes; this
    /// says the write is finished instead.
    note: &'static str,
}

#[derive(Serialize)]
struct PendingReply {
    success: bool,
    #[serde(flatten)]
    pending: PendingProposals,
    detail_command: &'static str,
    note: &'static str,
}

#[async_trait]
impl TypedTool for MemoryTool {
    type Args = MemoryArgs;
    const NAME: &'static str = "memory";

    fn description(&self) -> String {
        "Save durable facts to stable memory, which is injected into future sessions' system prompt. \
Save proactively: first the user's preferences and corrections (target \"user\", USER.md, 1375 chars), \
then facts about this MoviePilot environment (target \"memory\", MEMORY.md, 2200 chars). \
Entries are whole paragraphs: add appends one; replace swaps the WHOLE entry that old_text identifies \
(old_text is a short unique part of it) for content; remove deletes that entry. \
Make all changes in ONE call with operations (1-20, all-or-nothing, size checked on the final result). \
When a store is full, reissue as one batch that removes or shortens stale entries and adds the new one. \
Do not save trivia, facts easy to re-discover, raw dumps, task progress, TODO state, one-off requests or credentials; \
reusable procedures belong in skills. Writes take effect in the next session's prompt. \
action=\"pending\" lists proposals staged by background review; only the user can approve them."
            .into()
    }

    fn meta(&self) -> ToolMeta {
        ToolMeta::new(EffectClass::ReversibleWrite)
            .internal()
            .self_capped()
            .review(ReviewUse::WhenMemoryDue)
    }

    async fn run(&self, ctx: ToolContext, args: MemoryArgs) -> ToolOutput {
        let call = match args.into_call() {
            Ok(c) => c,
            Err(msg) => {
                return ToolOutput::failure(
                    "invalid_arguments",
                    format!("invalid arguments for memory: {msg}"),
                );
            }
        };
        let memory = self.memory.clone();
        let origin = ctx.write_origin();
        let actor = ctx.actor;
        let work = move || match call {
            Call::Pending => Ok(MemoryDone::Pending(PendingReply {
                success: true,
                pending: memory.pending(&actor, &origin),
                detail_command: "/memory pending <ID>",
                note: "Only the user can approve or discard proposals, by typing /memory approve <ID> or /memory discard <ID>.",
            })),
            Call::Write(req) => memory.write(&actor, &origin, req).map(|w| match w {
                Written::Applied(applied) => MemoryDone::Applied(AppliedReply {
                    applied,
                    note: "Write saved. This update is complete — do not repeat it.",
                }),
                Written::Staged(staged) => MemoryDone::Staged(staged),
            }),
        };
        answer_write(work, |done| match done {
            MemoryDone::Applied(a) => Some(a.applied.changed),
            MemoryDone::Staged(_) => Some(false),
            MemoryDone::Pending(_) => None,
        })
        .await
    }
}
