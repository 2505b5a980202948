//! What a caller asks [`Skills::manage`](super::Skills::manage) to do. Texts a rule requires
//! may be empty: the batch answers them with a specific error naming the operation.

use super::MAX_OPS;
use super::validate::MAX_CONTENT_CHARS;

/// One operation of a skill batch. Every op names a personal skill of the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManageOp {
    /// A new personal skill; `content` is its whole `SKILL.md` (name/description frontmatter).
    Create {
        name: String,
        content: String,
        category: Option<String>,
    },
    /// Change `SKILL.md` or a support file.
    Patch(Patch),
    /// Create or replace a support file under `references/`, `templates/`, `scripts/`, `assets/`.
    WriteFile {
        name: String,
        file_path: String,
        file_content: String,
    },
    RemoveFile {
        name: String,
        file_path: String,
    },
    /// Alone in its batch. A background review must name the skill that absorbed this one and
    /// only archives it.
    Delete {
        name: String,
        absorbed_into: Option<String>,
    },
}

/// A fuzzy `old_string` → `new_string` edit, or (`content`) a full `SKILL.md` rewrite.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Patch {
    pub name: String,
    /// `None` = `SKILL.md`.
    pub file_path: Option<String>,
    /// Full rewrite; may not be combined with `old_string`/`new_string`.
    pub content: Option<String>,
    pub old_string: Option<String>,
    pub new_string: Option<String>,
    pub replace_all: bool,
}

impl ManageOp {
    pub fn name(&self) -> &str {
        match self {
            ManageOp::Create { name, .. }
            | ManageOp::WriteFile { name, .. }
            | ManageOp::RemoveFile { name, .. }
            | ManageOp::Delete { name, .. } => name,
            ManageOp::Patch(p) => &p.name,
        }
    }

    pub(crate) fn is_delete(&self) -> bool {
        matches!(self, ManageOp::Delete { .. })
    }

    /// The free texts of the op, by field name (checked against [`MAX_CONTENT_CHARS`]).
    fn texts(&self) -> Vec<(&'static str, &str)> {
        match self {
            ManageOp::Create { content, .. } => vec![("content", content)],
            ManageOp::Patch(p) => [
                ("content", &p.content),
                ("old_string", &p.old_string),
                ("new_string", &p.new_string),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.as_deref().map(|v| (k, v)))
            .collect(),
            ManageOp::WriteFile { file_content, .. } => vec![("file_content", file_content)],
            ManageOp::RemoveFile { .. } | ManageOp::Delete { .. } => Vec::new(),
        }
    }
}

/// The batch-level limits, checked before anything else.
pub(crate) fn check_batch(ops: &[ManageOp]) -> Result<(), String> {
    if ops.is_empty() || ops.len() > MAX_OPS {
        return Err(format!(
            "operations must hold 1 to {MAX_OPS} items (got {}).",
            ops.len()
        ));
    }
    for (i, op) in ops.iter().enumerate() {
        for (field, value) in op.texts() {
            if value.chars().count() > MAX_CONTENT_CHARS {
                return Err(format!(
                    "Operation {}: {field} is longer than {MAX_CONTENT_CHARS} characters.",
                    i + 1
                ));
            }
        }
    }
    Ok(())
}
