//! Host commands (`/memory …`, `/skills …`, `/persona …`) in the user's own text are answered by the host: the
//! model never sees or answers them, so it can never approve a proposal. The command and its reply
//! stay in the transcript (marked) but are not evidence and do not count as user turns.

use crate::capability::Learning;
use crate::services::Services;
use crate::transcript::Transcript;
use mpa_protocol::{Actor, Lang, Message, Role};

/// Metadata key on a host command's user message and on its reply.
pub const HOST_COMMAND_KEY: &str = "host_command";

/// Whether `text` is addressed to the host (answered at a turn's start, never by the model).
pub fn is_command(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("/memory") || t.starts_with("/skills") || t.starts_with("/persona")
}

/// The host's reply, in `lang`, when `text` is a host command; `None` otherwise.
pub async fn answer(services: &Services, actor: &Actor, text: &str, lang: Lang) -> Option<String> {
    if !is_command(text) {
        return None;
    }
    // `/persona` is the host's own; `/memory` and `/skills` need the learning capability.
    let learning = services
        .caps
        .get::<Learning>()
        .map(|l| (l.memory().clone(), l.skills().clone()));
    let personas = std::sync::Arc::clone(&services.personas);
    let (actor, text) = (actor.clone(), text.to_string());
    tokio::task::spawn_blocking(move || {
        learning
            .as_ref()
            .and_then(|(memory, skills)| {
                memory
                    .user_command(&actor, &text, lang)
                    .or_else(|| skills.user_command(&actor, &text, lang))
            })
            .or_else(|| personas.user_command(&actor, &text, lang))
    })
    .await
    .ok()
    .flatten()
}

/// Marks the command (the last message) and appends the host's reply.
pub fn record(transcript: &mut Transcript, reply: &str) {
    let n = transcript.len();
    if let Some(cmd) = transcript.tail_mut(n.saturating_sub(1)).first_mut() {
        cmd.metadata
            .insert(HOST_COMMAND_KEY.into(), serde_json::Value::Bool(true));
    }
    let mut m = Message::assistant(reply, vec![]);
    m.metadata
        .insert(HOST_COMMAND_KEY.into(), serde_json::Value::Bool(true));
    transcript.push(m);
}

/// User turns in a transcript, without host commands (a command's user message is marked, or —
/// in chats saved before it was — followed by a marked reply).
pub fn user_turns(messages: &[Message]) -> usize {
    messages
        .iter()
        .enumerate()
        .filter(|(i, m)| {
            m.role == Role::User
                && !m.metadata.contains_key(HOST_COMMAND_KEY)
                && !messages
                    .get(i + 1)
                    .is_some_and(|next| next.metadata.contains_key(HOST_COMMAND_KEY))
        })
        .count()
}
