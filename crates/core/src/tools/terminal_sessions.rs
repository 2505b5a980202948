//! The `terminal_sessions` field of a `task` / `subagent_task` spec (spec runtime.md §5.6): which
//! of the parent's terminals a subtask may read or wait on, and the block the subtask's first
//! message carries. The subagent tools (a later issue) parse their specs with it; `mpa-exec`
//! only ever sees typed [`TerminalGrant`]s.

use mpa_exec::{GrantAction, TerminalGrant};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeSet;

/// One shared terminal.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SharedTerminal {
    /// A session id from execute_command start, owned by this conversation.
    pub session_id: String,
    /// What the subtask may do with it (default: read and wait).
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub actions: Option<Vec<SharedAction>>,
}

/// The only actions a subtask can be granted: it may watch a terminal, never drive it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SharedAction {
    Read,
    Wait,
}

impl From<SharedAction> for GrantAction {
    fn from(a: SharedAction) -> Self {
        match a {
            SharedAction::Read => GrantAction::Read,
            SharedAction::Wait => GrantAction::Wait,
        }
    }
}

/// Parses the field (`null` = nothing shared) and merges entries for the same session.
pub fn parse_task_field(value: &serde_json::Value) -> Result<Vec<TerminalGrant>, String> {
    if value.is_null() {
        return Ok(Vec::new());
    }
    let entries =
        Vec::<SharedTerminal>::deserialize(value).map_err(|e| format!("terminal_sessions: {e}"))?;
    grants(&entries)
}

/// The grants of `entries`, merged per session id in first-seen order.
pub fn grants(entries: &[SharedTerminal]) -> Result<Vec<TerminalGrant>, String> {
    let mut merged: Vec<(String, BTreeSet<SharedAction>)> = Vec::new();
    for entry in entries {
        let actions: BTreeSet<SharedAction> = match &entry.actions {
            None => [SharedAction::Read, SharedAction::Wait].into(),
            Some(list) if list.is_empty() => {
                return Err("terminal_sessions actions needs at least one action".into());
            }
            Some(list) => list.iter().copied().collect(),
        };
        match merged.iter_mut().find(|(id, _)| *id == entry.session_id) {
            Some((_, set)) => set.extend(actions),
            None => merged.push((entry.session_id.clone(), actions)),
        }
    }
    Ok(merged
        .into_iter()
        .map(|(session_id, actions)| TerminalGrant {
            session_id,
            actions: actions.into_iter().map(GrantAction::from).collect(),
        })
        .collect())
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn task_field_grants_default_merge_and_reject() {
        let grants = parse_task_field(&json!([
            {"session_id": "term_aaaaaaaaaaaa"},
            {"session_id": "term_bbbbbbbbbbbb", "actions": ["read"]},
            {"session_id": "term_bbbbbbbbbbbb", "actions": ["wait"]},
        ]))
        .unwrap();
        let both = vec![GrantAction::Read, GrantAction::Wait];
        assert_eq!(
            grants,
            vec![
                TerminalGrant {
                    session_id: "term_aaaaaaaaaaaa".into(),
                    actions: both.clone(),
                },
                TerminalGrant {
                    session_id: "term_bbbbbbbbbbbb".into(),
                    actions: both,
                },
            ]
        );
        assert_eq!(parse_task_field(&json!(null)), Ok(vec![]));
        for bad in [
            json!([{"session_id": "x", "actions": ["write"]}]),
            json!([{"session_id": "x", "actions": []}]),
            json!([{"session_id": "x", "extra": 1}]),
            json!([{"actions": ["read"]}]),
            json!({"session_id": "x"}),
        ] {
            assert!(parse_task_field(&bad).is_err(), "{bad}");
        }
        let block = terminal_sessions_block(&grants);
        assert!(block.starts_with(
            "<terminal_sessions>\n- term_aaaaaaaaaaaa (allowed actions: read, wait)\n"
        ));
        assert!(block.ends_with("not authorised unless listed.\n</terminal_sessions>"));
    }
}
