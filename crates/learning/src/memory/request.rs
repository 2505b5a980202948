//! What a caller asks memory to change. Missing texts are empty strings: the write answers them
//! with a specific, recoverable error (e.g. the current entries to pick `old_text` from).

use super::entries::chars;
use super::store::{Scope, Target};
use super::{MAX_OPS, MAX_TEXT_CHARS};

/// How a replace treats the matched entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReplaceMode {
    /// The whole entry becomes the new content (the reference contract).
    #[default]
    Entry,
    /// Only the first occurrence of `old_text` inside the entry is replaced.
    Substring,
}

/// One memory operation. `old_text` is a short unique part of an existing entry (an exact
/// entry wins over substring matches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Add {
        content: String,
    },
    Replace {
        old_text: String,
        content: String,
        mode: ReplaceMode,
    },
    Remove {
        old_text: String,
    },
}

impl Op {
    /// The new text the op would write (scanned for threats before anything is touched).
    pub(crate) fn content(&self) -> Option<&str> {
        match self {
            Op::Add { content } | Op::Replace { content, .. } => Some(content),
            Op::Remove { .. } => None,
        }
    }

    pub(crate) fn is_add(&self) -> bool {
        matches!(self, Op::Add { .. })
    }

    pub(crate) fn verb(&self) -> &'static str {
        match self {
            Op::Add { .. } => "add",
            Op::Replace { .. } => "replace",
            Op::Remove { .. } => "remove",
        }
    }

    /// The text that replaces `entry` for a replace op.
    pub(crate) fn replacement(&self, entry: &str) -> String {
        match self {
            Op::Replace {
                old_text,
                content,
                mode: ReplaceMode::Substring,
            } if entry != old_text => entry.replacen(old_text.as_str(), content, 1),
            Op::Replace { content, .. } => content.clone(),
            Op::Add { content } => content.clone(),
            Op::Remove { .. } => String::new(),
        }
    }

    fn texts_mut(&mut self) -> Vec<(&'static str, &mut String)> {
        match self {
            Op::Add { content } => vec![("content", content)],
            Op::Replace {
                old_text, content, ..
            } => vec![("content", content), ("old_text", old_text)],
            Op::Remove { old_text } => vec![("old_text", old_text)],
        }
    }
}

/// One operation, or an ordered batch applied all-or-nothing against one store (its budget is
/// checked on the final result only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Single(Op),
    Batch(Vec<Op>),
}

impl Change {
    pub(crate) fn ops(&self) -> &[Op] {
        match self {
            Change::Single(op) => std::slice::from_ref(op),
            Change::Batch(ops) => ops,
        }
    }

    pub(crate) fn is_batch(&self) -> bool {
        matches!(self, Change::Batch(_))
    }
}

/// A write to one store of the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRequest {
    pub target: Target,
    pub scope: Scope,
    pub change: Change,
}

impl WriteRequest {
    /// Check the size limits, then trim every text (all inputs are trimmed before use).
    pub(crate) fn normalised(mut self) -> Result<Self, String> {
        let batch = self.change.is_batch();
        let ops: &mut [Op] = match &mut self.change {
            Change::Single(op) => std::slice::from_mut(op),
            Change::Batch(ops) => {
                if ops.is_empty() || ops.len() > MAX_OPS {
                    return Err(format!(
                        "operations must hold 1 to {MAX_OPS} items (got {}).",
                        ops.len()
                    ));
                }
                ops
            }
        };
        for (i, op) in ops.iter_mut().enumerate() {
            let ctx = if batch {
                format!("Operation {}: ", i + 1)
            } else {
                String::new()
            };
            for (key, text) in op.texts_mut() {
                if chars(text) > MAX_TEXT_CHARS {
                    return Err(format!(
                        "{ctx}{key} is longer than {MAX_TEXT_CHARS} characters."
                    ));
                }
                let trimmed = text.trim();
                if trimmed.len() != text.len() {
                    *text = trimmed.to_string();
                }
            }
        }
        Ok(self)
    }
}
