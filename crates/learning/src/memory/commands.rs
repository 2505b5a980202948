//! `/memory pending|approve|discard` — the user's own text API for proposals. Parsed by the host
//! from the user's latest message only, never from tool arguments: the model can never approve
//! or discard a proposal.

use super::apply::{dedup, has_drift};
use super::entries::usage;
use super::proposals::{StoredAction, is_id};
use super::request::Op;
use super::store::Scope;
use super::{MAX_PROPOSALS, Memory};
use mpa_protocol::Actor;
use std::fs;

const USAGE: &str = "Usage: /memory pending [ID] · /memory approve ID · /memory discard ID";

impl Memory {
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
                p.summary_preview()
            ));
        }
        out.push_str("Details: /memory pending <ID> · apply: /memory approve <ID> · drop: /memory discard <ID>");
        out
    }

    fn render_detail(&self, actor: &Actor, id: &str) -> String {
        let p = match self.load_proposal(actor, id) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let mut out = format!(
            "Proposal {} for {} ({} operation(s)):\n",
            p.id,
            p.target.as_str(),
            p.operations.len()
        );
        for (i, op) in p.operations.iter().enumerate() {
            let action = match op.action {
                StoredAction::Add => "add",
                StoredAction::Replace => "replace",
                StoredAction::Remove => "remove",
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

    /// Replays a proposal against the entries it was pinned to; refuses (and keeps it) when
    /// any of them changed since.
    fn approve(&self, actor: &Actor, id: &str) -> String {
        let p = match self.load_proposal(actor, id) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let store = self.store(actor, Scope::User, p.target);
        let (_guard, raw, list) = match store.lock_and_read() {
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
        for (i, stored) in p.operations.iter().enumerate() {
            let op = Op::from(stored);
            match &op {
                Op::Add { content } => {
                    if !content.is_empty() && !work.iter().any(|e| e == content) {
                        work.push(content.clone());
                    }
                }
                Op::Replace { .. } | Op::Remove { .. } => {
                    let pinned = p.previous.get(i).cloned().flatten().unwrap_or_default();
                    let Some(at) = work.iter().position(|e| *e == pinned) else {
                        return format!(
                            "Proposal {id} was not applied: the entry it changes (operation {}) no longer exists as it was when proposed. The proposal was kept; discard it with /memory discard {id}.",
                            i + 1
                        );
                    };
                    if let Op::Remove { .. } = op {
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
        if let Err(e) = store.write(&work) {
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
