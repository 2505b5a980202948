//! Terminal scopes (spec runtime.md §5.5–5.6): who may touch which session. Scopes are created
//! by the host — per interactive conversation, per scheduled run, per subtask — and are named by
//! an opaque [`ScopeId`] that tool JSON can never produce.

use crate::error::{ExecError, Result};
use mpa_protocol::UserKey;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// The owner of a scope: a user plus a human-readable label for logs ("chat:<id>", "cron:<run>").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeOwner {
    pub user_key: UserKey,
    pub label: String,
}

/// Opaque handle of one scope. Two scopes with equal owners are still different scopes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScopeId(pub(crate) u64);

/// An action a subtask may be granted on a parent's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantAction {
    Read,
    Wait,
    Write,
    Interrupt,
    Kill,
}

impl GrantAction {
    pub fn as_str(self) -> &'static str {
        match self {
            GrantAction::Read => "read",
            GrantAction::Wait => "wait",
            GrantAction::Write => "write",
            GrantAction::Interrupt => "interrupt",
            GrantAction::Kill => "kill",
        }
    }
}

/// Access to one parent session handed to a subtask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalGrant {
    pub session_id: String,
    pub actions: Vec<GrantAction>,
}

impl TerminalGrant {
    /// Parses the `terminal_sessions` field of a `task` / `subagent_task` spec:
    /// `[{session_id, actions}]` with `actions ⊆ {read, wait}` (default both, at least one) and
    /// no other keys. Grants for the same session are merged.
    pub fn parse_task_field(value: &Value) -> Result<Vec<TerminalGrant>> {
        let bad = |msg: String| ExecError::GrantRejected(msg);
        let items = match value {
            Value::Null => return Ok(Vec::new()),
            Value::Array(items) => items,
            _ => return Err(bad("terminal_sessions must be a list".into())),
        };
        let mut merged: Vec<(String, BTreeSet<GrantAction>)> = Vec::new();
        for item in items {
            let Value::Object(obj) = item else {
                return Err(bad("each terminal_sessions entry must be an object".into()));
            };
            if let Some(extra) = obj.keys().find(|k| *k != "session_id" && *k != "actions") {
                return Err(bad(format!(
                    "unexpected key {extra:?} in terminal_sessions"
                )));
            }
            let Some(Value::String(id)) = obj.get("session_id") else {
                return Err(bad(
                    "terminal_sessions entries need a session_id string".into()
                ));
            };
            let actions: BTreeSet<GrantAction> = match obj.get("actions") {
                None | Some(Value::Null) => [GrantAction::Read, GrantAction::Wait].into(),
                Some(Value::Array(list)) => {
                    let mut set = BTreeSet::new();
                    for action in list {
                        match action.as_str() {
                            Some("read") => set.insert(GrantAction::Read),
                            Some("wait") => set.insert(GrantAction::Wait),
                            _ => {
                                return Err(bad(
                                    "terminal_sessions actions may only be \"read\" and \"wait\""
                                        .into(),
                                ));
                            }
                        };
                    }
                    set
                }
                Some(_) => return Err(bad("actions must be a list".into())),
            };
            if actions.is_empty() {
                return Err(bad(
                    "terminal_sessions actions needs at least one action".into()
                ));
            }
            match merged.iter_mut().find(|(sid, _)| sid == id) {
                Some((_, set)) => set.extend(actions),
                None => merged.push((id.clone(), actions)),
            }
        }
        Ok(merged
            .into_iter()
            .map(|(session_id, actions)| TerminalGrant {
                session_id,
                actions: actions.into_iter().collect(),
            })
            .collect())
    }
}

/// The `<terminal_sessions>` block the host puts into a subtask's first message.
pub fn terminal_sessions_block(grants: &[TerminalGrant]) -> String {
    let mut out = String::from("<terminal_sessions>\n");
    for grant in grants {
        let actions: Vec<&str> = grant.actions.iter().map(|a| a.as_str()).collect();
        out.push_str(&format!(
            "- {} (allowed actions: {})\n",
            grant.session_id,
            actions.join(", ")
        ));
    }
    out.push_str(
        "Only the actions listed are authorised. Writing input, sending EOF, interrupting and \
         terminating these terminals are not authorised unless listed.\n</terminal_sessions>",
    );
    out
}

/// What `close_scope` achieved. A close that did not converge can be retried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CloseReport {
    /// Sessions of this scope that were running and are now stopped.
    pub terminated: Vec<String>,
    /// Sessions that did not stop in time; their records are kept for a retry.
    pub not_converged: Vec<String>,
    /// One-shot runs of the scope still active after the close wait.
    pub runs_still_active: usize,
    /// The scope was already fully closed (or never existed).
    pub already_closed: bool,
}

impl CloseReport {
    /// True when nothing is left behind.
    pub fn is_complete(&self) -> bool {
        self.not_converged.is_empty() && self.runs_still_active == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn task_field_grants_default_merge_and_reject() {
        let grants = TerminalGrant::parse_task_field(&json!([
            {"session_id": "term_aaaaaaaaaaaa"},
            {"session_id": "term_bbbbbbbbbbbb", "actions": ["read"]},
            {"session_id": "term_bbbbbbbbbbbb", "actions": ["wait"]},
        ]))
        .unwrap();
        assert_eq!(
            grants,
            vec![
                TerminalGrant {
                    session_id: "term_aaaaaaaaaaaa".into(),
                    actions: vec![GrantAction::Read, GrantAction::Wait],
                },
                TerminalGrant {
                    session_id: "term_bbbbbbbbbbbb".into(),
                    actions: vec![GrantAction::Read, GrantAction::Wait],
                },
            ]
        );
        for bad in [
            json!([{"session_id": "x", "actions": ["write"]}]),
            json!([{"session_id": "x", "actions": []}]),
            json!([{"session_id": "x", "extra": 1}]),
            json!({"session_id": "x"}),
        ] {
            assert!(TerminalGrant::parse_task_field(&bad).is_err(), "{bad}");
        }
    }
}
