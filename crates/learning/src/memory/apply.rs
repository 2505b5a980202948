//! Applying operations to a working copy of a store's entries: locate, budgets, batches. Pure:
//! the caller reads the file under the lock and writes the result once.

use super::entries::{chars, join, preview, usage};
use super::request::Op;
use super::store::Store;

/// Why an operation could not be applied. `show_entries` adds the (sanitised) current entries
/// so the caller can pick a correct `old_text`.
#[derive(Debug)]
pub(crate) struct Fail {
    pub error: String,
    pub matches: Option<Vec<String>>,
    pub show_entries: bool,
}

impl Fail {
    pub(crate) fn plain(error: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            matches: None,
            show_entries: false,
        }
    }

    pub(crate) fn with_entries(error: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            matches: None,
            show_entries: true,
        }
    }
}

/// What a successful application did: the full entry each op replaced or removed (None for
/// add), the message, and whether the entries changed at all.
pub(crate) struct AppliedOps {
    pub previous: Vec<Option<String>>,
    pub message: String,
    pub changed: bool,
}

/// Content that would not survive a parse → serialise round trip, or one entry larger than
/// the whole budget: signs of free-form edits by another writer.
pub(crate) fn has_drift(raw: &str, list: &[String], limit: usize) -> bool {
    raw.trim() != join(list) || list.iter().any(|e| chars(e) > limit)
}

enum Located {
    At(usize),
    NoMatch,
    Ambiguous(Vec<String>),
}

/// Exact entry equality wins; otherwise every entry containing `old` as a substring.
fn locate(list: &[String], old: &str) -> Located {
    if let Some(i) = list.iter().position(|e| e == old) {
        return Located::At(i);
    }
    let hits: Vec<usize> = list
        .iter()
        .enumerate()
        .filter(|(_, e)| e.contains(old))
        .map(|(i, _)| i)
        .collect();
    match hits.as_slice() {
        [] => Located::NoMatch,
        [first, rest @ ..] => {
            if rest.iter().all(|&i| list[i] == list[*first]) {
                Located::At(*first)
            } else {
                Located::Ambiguous(
                    hits.iter()
                        .map(|&i| preview(&crate::threat::shown(&list[i]), 80))
                        .collect(),
                )
            }
        }
    }
}

fn locate_or_fail(list: &[String], old: &str, prefix: &str) -> Result<usize, Fail> {
    match locate(list, old) {
        Located::At(i) => Ok(i),
        Located::NoMatch => Err(Fail::with_entries(format!(
            "{prefix}No entry matched '{}'. Pick old_text from current_entries.",
            preview(old, 80)
        ))),
        Located::Ambiguous(m) => Err(Fail {
            error: format!(
                "{prefix}Multiple entries matched '{}'. Be more specific.",
                preview(old, 80)
            ),
            matches: Some(m),
            show_entries: false,
        }),
    }
}

/// One operation outside a batch.
pub(crate) fn apply_single(
    list: &mut Vec<String>,
    op: &Op,
    store: &Store,
) -> Result<AppliedOps, Fail> {
    let limit = store.limit;
    let file = store.target.file_name();
    let done = |previous, message: &str, changed| AppliedOps {
        previous: vec![previous],
        message: message.to_string(),
        changed,
    };
    match op {
        Op::Add { content } => {
            if content.is_empty() {
                return Err(Fail::plain("Content cannot be empty for add."));
            }
            if list.iter().any(|e| e == content) {
                return Ok(done(
                    None,
                    "Entry already exists (no duplicate added).",
                    false,
                ));
            }
            let mut next = list.clone();
            next.push(content.clone());
            let total = usage(&next);
            if total > limit {
                return Err(Fail::with_entries(format!(
                    "{file} is at {}/{limit} chars; adding this entry ({} chars) would exceed the limit ({total}/{limit}). Reissue as ONE batch that removes or shortens stale entries and adds the new one.",
                    usage(list),
                    chars(content)
                )));
            }
            *list = next;
            Ok(done(None, "Entry added.", true))
        }
        Op::Replace { old_text, .. } | Op::Remove { old_text } => {
            let verb = op.verb();
            if old_text.is_empty() {
                return Err(Fail::with_entries(format!(
                    "old_text is required for {verb}. Reissue the call with old_text set to a short unique part of one of current_entries."
                )));
            }
            if let Op::Replace { content, .. } = op
                && content.is_empty()
            {
                return Err(Fail::plain(
                    "content cannot be empty for replace; use action=\"remove\" to delete an entry.",
                ));
            }
            let i = locate_or_fail(list, old_text, "")?;
            let previous = list[i].clone();
            if let Op::Remove { .. } = op {
                list.remove(i);
                return Ok(done(Some(previous), "Entry removed.", true));
            }
            let mut next = list.clone();
            next[i] = op.replacement(&list[i]);
            dedup(&mut next);
            let total = usage(&next);
            if total > limit {
                return Err(Fail::with_entries(format!(
                    "Replacing would put {file} at {total}/{limit} chars, over the limit. Shorten the content or remove other entries in one batch."
                )));
            }
            *list = next;
            Ok(done(Some(previous), "Entry replaced.", true))
        }
    }
}

/// Drop later exact duplicates (first kept), as [`super::entries::parse`] does when reading.
pub(crate) fn dedup(list: &mut Vec<String>) {
    let mut seen: Vec<String> = Vec::with_capacity(list.len());
    list.retain(|e| {
        if seen.contains(e) {
            false
        } else {
            seen.push(e.clone());
            true
        }
    });
}

const NOTHING_APPLIED: &str = "No operations were applied (batch is all-or-nothing).";

/// An all-or-nothing batch: ops apply in order to a working copy; duplicates of an add are
/// skipped; only the final size counts. `forbid_empty`: a batch may not clear a non-empty store.
pub(crate) fn apply_batch(
    list: &mut Vec<String>,
    ops: &[Op],
    store: &Store,
    forbid_empty: bool,
) -> Result<AppliedOps, Fail> {
    let original_len = list.len();
    let mut work = list.clone();
    let mut previous = Vec::with_capacity(ops.len());
    for (n, op) in ops.iter().enumerate() {
        let prefix = format!("Operation {}: ", n + 1);
        let abort = |mut f: Fail| {
            f.error = format!(
                "{}{} {NOTHING_APPLIED}",
                prefix,
                f.error.trim_start_matches(&prefix)
            );
            f.show_entries = true;
            f
        };
        match op {
            Op::Add { content } => {
                if content.is_empty() {
                    return Err(abort(Fail::plain("add needs non-empty content.")));
                }
                if !work.iter().any(|e| e == content) {
                    work.push(content.clone());
                }
                previous.push(None);
            }
            Op::Replace { old_text, .. } | Op::Remove { old_text } => {
                if old_text.is_empty() {
                    return Err(abort(Fail::plain(
                        "old_text is required for replace/remove.",
                    )));
                }
                if let Op::Replace { content, .. } = op
                    && content.is_empty()
                {
                    return Err(abort(Fail::plain(
                        "replace needs non-empty content; use remove to delete an entry.",
                    )));
                }
                let i = locate_or_fail(&work, old_text, &prefix).map_err(abort)?;
                previous.push(Some(work[i].clone()));
                if let Op::Remove { .. } = op {
                    work.remove(i);
                } else {
                    work[i] = op.replacement(&work[i]);
                    dedup(&mut work);
                }
            }
        }
    }
    if forbid_empty && original_len > 0 && work.is_empty() {
        return Err(Fail::with_entries(
            "A batch may not remove every entry. To clear the store, remove the last entry with a single remove action. No operations were applied (batch is all-or-nothing).",
        ));
    }
    let total = usage(&work);
    if total > store.limit {
        return Err(Fail::with_entries(format!(
            "The batch would leave {} at {total}/{} chars, over the limit; nothing was written. Remove or shorten more entries in the same batch. {NOTHING_APPLIED}",
            store.target.file_name(),
            store.limit
        )));
    }
    let changed = work != *list;
    *list = work;
    Ok(AppliedOps {
        previous,
        message: format!("Applied {} operation(s).", ops.len()),
        changed,
    })
}
