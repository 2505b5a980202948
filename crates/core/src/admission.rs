//! What a message must satisfy before anything of it is stored (issue 24, item 4): a turn's
//! text — and each message a stateless client sends along — is judged at submission, before a
//! session is loaded, a transcript grows or a snapshot is written.
//!
//! A turn is refused, too, while the data directory's disk is below its free-space floor
//! ([`crate::disk`]): the host would answer what it cannot save.
//!
//! Two limits on the text:
//! - **size**: at most [`AgentConfig::max_message_bytes`](crate::AgentConfig) bytes of text
//!   (`MPA_MAX_MESSAGE_KB`, default [`DEFAULT_MAX_MESSAGE_BYTES`]), far below the HTTP body
//!   limit (which must leave room for inline images);
//! - **fit**: the message alone, with the host's system prompt and the caller's tools, must fit
//!   the model's context window — otherwise no compaction can ever make the turn fit (the task's
//!   first user message is kept verbatim by every compaction).
//!
//! A chat stored before these limits held such a message and failed every later turn. When such
//! a chat is loaded, [`recover`] replaces each message over either limit with a notice
//! ([`OVERSIZE_KEY`]): the model reads that the message was left out, the session works again,
//! and the next snapshot no longer carries the text.
//!
//! The fit check counts with the model's tokenizer (or the calibrated estimate) exactly as a
//! request is budgeted, against a lower bound of the request (the host's prompt without memory
//! or skills): what it refuses can never fit, and short texts are never counted at all.

use crate::error::{CoreError, Result};
use crate::prompt::{PromptLayers, system_prompt};
use crate::services::Services;
use mpa_protocol::{Actor, Message, Op, Role};

/// Default largest text of one message: 256 KiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// Metadata on a message [`recover`] left out of the model's context: `{"bytes": n}`.
pub const OVERSIZE_KEY: &str = "moviepilot_oversize";

/// Checks a submitted operation; `Ok` when every text it carries may be stored.
pub async fn admit(services: &Services, actor: &Actor, op: &Op) -> Result<()> {
    let Op::UserInput {
        text,
        client_context,
        ..
    } = op
    else {
        return Ok(());
    };
    if let Some(d) = crate::disk::status(services).filter(|d| d.low) {
        return Err(CoreError::StorageFull {
            available: d.available_bytes,
            floor: d.floor_bytes,
        });
    }
    let mut texts: Vec<&str> = vec![text];
    if let Some(ctx) = client_context {
        texts.extend(ctx.system.as_deref());
        texts.extend(ctx.messages.iter().map(message_text));
    }
    let limit = services.cfg.max_message_bytes;
    if let Some(bytes) = texts.iter().map(|t| t.len()).find(|n| *n > limit) {
        return Err(CoreError::MessageTooLarge { bytes, limit });
    }
    let fit = Fit::new(services);
    let large: Vec<String> = texts
        .iter()
        .filter(|t| !fit.surely_fits(t.len()))
        .map(|t| t.to_string())
        .collect();
    if large.is_empty() {
        return Ok(());
    }
    let specs = services.tools.specs_for(actor);
    let actor = actor.clone();
    let over = tokio::task::spawn_blocking(move || {
        let fixed = fit.fixed_tokens(&actor, &specs);
        large
            .iter()
            .map(|t| fit.tokens_of(t))
            .find(|tokens| tokens + fixed > fit.window)
            .map(|tokens| (tokens, fixed))
    })
    .await
    .unwrap_or(None);
    match over {
        Some((tokens, fixed)) => Err(CoreError::MessageOverWindow {
            tokens,
            room: fit.window.saturating_sub(fixed),
            window: fit.window,
        }),
        None => Ok(()),
    }
}

/// Leaves every message of a loaded chat that is over either limit out of the model's context:
/// its content becomes a notice and it is marked [`OVERSIZE_KEY`]. Returns how many were.
pub async fn recover(services: &Services, actor: &Actor, messages: &mut [Message]) -> usize {
    let limit = services.cfg.max_message_bytes;
    let fit = Fit::new(services);
    // Only what a user or a client sent: tool results are capped when they arrive, and
    // assistant text is the model's own, bounded by its output limit.
    let candidates: Vec<(usize, String)> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User && !m.metadata.contains_key(OVERSIZE_KEY))
        .map(|(i, m)| (i, m.text()))
        .filter(|(_, t)| t.len() > limit || !fit.surely_fits(t.len()))
        .collect();
    if candidates.is_empty() {
        return 0;
    }
    let specs = services.tools.specs_for(actor);
    let actor = actor.clone();
    let oversize: Vec<(usize, usize)> = tokio::task::spawn_blocking(move || {
        let fixed = fit.fixed_tokens(&actor, &specs);
        candidates
            .into_iter()
            .filter(|(_, t)| t.len() > limit || fit.tokens_of(t) + fixed > fit.window)
            .map(|(i, t)| (i, t.len()))
            .collect()
    })
    .await
    .unwrap_or_default();
    for &(i, bytes) in &oversize {
        let m = &mut messages[i];
        m.content = mpa_protocol::Content::Text(oversize_notice(bytes));
        m.metadata
            .insert(OVERSIZE_KEY.into(), serde_json::json!({"bytes": bytes}));
        tracing::warn!(
            bytes,
            "an oversize message was left out of a session's context"
        );
    }
    oversize.len()
}

/// What the model (and the page) read in place of a message left out by [`recover`].
fn oversize_notice(bytes: usize) -> String {
    let size = human_size(bytes);
    format!(
        "[This message ({size} of text) was too large for the model's context and is left out of \
         it; ask the user to send what matters in a shorter message or as a file. / 此消息（{size} \
         文本）过大，无法放入模型上下文，已被排除；请让用户以更短的消息或文件发送关键内容。]"
    )
}

/// `31.0 MB`, `256 KB`, `900 B`.
pub fn human_size(bytes: usize) -> String {
    const KB: f64 = 1024.0;
    let b = bytes as f64;
    if b >= KB * KB {
        format!("{:.1} MB", b / (KB * KB))
    } else if b >= KB {
        format!("{:.0} KB", b / KB)
    } else {
        format!("{bytes} B")
    }
}

fn message_text(m: &Message) -> &str {
    match &m.content {
        mpa_protocol::Content::Text(t) => t,
        // Adopted messages are plain text (see the OpenAI endpoint); parts are judged by their
        // first text part, the only one a client context carries.
        mpa_protocol::Content::Parts(parts) => parts
            .iter()
            .find_map(|p| match p {
                mpa_protocol::ContentPart::Text { text } => Some(text.as_str()),
                mpa_protocol::ContentPart::ImageUrl { .. } => None,
            })
            .unwrap_or(""),
    }
}

/// The context window and how it is counted, for one check.
#[derive(Clone, Copy)]
struct Fit {
    limits: mpa_model::BudgetLimits,
    window: u64,
}

impl Fit {
    fn new(services: &Services) -> Self {
        let limits = services.budget_limits();
        Self {
            limits,
            window: limits.context_window_tokens,
        }
    }

    /// A text of `bytes` bytes fits whatever the fixed part: no counter makes more than one
    /// token of a byte (plus a message's framing), and a quarter of the window is far below what
    /// any working setup leaves for messages.
    fn surely_fits(&self, bytes: usize) -> bool {
        self.window == 0 || self.limits.counter.budgeted(bytes as u64 + 16) <= self.window / 4
    }

    /// Budgeted tokens of `text` as one user message.
    fn tokens_of(&self, text: &str) -> u64 {
        let counter = self.limits.counter;
        counter.budgeted(counter.message_tokens(&Message::user(text)))
    }

    /// Budgeted tokens of what every request of `actor` carries besides its messages: the host's
    /// system prompt (without memory and skills, so a lower bound) and the tools offered.
    fn fixed_tokens(&self, actor: &Actor, specs: &[mpa_protocol::ToolSpec]) -> u64 {
        let system = Message::system(system_prompt(&PromptLayers {
            actor,
            started: chrono::Utc::now(),
            extra: &[],
            client: None,
            persona: None,
        }));
        let cache = mpa_model::TokenCache::new();
        self.limits
            .counter
            .breakdown([&system], specs, &cache)
            .input_tokens()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(human_size(900), "900 B");
        assert_eq!(human_size(256 * 1024), "256 KB");
        assert_eq!(human_size(31 * 1024 * 1024), "31.0 MB");
    }
}
