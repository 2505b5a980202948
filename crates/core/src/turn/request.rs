//! Assembles one model request: system prompt layers (identity, task planning, current plan) and
//! the transcript. Host metadata never leaves the process: `mpa-model` serialises only the wire
//! fields.

use crate::agent::Services;
use crate::prompt::{PromptLayers, system_prompt};
use crate::session::SessionData;
use mpa_model::ChatRequest;
use mpa_protocol::{Actor, Message};

/// The system message of the next model call.
pub fn system_message(actor: &Actor, data: &SessionData, extra: &[String]) -> Message {
    let plan = data.state.lock().ok().and_then(|s| s.plan.clone());
    Message::system(system_prompt(&PromptLayers {
        actor,
        plan: plan.as_ref(),
        extra,
    }))
}

/// The request: the system message followed by the transcript, borrowed (never copied).
pub fn assemble<'a>(
    system: &'a Message,
    data: &'a SessionData,
    tools: &'a [mpa_protocol::ToolSpec],
) -> ChatRequest<'a> {
    let mut messages = Vec::with_capacity(data.messages.len() + 1);
    messages.push(system);
    messages.extend(data.messages.iter());
    ChatRequest { messages, tools }
}

pub fn tool_specs(services: &Services, actor: &Actor) -> Vec<mpa_protocol::ToolSpec> {
    services.tools.specs_for(actor)
}
