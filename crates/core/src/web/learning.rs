//! Memory and skills for the web page (issue 29 item 5): the same host logic as the `/memory`
//! and `/skills` commands and the memory tool — proposals are approved or discarded through the
//! commands' own code, entries are written through the memory tool's write path (budgets, threat
//! scan, drift checks included), pins, adoption and restores through `/skills`. Nothing here
//! decides anything the commands do not.

use crate::CoreError;
use crate::capability::Learning;
use crate::services::Services;
use mpa_learning::WriteOrigin;
use mpa_learning::memory::{Change, Op, ReplaceMode, Scope, Target, WriteRequest};
use mpa_protocol::{Actor, Lang};
use serde::Deserialize;
use serde_json::{Value, json};

fn learning(services: &Services) -> Result<&Learning, CoreError> {
    services.caps.get::<Learning>().ok_or_else(|| {
        CoreError::InvalidInput("memory and skills are not enabled on this host".into())
    })
}

fn memory(services: &Services) -> Result<&mpa_learning::Memory, CoreError> {
    learning(services).map(Learning::memory)
}

fn skills(services: &Services) -> Result<&mpa_learning::Skills, CoreError> {
    learning(services).map(Learning::skills)
}

/// The caller's stores (global memory read-only unless they are an administrator), their
/// budgets, and the proposals waiting for them.
pub fn memory_view(services: &Services, actor: &Actor) -> Result<Value, CoreError> {
    let m = memory(services)?;
    let snap = m.snapshot(actor);
    let store = |i: usize, editable: bool| {
        snap.stores.get(i).map_or(Value::Null, |s| {
            json!({"entries": s.entries, "used": s.chars, "limit": s.limit,
                   "unreadable": s.unreadable, "editable": editable})
        })
    };
    let pending = m.pending(actor, &WriteOrigin::Foreground);
    Ok(json!({
        "global": store(0, actor.is_admin),
        "memory": store(1, true),
        "user": store(2, true),
        "proposals": pending.proposals,
    }))
}

/// One change a person asks for on the page.
#[derive(Debug, Deserialize)]
pub struct MemoryEdit {
    pub action: String,
    #[serde(default)]
    pub old_text: String,
    #[serde(default)]
    pub content: String,
}

/// Applies `edit` to the store `store` (`user`, `memory`, or `global` for administrators) through
/// the memory tool's write path; its refusal (budget, no match, not an administrator …) is the
/// error message.
pub fn memory_edit(
    services: &Services,
    actor: &Actor,
    store: &str,
    edit: MemoryEdit,
) -> Result<Value, CoreError> {
    let m = memory(services)?;
    let (scope, target) = match store {
        "user" => (Scope::User, Target::User),
        "memory" => (Scope::User, Target::Memory),
        "global" if actor.is_admin => (Scope::Global, Target::Memory),
        "global" => return Err(CoreError::AdminRequired("edit the public memory")),
        other => {
            return Err(CoreError::InvalidInput(format!(
                "no memory store {other:?}; use user, memory or global"
            )));
        }
    };
    let op = match edit.action.as_str() {
        "add" => Op::Add {
            content: edit.content,
        },
        "replace" => Op::Replace {
            old_text: edit.old_text,
            content: edit.content,
            mode: ReplaceMode::Entry,
        },
        "remove" => Op::Remove {
            old_text: edit.old_text,
        },
        other => {
            return Err(CoreError::InvalidInput(format!(
                "no memory action {other:?}; use add, replace or remove"
            )));
        }
    };
    let req = WriteRequest {
        target,
        scope,
        change: Change::Single(op),
    };
    m.write(actor, &WriteOrigin::Foreground, req)
        .map_err(|f| CoreError::InvalidInput(f.error))?;
    memory_view(services, actor)
}

/// `/memory approve ID` or `/memory discard ID`, answered as the command answers it (in
/// `lang`); `ok` is whether the proposal was there and is gone now (applied or discarded).
pub fn decide_proposal(
    services: &Services,
    actor: &Actor,
    id: &str,
    approve: bool,
    lang: Lang,
) -> Result<Value, CoreError> {
    let m = memory(services)?;
    let waiting = || {
        m.pending(actor, &WriteOrigin::Foreground)
            .proposals
            .iter()
            .any(|p| p.id == id)
    };
    let was_waiting = waiting();
    let verb = if approve { "approve" } else { "discard" };
    let message = m
        .user_command(actor, &format!("/memory {verb} {id}"), lang)
        .unwrap_or_default();
    let ok = was_waiting && !waiting();
    Ok(json!({"ok": ok, "message": message}))
}

/// The skills the caller sees, each personal one with its pin and author, and the archive.
pub fn skills_list(services: &Services, actor: &Actor) -> Result<Value, CoreError> {
    let s = skills(services)?;
    let list = s.list(actor, None);
    let view = s
        .ownership_view(actor)
        .map_err(|e| CoreError::InvalidInput(e.to_string()))?;
    let mut out = json!(list);
    for skill in out["skills"].as_array_mut().into_iter().flatten() {
        let standing = skill["name"]
            .as_str()
            .filter(|_| skill["source"] == "personal")
            .and_then(|n| view.standing.get(n));
        skill["pinned"] = json!(standing.is_some_and(|s| s.pinned));
        skill["created_by"] = json!(standing.map(|s| s.created_by));
    }
    out["archived"] = json!(view.archived);
    Ok(out)
}

/// `SKILL.md` of one visible skill.
pub fn skill_view(services: &Services, actor: &Actor, name: &str) -> Result<Value, CoreError> {
    skills(services)?
        .view(actor, &WriteOrigin::Foreground, name, None)
        .map(|f| json!(f))
        .map_err(|e| CoreError::InvalidInput(e.to_string()))
}

/// `/skills pin|unpin|adopt|restore NAME`, answered as the command answers it; `ok` is whether
/// the change was made.
pub fn skill_action(
    services: &Services,
    actor: &Actor,
    name: &str,
    action: &str,
    lang: Lang,
) -> Result<Value, CoreError> {
    if !matches!(action, "pin" | "unpin" | "adopt" | "restore") {
        return Err(CoreError::InvalidInput(format!(
            "no skill action {action:?}; use pin, unpin, adopt or restore"
        )));
    }
    if name.split_whitespace().count() != 1 {
        return Err(CoreError::InvalidInput("a skill name is one word".into()));
    }
    let s = skills(services)?;
    let before = s.list(actor, None);
    let message = s
        .user_command(actor, &format!("/skills {action} {name}"), lang)
        .unwrap_or_default();
    // Whether the change was made, read from the skills themselves (never from the reply's
    // wording, which follows the reader's language): a restore brought the skill back, a pin,
    // unpin or adoption shows in its standing.
    let standing = s
        .ownership_view(actor)
        .ok()
        .and_then(|v| v.standing.get(name).cloned());
    let ok = match action {
        "restore" => before != s.list(actor, None),
        "pin" => standing.is_some_and(|st| st.pinned),
        "unpin" => standing.is_some_and(|st| !st.pinned),
        _ => standing.is_some_and(|st| st.created_by == mpa_learning::skills::CreatedBy::Agent),
    };
    Ok(json!({"ok": ok, "message": message}))
}
