//! What skill calls answer. Serialised as-is for the caller (core's skill tools); the `success`
//! flag follows from the type.

use super::catalog::SkillSource;
use serde::Serialize;

/// One visible skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillSummary {
    pub name: String,
    /// The first 60 chars of its description.
    pub description: String,
    pub category: Option<String>,
    pub source: SkillSource,
}

/// The skills a user sees, sorted by (category, name), and their categories.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillList {
    pub skills: Vec<SkillSummary>,
    pub categories: Vec<String>,
}

/// One file of a skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillFile {
    pub(crate) success: bool,
    pub name: String,
    /// `SKILL.md` or the support file's path inside the skill.
    pub file_path: String,
    pub content: String,
    /// Personal skills are editable, public ones are not.
    pub editable: bool,
    pub source: SkillSource,
    /// With `SKILL.md`: the skill's support files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub linked_files: Option<Vec<String>>,
}

/// What one operation of a committed batch did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum OpResult {
    Create {
        name: String,
        path: String,
    },
    #[serde(rename = "patch")]
    Patched {
        name: String,
        file_path: String,
        replacements: usize,
        /// The matcher strategy that found `old_string`.
        strategy: &'static str,
    },
    #[serde(rename = "patch")]
    Rewritten {
        name: String,
        file_path: String,
        rewrite: bool,
    },
    WriteFile {
        name: String,
        file_path: String,
    },
    RemoveFile {
        name: String,
        file_path: String,
    },
    #[serde(rename = "delete")]
    Deleted {
        name: String,
    },
    #[serde(rename = "delete")]
    Archived {
        name: String,
        archived: bool,
        absorbed_into: String,
    },
}

/// A committed batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManageReport {
    pub(crate) success: bool,
    pub applied: usize,
    /// The skills the batch touched, in order of first touch.
    pub skills: Vec<String>,
    pub results: Vec<OpResult>,
    /// A foreground delete whose quarantined copy could not be removed yet (cleaned at start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleanup_pending: Option<bool>,
}

/// A refused batch: no file was changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManageFailure {
    pub(crate) success: bool,
    pub error: String,
    /// 1-based index of the operation that failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<usize>,
    /// A background write needs a fresh view of the file first.
    #[serde(
        rename = "_read_before_write_required",
        skip_serializing_if = "Option::is_none"
    )]
    pub read_before_write_required: Option<bool>,
    /// The skill's support files, when the named one does not exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_files: Option<Vec<String>>,
    /// The first 500 chars of the file, when `old_string` matched nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_preview: Option<String>,
}

impl ManageFailure {
    pub(crate) fn new(error: impl Into<String>) -> Self {
        Self {
            success: false,
            error: error.into(),
            operation: None,
            read_before_write_required: None,
            available_files: None,
            file_preview: None,
        }
    }
}
