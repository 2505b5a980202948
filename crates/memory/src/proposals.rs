//! Background-review proposals and the `/memory` user commands.
//!
//! A review's replace/remove batch is staged, pinned to the exact entry texts it would change;
//! only the user's own `/memory approve <id>` applies it, and only if those entries still exist
//! verbatim. Proposal ids are 32 lowercase hex chars, which also makes them path-safe.

use crate::durable_fs;
use crate::entries::{preview, usage};
use crate::hub::{Action, Fail, Op, Request, Store, Target, dedup, err_body, has_drift};
use crate::{MAX_PROPOSAL_BYTES, MAX_PROPOSALS, MemoryHub, ReviewToken};
use mpa_protocol::Actor;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::fs;
use std::path::PathBuf;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Proposal {
    pub id: String,
    pub target: Target,
    pub operations: Vec<Op>,
    /// `previous[i]`: the full entry op i replaces/removes (None for add).
    pub previous: Vec<Option<String>>,
    pub batch: bool,
    pub created_at: String,
    #[serde(default)]
    pub review_id: String,
}

const USAGE: &str = "Usage: /memory pending [ID] · /memory approve ID · /memory discard ID";

fn is_id(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl MemoryHub {
    fn pending_dir(&self, actor: &Actor) -> PathBuf {
        self.user_root(&actor.user_key()).join(".pending")
    }

    fn proposal_path(&self, actor: &Actor, id: &str) -> PathBuf {
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

    /// Validate a review's rewriting batch against the current file and stage it.
    pub(crate) fn stage_proposal(
        &self,
        actor: &Actor,
        store: &Store,
        req: &Request,
        token: &ReviewToken,
    ) -> std::result::Result<Value, Value> {
        let _guard = self
            .lock(&store.lock_root, &store.label)
            .map_err(|e| err_body(&e.to_string()))?;
        let (raw, list) = self
            .read_store(store)
            .map_err(|e| err_body(&e.to_string()))?;
        if has_drift(&raw, &list, store.limit) {
            return Err(err_body(&format!(
                "{} was edited outside the memory tool; no proposal was staged. Leave it for the user to clean up.",
                store.label
            )));
        }
        let mut work = list.clone();
        let previous = match apply_ops_for_proposal(&mut work, req, store) {
            Ok(p) => p,
            Err(fail) => return Err(self.fail_body(store, &list, fail)),
        };
        if self.pending_count(actor) >= MAX_PROPOSALS {
            return Err(err_body(&format!(
                "{MAX_PROPOSALS} memory proposals are already waiting for the user; no new proposal was staged."
            )));
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let proposal = Proposal {
            id: id.clone(),
            target: store.target,
            operations: req.ops.clone(),
            previous,
            batch: req.batch,
            created_at: chrono::Utc::now().to_rfc3339(),
            review_id: token.id().to_string(),
        };
        let bytes = serde_json::to_vec_pretty(&proposal)
            .map_err(|e| err_body(&format!("cannot encode proposal: {e}")))?;
        if bytes.len() > MAX_PROPOSAL_BYTES {
            return Err(err_body(&format!(
                "The proposal is {} bytes, over the {MAX_PROPOSAL_BYTES}-byte limit; nothing was staged. Propose fewer or shorter changes.",
                bytes.len()
            )));
        }
        if token.is_cancelled() {
            return Err(err_body(
                "The background review was cancelled; nothing was staged.",
            ));
        }
        durable_fs::atomic_write(&self.proposal_path(actor, &id), &bytes)
            .map_err(|e| err_body(&format!("cannot save proposal: {e}")))?;
        Ok(json!({
            "success": true,
            "done": true,
            "changed": false,
            "staged": true,
            "proposal_staged": true,
            "pending_id": id,
            "message": format!(
                "Staged as proposal {id}; memory is unchanged until the user runs /memory approve {id} (they can review it with /memory pending). Do not approve it yourself."
            ),
        }))
    }

    /// `memory(action="pending")`: read-only listing for the model.
    pub(crate) fn pending_listing(&self, actor: &Actor) -> Value {
        let list: Vec<Value> = self
            .proposals(actor)
            .iter()
            .take(MAX_PROPOSALS)
            .map(summary)
            .collect();
        json!({
            "success": true,
            "count": list.len(),
            "proposals": list,
            "detail_command": "/memory pending <ID>",
            "note": "Only the user can approve or discard proposals, by typing /memory approve <ID> or /memory discard <ID>.",
        })
    }

    /// Handle `/memory …` typed by the user. `None` when `text` is not a memory command.
    pub fn user_command(&self, actor: &Actor, text: &str) -> Option<String> {
        let mut words = text.split_whitespace();
        if words.next()? != "/memory" {
            return None;
        }
        let sub = words.next();
        let arg = words.next();
        if words.next().is_some() {
            return Some(USAGE.to_string());
        }
        Some(match (sub, arg) {
            (Some("pending"), None) => self.render_pending(actor),
            (Some("pending"), Some(id)) if is_id(id) => self.render_detail(actor, id),
            (Some("approve"), Some(id)) if is_id(id) => self.approve(actor, id),
            (Some("discard"), Some(id)) if is_id(id) => self.discard(actor, id),
            (Some("pending" | "approve" | "discard"), Some(_)) => {
                format!("Proposal ids are 32 lowercase hex characters. {USAGE}")
            }
            _ => USAGE.to_string(),
        })
    }

    fn load(&self, actor: &Actor, id: &str) -> Result<Proposal, String> {
        match fs::read(self.proposal_path(actor, id)) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| format!("Proposal {id} is unreadable ({e}); discard it.")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(format!("No pending memory proposal {id}."))
            }
            Err(e) => Err(format!("Cannot read proposal {id}: {e}")),
        }
    }

    fn render_pending(&self, actor: &Actor) -> String {
        let list = self.proposals(actor);
        if list.is_empty() {
            return "No pending memory proposals.".to_string();
        }
        let mut out = format!("{} pending memory proposal(s):\n", list.len());
        for p in list.iter().take(MAX_PROPOSALS) {
            out.push_str(&format!(
                "- {} · {} · {} operation(s) · {}\n",
                p.id,
                p.target.as_str(),
                p.operations.len(),
                summary_preview(p)
            ));
        }
        out.push_str("Details: /memory pending <ID> · apply: /memory approve <ID> · drop: /memory discard <ID>");
        out
    }

    fn render_detail(&self, actor: &Actor, id: &str) -> String {
        match self.load(actor, id) {
            Ok(p) => {
                let mut out = format!(
                    "Proposal {} for {} ({} operation(s)):\n",
                    p.id,
                    p.target.as_str(),
                    p.operations.len()
                );
                for (i, op) in p.operations.iter().enumerate() {
                    let action = match op.action {
                        Action::Add => "add",
                        Action::Replace => "replace",
                        Action::Remove => "remove",
                    };
                    out.push_str(&format!("{}. {action}\n", i + 1));
                    if let Some(Some(prev)) = p.previous.get(i) {
                        out.push_str(&format!("   original entry: {prev}\n"));
                    }
                    if let Some(c) = &op.content {
                        out.push_str(&format!("   new content: {c}\n"));
                    }
                }
                out.push_str(&format!(
                    "Apply with /memory approve {id} or drop with /memory discard {id}."
                ));
                out
            }
            Err(e) => e,
        }
    }

    fn approve(&self, actor: &Actor, id: &str) -> String {
        let p = match self.load(actor, id) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let store = self.store(actor, crate::hub::Scope::User, p.target);
        let _guard = match self.lock(&store.lock_root, &store.label) {
            Ok(g) => g,
            Err(e) => return format!("Proposal {id} was not applied: {e}"),
        };
        let (raw, list) = match self.read_store(&store) {
            Ok(v) => v,
            Err(e) => return format!("Proposal {id} was not applied: {e}"),
        };
        if has_drift(&raw, &list, store.limit) {
            return format!(
                "Proposal {id} was not applied: {} was edited outside the memory tool. The proposal was kept.",
                store.label
            );
        }
        let mut work = list.clone();
        for (i, op) in p.operations.iter().enumerate() {
            match op.action {
                Action::Add => {
                    if let Some(c) = &op.content
                        && !work.iter().any(|e| e == c)
                    {
                        work.push(c.clone());
                    }
                }
                Action::Replace | Action::Remove => {
                    let pinned = p.previous.get(i).cloned().flatten().unwrap_or_default();
                    let Some(at) = work.iter().position(|e| *e == pinned) else {
                        return format!(
                            "Proposal {id} was not applied: the entry it changes (operation {}) no longer exists as it was when proposed. The proposal was kept; discard it with /memory discard {id}.",
                            i + 1
                        );
                    };
                    if op.action == Action::Remove {
                        work.remove(at);
                    } else {
                        work[at] = op.replacement(&work[at]);
                    }
                }
            }
        }
        dedup(&mut work);
        if p.batch && !list.is_empty() && work.is_empty() {
            return format!(
                "Proposal {id} was not applied: it would remove every entry. The proposal was kept."
            );
        }
        let total = usage(&work);
        if total > store.limit {
            return format!(
                "Proposal {id} was not applied: {} would reach {total}/{} chars. The proposal was kept.",
                store.label, store.limit
            );
        }
        if let Err(e) = self.write_store(&store, &work) {
            return format!("Proposal {id} was not applied: {e}");
        }
        match fs::remove_file(self.proposal_path(actor, id)) {
            Ok(()) => format!(
                "Applied proposal {id} to {} ({} entries, {}/{} chars).",
                p.target.as_str(),
                work.len(),
                total,
                store.limit
            ),
            Err(_) => format!(
                "Applied proposal {id}, but its file could not be deleted (cleanup_pending); discard it with /memory discard {id}."
            ),
        }
    }

    fn discard(&self, actor: &Actor, id: &str) -> String {
        match fs::remove_file(self.proposal_path(actor, id)) {
            Ok(()) => format!("Discarded proposal {id}; memory is unchanged."),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                format!("No pending memory proposal {id}.")
            }
            Err(e) => format!("Could not discard proposal {id}: {e}"),
        }
    }
}

/// The first operation's new content (or the text it targets), cut to 120 chars.
fn summary_preview(p: &Proposal) -> String {
    let text = p
        .operations
        .first()
        .and_then(|o| o.content.as_deref().or(o.old_text.as_deref()))
        .unwrap_or("");
    preview(text, 120)
}

fn summary(p: &Proposal) -> Value {
    json!({
        "id": p.id,
        "target": p.target.as_str(),
        "operations": p.operations.len(),
        "preview": summary_preview(p),
    })
}

/// Validate a staged request against `work` and return the pinned originals.
fn apply_ops_for_proposal(
    work: &mut Vec<String>,
    req: &Request,
    store: &Store,
) -> Result<Vec<Option<String>>, Fail> {
    // Staging validates exactly like a foreground write (same locate, budget and
    // empty-store rules) so an invalid change is never staged.
    crate::hub::apply_batch(work, &req.ops, store, req.batch).map(|(prev, _, _)| prev)
}
