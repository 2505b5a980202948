//! Assembles one model request: system prompt layers (identity, task planning, current plan) and
//! the transcript. Host metadata never leaves the process: `mpa-model` serialises only the wire
//! fields.

use crate::agent::Services;
use crate::prompt::{PromptLayers, system_prompt};
use crate::session::SessionData;
use mpa_model::ChatRequest;
use mpa_protocol::{Actor, Message};

pub fn assemble(
    services: &Services,
    actor: &Actor,
    data: &SessionData,
    extra: &[String],
) -> ChatRequest {
    let plan = data.state.lock().ok().and_then(|s| s.plan.clone());
    let system = system_prompt(&PromptLayers {
        actor,
        plan: plan.as_ref(),
        extra,
    });
    let mut messages = Vec::with_capacity(data.messages.len() + 1);
    messages.push(Message::system(system));
    messages.extend(data.messages.iter().cloned());
    ChatRequest {
        messages,
        tools: services.tools.specs_for(actor),
    }
}
