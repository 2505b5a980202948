//! The host logic behind the web page's endpoints (issue 29, spec runtime.md §14): what the
//! server's routes call, so the HTTP layer only parses and answers. Each part is a module:
//! the plan a chat restores ([`plan_of`]), attachments ([`attachments`]), both languages ([`i18n`]),
//! the global persona ([`personas`]), memory and skills ([`learning`]), the slash commands
//! ([`commands`]), regenerate and edit-and-resend ([`redo`]),
//! session search and the page's display snapshot ([`sessions`]).

pub mod attachments;
pub mod commands;
pub mod i18n;
pub mod learning;
pub mod personas;
pub mod redo;
pub mod sessions;

use mpa_protocol::{Message, Role};

/// Metadata key of the time a user message was received or a turn's answer was saved.
pub const CREATED_AT_KEY: &str = "created_at";
/// Metadata key of a turn's token usage, on its last assistant message.
pub const TURN_USAGE_KEY: &str = "moviepilot_turn_usage";

/// Marks when `m` (a user message, a turn's answer) was made; the page shows it on hover.
pub fn stamp_time(m: &mut Message) {
    m.metadata.insert(
        CREATED_AT_KEY.into(),
        serde_json::Value::String(chrono::Utc::now().to_rfc3339()),
    );
}

/// The tokens a turn used (session totals after minus before), put with the time on the turn's
/// last assistant message in `tail`.
pub fn stamp_turn(tail: &mut [Message], before: (u64, u64, u64), after: (u64, u64, u64)) {
    if let Some(last) = tail.iter_mut().rev().find(|m| m.role == Role::Assistant) {
        stamp_time(last);
        last.metadata.insert(
            TURN_USAGE_KEY.into(),
            serde_json::json!({
                "input_tokens": after.0.saturating_sub(before.0),
                "output_tokens": after.1.saturating_sub(before.1),
                "total_tokens": after.2.saturating_sub(before.2),
            }),
        );
    }
}

/// The current plan of a chat (the newest valid snapshot in its messages), as the SSE `plan`
/// frame carries it; `None` when the chat never had one.
pub fn plan_of(messages: &[Message]) -> Option<serde_json::Value> {
    crate::plan::Plan::restore_from(messages).map(|p| p.to_json())
}
