//! Terminal scopes (spec runtime.md §5.5–5.6): who may touch which session. Scopes are created
//! by the host — per interactive conversation, per scheduled run, per subtask — and are named by
//! an opaque [`ScopeId`] that a tool's arguments can never produce.

use mpa_redact::UserKey;
use serde::{Deserialize, Serialize};

/// The owner of a scope: a user plus a label naming what the scope belongs to
/// (`session:<id>`, `cron:<run>`). A live scope is found again by its owner, so the label must
/// name the conversation or run itself, not whatever currently serves it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScopeOwner {
    pub user_key: UserKey,
    pub label: String,
}

/// Opaque handle of one scope. [`Processes::open_scope`](crate::Processes::open_scope) hands
/// out the same id for the same owner while the scope lives; a closed scope is never reopened,
/// and subtask scopes are always new.
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

/// Access to one parent session handed to a subtask (spec runtime.md §5.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalGrant {
    pub session_id: String,
    pub actions: Vec<GrantAction>,
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
