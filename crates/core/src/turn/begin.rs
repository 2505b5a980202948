//! Turn start: restore the plan from the newest snapshot when the session has none, build the
//! user message (images only when the model accepts them), and the session's system prompt —
//! built once, at the session's first turn, then frozen (with the memory snapshot taken then).

use crate::plan::{Plan, PlanState};
use crate::prompt::{PromptLayers, system_prompt};
use crate::services::Services;
use crate::session::SessionData;
use mpa_protocol::{Actor, ContentPart, ImageUrl, Message};

pub fn restore_plan(data: &SessionData) {
    data.state.with(|p: &mut PlanState| {
        if p.0.is_none() {
            // An existing in-session plan is never overwritten by an older snapshot.
            p.0 = Plan::restore_from(data.transcript.messages());
        }
    });
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

/// Metadata key on messages a stateless client supplied (its earlier turns).
pub const CLIENT_SUPPLIED_KEY: &str = "client_supplied";

/// A stateless client's conversation, taken in once by a session that has none yet: its earlier
/// user and assistant messages become real messages (marked), its own system text a marked
/// layer of the system prompt after the host's own.
pub fn adopt_client_context(data: &mut SessionData, ctx: mpa_protocol::ClientContext) {
    if !data.transcript.is_empty() || data.persisted.system_prompt.is_some() {
        return;
    }
    data.persisted.client_system = ctx.system.filter(|s| !s.trim().is_empty());
    for mut m in ctx.messages {
        if !matches!(
            m.role,
            mpa_protocol::Role::User | mpa_protocol::Role::Assistant
        ) || (m.text().trim().is_empty() && m.tool_calls.is_empty())
        {
            continue;
        }
        m.tool_calls.clear();
        m.metadata
            .insert(CLIENT_SUPPLIED_KEY.into(), serde_json::Value::Bool(true));
        data.transcript.push(m);
    }
}

/// The session's system message: frozen at its first turn and persisted with the chat, so every
/// model call of the session — and its background review — starts with the same bytes. Every
/// capability hears of the turn first; at the first turn their prompt blocks are frozen in.
pub async fn system_message(services: &Services, actor: &Actor, data: &mut SessionData) -> Message {
    let capabilities = std::sync::Arc::clone(&services.caps);
    let frozen = data.persisted.system_prompt.is_some();
    let actor2 = actor.clone();
    let extra = tokio::task::spawn_blocking(move || {
        for c in capabilities.iter() {
            c.begin_turn(&actor2);
        }
        if frozen {
            return Vec::new();
        }
        capabilities
            .iter()
            .flat_map(|c| c.prompt_blocks(&actor2))
            .collect()
    })
    .await
    .unwrap_or_else(|e| {
        tracing::warn!(error = %e, "capability prompt blocks not built");
        Vec::new()
    });
    if let Some(p) = &data.persisted.system_prompt {
        return Message::system(p.clone());
    }
    let prompt = system_prompt(&PromptLayers {
        actor,
        started: data.created_at,
        extra: &extra,
        client: data.persisted.client_system.as_deref(),
    });
    data.persisted.system_prompt = Some(prompt.clone());
    Message::system(prompt)
}

/// Said to the model when someone other than the owner acts in the session (an admin continuing
/// a user's chat from the web page): the frozen prompt names the owner.
pub fn acting_note(actor: &Actor, data: &SessionData) -> Option<String> {
    (actor.user_id != data.owner).then(|| {
        format!(
            "[Host note: this turn is run by {}{}, continuing another user's conversation.]",
            actor.user_name,
            if actor.is_admin {
                " (administrator)"
            } else {
                ""
            }
        )
    })
}
