//! The host logic behind the web page's endpoints (issue 29, spec runtime.md §14): what the
//! server's routes call, so the HTTP layer only parses and answers. Each part is a module:
//! the plan a chat restores ([`plan_of`]), attachments ([`attachments`]), both languages ([`i18n`]),
//! the global persona ([`personas`]), memory and skills ([`learning`]), the slash commands
//! ([`commands`]).

pub mod attachments;
pub mod commands;
pub mod i18n;
pub mod learning;
pub mod personas;

use mpa_protocol::Message;

/// The current plan of a chat (the newest valid snapshot in its messages), as the SSE `plan`
/// frame carries it; `None` when the chat never had one.
pub fn plan_of(messages: &[Message]) -> Option<serde_json::Value> {
    crate::plan::Plan::restore_from(messages).map(|p| p.to_json())
}
