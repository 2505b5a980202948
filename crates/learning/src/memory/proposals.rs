//! Background-review proposals: how they are stored, staged and listed.
//!
//! A review's replace/remove change is staged, pinned to the exact entry texts it would change;
//! only the user's own `/memory approve <id>` ([`super::commands`]) applies it, and only if those
//! entries still exist verbatim. Proposal ids are 32 lowercase hex chars, which also makes them
//! path-safe.

use super::apply::{apply_batch, has_drift};
use super::entries::preview;
use super::reply::{Staged, WriteFailure};
use super::request::{Op, ReplaceMode, WriteRequest};
use super::store::{Store, Target};
use super::write::failure;
use super::{MAX_PROPOSAL_BYTES, MAX_PROPOSALS, Memory};
use crate::ActorKey;
use crate::{ReviewToken, WriteOrigin, durable_fs};
use mpa_protocol::Actor;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::PathBuf;

/// A staged change as saved in `.pending/<id>.json` (the file format is stable: proposals
/// outlive upgrades).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Proposal {
    pub id: String,
    pub target: Target,
    pub operations: Vec<StoredOp>,
    /// `previous[i]`: the full entry op i replaces/removes (None for add).
    pub previous: Vec<Option<String>>,
    pub batch: bool,
    pub created_at: String,
    #[serde(default)]
    pub review_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum StoredAction {
    Add,
    Replace,
    Remove,
}

/// One operation of a proposal file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredOp {
    pub action: StoredAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_text: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub substring: bool,
}

impl From<&Op> for StoredOp {
    fn from(op: &Op) -> Self {
        match op {
            Op::Add { content } => StoredOp {
                action: StoredAction::Add,
                content: Some(content.clone()),
                old_text: None,
                substring: false,
            },
            Op::Replace {
                old_text,
                content,
                mode,
            } => StoredOp {
                action: StoredAction::Replace,
                content: Some(content.clone()),
                old_text: Some(old_text.clone()),
                substring: *mode == ReplaceMode::Substring,
            },
            Op::Remove { old_text } => StoredOp {
                action: StoredAction::Remove,
                content: None,
                old_text: Some(old_text.clone()),
                substring: false,
            },
        }
    }
}

impl From<&StoredOp> for Op {
    fn from(s: &StoredOp) -> Self {
        let text = |t: &Option<String>| t.clone().unwrap_or_default();
        match s.action {
            StoredAction::Add => Op::Add {
                content: text(&s.content),
            },
            StoredAction::Replace => Op::Replace {
                old_text: text(&s.old_text),
                content: text(&s.content),
                mode: if s.substring {
                    ReplaceMode::Substring
                } else {
                    ReplaceMode::Entry
                },
            },
            StoredAction::Remove => Op::Remove {
                old_text: text(&s.old_text),
            },
        }
    }
}

/// One waiting proposal, as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProposalSummary {
    pub id: String,
    pub target: Target,
    pub operations: usize,
    /// The first operation's new content (or the text it targets), cut to 120 chars.
    pub preview: String,
}

/// The proposals waiting for the user's decision, oldest first (at most [`MAX_PROPOSALS`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingProposals {
    pub count: usize,
    pub proposals: Vec<ProposalSummary>,
}

pub(crate) fn is_id(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Proposal {
    pub(crate) fn summary_preview(&self) -> String {
        let text = self
            .operations
            .first()
            .and_then(|o| o.content.as_deref().or(o.old_text.as_deref()))
            .unwrap_or("");
        preview(text, 120)
    }
}

impl Memory {
    fn pending_dir(&self, actor: &Actor) -> PathBuf {
        self.user_root(&actor.user_key()).join(".pending")
    }

    pub(crate) fn proposal_path(&self, actor: &Actor, id: &str) -> PathBuf {
        self.pending_dir(actor).join(format!("{id}.json"))
    }

    /// Files named `<id>.json` in the pending directory (none when it is missing).
    fn proposal_files(&self, actor: &Actor) -> Vec<PathBuf> {
        let Ok(rd) = fs::read_dir(self.pending_dir(actor)) else {
            return Vec::new();
        };
        rd.filter_map(|e| e.ok())
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".json"))
                    .is_some_and(is_id)
            })
            .map(|e| e.path())
            .collect()
    }

    /// Proposals of `actor`, oldest first. Unreadable files are skipped (listed ids only).
    pub(crate) fn proposals(&self, actor: &Actor) -> Vec<Proposal> {
        let mut out: Vec<Proposal> = self
            .proposal_files(actor)
            .iter()
            .filter_map(|p| fs::read(p).ok())
            .filter_map(|b| serde_json::from_slice::<Proposal>(&b).ok())
            .collect();
        out.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        out
    }

    pub(crate) fn pending_count(&self, actor: &Actor) -> usize {
        self.proposal_files(actor).len()
    }

    pub(crate) fn load_proposal(
        &self,
        actor: &Actor,
        id: &str,
        lang: mpa_protocol::Lang,
    ) -> Result<Proposal, String> {
        match fs::read(self.proposal_path(actor, id)) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| {
                lang.pick(
                    format!("Proposal {id} is unreadable ({e}); discard it."),
                    format!("提议 {id} 无法读取（{e}）；请丢弃它。"),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(lang.pick(
                format!("No pending memory proposal {id}."),
                format!("没有待处理的记忆提议 {id}。"),
            )),
            Err(e) => Err(lang.pick(
                format!("Cannot read proposal {id}: {e}"),
                format!("无法读取提议 {id}：{e}"),
            )),
        }
    }

    /// The proposals waiting for the user (read-only; only the user approves or discards). A
    /// successful call ends a run of failures like any successful memory call.
    pub fn pending(&self, actor: &Actor, origin: &WriteOrigin) -> PendingProposals {
        self.reset_failures(actor, origin);
        let proposals: Vec<ProposalSummary> = self
            .proposals(actor)
            .iter()
            .take(MAX_PROPOSALS)
            .map(|p| ProposalSummary {
                id: p.id.clone(),
                target: p.target,
                operations: p.operations.len(),
                preview: p.summary_preview(),
            })
            .collect();
        PendingProposals {
            count: proposals.len(),
            proposals,
        }
    }

    /// Validate a review's rewriting change against the current file and stage it.
    pub(crate) fn stage_proposal(
        &self,
        actor: &Actor,
        store: &Store,
        req: &WriteRequest,
        token: &ReviewToken,
    ) -> Result<Staged, WriteFailure> {
        let (_guard, raw, list) = store.lock_and_read()?;
        if has_drift(&raw, &list, store.limit) {
            return Err(WriteFailure::new(format!(
                "{} was edited outside the memory tool; no proposal was staged. Leave it for the user to clean up.",
                store.label
            )));
        }
        // Staging validates exactly like a foreground write (same locate, budget and
        // empty-store rules) so an invalid change is never staged.
        let mut work = list.clone();
        let previous = apply_batch(&mut work, req.change.ops(), store, req.change.is_batch())
            .map_err(|fail| failure(store, &list, fail))?
            .previous;
        if self.pending_count(actor) >= MAX_PROPOSALS {
            return Err(WriteFailure::new(format!(
                "{MAX_PROPOSALS} memory proposals are already waiting for the user; no new proposal was staged."
            )));
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let proposal = Proposal {
            id: id.clone(),
            target: store.target,
            operations: req.change.ops().iter().map(StoredOp::from).collect(),
            previous,
            batch: req.change.is_batch(),
            created_at: chrono::Utc::now().to_rfc3339(),
            review_id: token.id().to_string(),
        };
        let bytes = serde_json::to_vec_pretty(&proposal)
            .map_err(|e| WriteFailure::new(format!("cannot encode proposal: {e}")))?;
        if bytes.len() > MAX_PROPOSAL_BYTES {
            return Err(WriteFailure::new(format!(
                "The proposal is {} bytes, over the {MAX_PROPOSAL_BYTES}-byte limit; nothing was staged. Propose fewer or shorter changes.",
                bytes.len()
            )));
        }
        if token.is_cancelled() {
            return Err(WriteFailure::new(
                "The background review was cancelled; nothing was staged.",
            ));
        }
        durable_fs::atomic_write(&self.proposal_path(actor, &id), &bytes)
            .map_err(|e| WriteFailure::new(format!("cannot save proposal: {e}")))?;
        Ok(Staged::new(id))
    }
}
