//! Turn start: restore the plan from the newest snapshot when the session has none, and build the
//! user message (images only when the model accepts them).

use crate::agent::Services;
use crate::plan::Plan;
use crate::session::SessionData;
use mpa_protocol::{Actor, ContentPart, ImageUrl, Message};

pub fn restore_plan(data: &SessionData) {
    if let Ok(mut st) = data.state.lock()
        && st.plan.is_none()
    {
        // An existing in-session plan is never overwritten by an older snapshot.
        st.plan = Plan::restore_from(&data.messages);
    }
}

pub fn user_message(services: &Services, text: &str, images: &[String]) -> Message {
    if images.is_empty() {
        return Message::user(text);
    }
    let supports = services.cfg.support_image_input
        && mpa_model::model_profile(&services.cfg.model.model)
            .supports_images
            .unwrap_or(true);
    if !supports {
        return Message::user(format!(
            "{text}\n\n[{} image(s) attached but not sent: the configured model does not accept image input]",
            images.len()
        ));
    }
    let mut parts = vec![ContentPart::Text {
        text: text.to_string(),
    }];
    parts.extend(images.iter().map(|url| ContentPart::ImageUrl {
        image_url: ImageUrl { url: url.clone() },
    }));
    Message::user_parts(parts)
}

/// Prompt blocks contributed by enabled capabilities for this turn: the session's frozen memory
/// snapshot (taken at its first turn) and the personal-skills index.
pub async fn capability_blocks(
    services: &Services,
    actor: &Actor,
    data: &SessionData,
) -> Vec<String> {
    let memory = services.caps.memory.clone();
    let skills = services.caps.skills.clone();
    let frozen = data
        .state
        .lock()
        .ok()
        .and_then(|s| s.memory_snapshot.clone());
    let actor2 = actor.clone();
    let joined = tokio::task::spawn_blocking(move || {
        let mut snapshot = frozen;
        if let Some(m) = &memory {
            m.begin_user_turn(&actor2);
            if snapshot.is_none() {
                snapshot = Some(m.snapshot(&actor2).render());
            }
        }
        let skills_block = skills.as_ref().map(|s| s.prompt_block(&actor2));
        (snapshot, skills_block)
    })
    .await;
    let Ok((snapshot, skills_block)) = joined else {
        return Vec::new();
    };
    let mut blocks = Vec::new();
    if let Some(s) = snapshot {
        if let Ok(mut st) = data.state.lock()
            && st.memory_snapshot.is_none()
        {
            st.memory_snapshot = Some(s.clone());
        }
        blocks.push(s);
    }
    if let Some(b) = skills_block.filter(|b| !b.is_empty()) {
        blocks.push(b);
    }
    if services.caps.history.is_some() {
        blocks.push(mpa_history::RECALL_RULES.to_string());
    }
    blocks
}

/// Host-parsed user commands (`/memory …`, `/skills …`) from the user's own text: the model never
/// sees or answers them, so it can never approve a proposal. `None` when the text is no command.
pub async fn user_command(services: &Services, actor: &Actor, text: &str) -> Option<String> {
    let t = text.trim_start();
    if !(t.starts_with("/memory") || t.starts_with("/skills")) {
        return None;
    }
    let memory = services.caps.memory.clone();
    let skills = services.caps.skills.clone();
    let (actor, text) = (actor.clone(), text.to_string());
    tokio::task::spawn_blocking(move || {
        memory
            .as_ref()
            .and_then(|m| m.user_command(&actor, &text))
            .or_else(|| skills.as_ref().and_then(|s| s.user_command(&actor, &text)))
    })
    .await
    .ok()
    .flatten()
}
