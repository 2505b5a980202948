//! What a memory write answers. Serialised as-is for the caller (core's `memory` tool); the
//! `success` flag follows from the type, the texts are clear and secret-free.

use super::apply::AppliedOps;
use super::store::{Scope, Target};
use serde::Serialize;

/// A write that was accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Written {
    /// The store was written (or already held the entry: `changed: false`).
    Applied(Applied),
    /// A background review's rewrite, staged for the user's approval; memory is unchanged.
    Staged(Staged),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Applied {
    pub(crate) success: bool,
    /// This update is complete; repeating it changes nothing.
    done: bool,
    pub changed: bool,
    pub target: Target,
    pub scope: Scope,
    pub entry_count: usize,
    /// `chars/limit` of the store after the write.
    pub usage: String,
    pub message: String,
    /// `previous_entries[i]`: the full entry op i replaced or removed (`None` for add).
    pub previous_entries: Vec<Option<String>>,
    /// Set when the store is at 90 % of its budget or more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl Applied {
    pub(crate) fn new(
        target: Target,
        scope: Scope,
        list: &[String],
        limit: usize,
        ops: AppliedOps,
    ) -> Self {
        let used = super::entries::usage(list);
        let warning = (used * 10 >= limit * 9).then(|| {
            format!(
                "{} is at {used}/{limit} chars; consolidate soon (one batch that shortens or removes stale entries).",
                target.file_name()
            )
        });
        Self {
            success: true,
            done: true,
            changed: ops.changed,
            target,
            scope,
            entry_count: list.len(),
            usage: format!("{used}/{limit}"),
            message: ops.message,
            // The full entries a write replaced go back to the model: as it may be shown them.
            previous_entries: ops
                .previous
                .into_iter()
                .map(|e| e.map(|e| crate::threat::shown(&e).into_owned()))
                .collect(),
            warning,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Staged {
    pub(crate) success: bool,
    done: bool,
    changed: bool,
    staged: bool,
    proposal_staged: bool,
    /// 32 lowercase hex chars; the user approves with `/memory approve <id>`.
    pub pending_id: String,
    pub message: String,
}

impl Staged {
    pub(crate) fn new(pending_id: String) -> Self {
        let message = format!(
            "Staged as proposal {pending_id}; memory is unchanged until the user runs /memory approve {pending_id} (they can review it with /memory pending). Do not approve it yourself."
        );
        Self {
            success: true,
            done: true,
            changed: false,
            staged: true,
            proposal_staged: true,
            pending_id,
            message,
        }
    }
}

/// A refused write: nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WriteFailure {
    pub(crate) success: bool,
    /// The failure cap was reached this turn: stop retrying and answer the user.
    #[serde(rename = "done", skip_serializing_if = "std::ops::Not::not")]
    pub terminal: bool,
    pub error: String,
    /// Previews of the entries an ambiguous `old_text` matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<String>>,
    /// The store's entries (sanitised) to pick a correct `old_text` from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_entries: Option<Vec<String>>,
    /// `chars/limit` of the store as it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<String>,
}

impl WriteFailure {
    pub(crate) fn new(error: impl Into<String>) -> Self {
        Self {
            success: false,
            terminal: false,
            error: error.into(),
            matches: None,
            current_entries: None,
            usage: None,
        }
    }

    pub(crate) fn terminal(failures: u32) -> Self {
        Self {
            terminal: true,
            ..Self::new(format!(
                "Memory consolidation failed {failures} times this turn. Stop retrying memory writes now and continue with your reply to the user; the memory update can wait for a later turn."
            ))
        }
    }
}

impl From<crate::Error> for WriteFailure {
    fn from(e: crate::Error) -> Self {
        Self::new(e.to_string())
    }
}
