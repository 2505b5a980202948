//! What the page shows beside the chat: the slash commands a user may run, their memory and
//! skills, and the global persona. Every route calls the core's host logic
//! ([`mpa_core::web`]) — the same code the `/memory`, `/skills` and `/persona` commands run.

use crate::auth::Authed;
use crate::error::{ApiError, request_locale};
use crate::extract::{Json, Path};
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use mpa_core::web::{commands, learning, personas::PersonaEdit};
use mpa_core::{CoreError, Services};
use mpa_protocol::Actor;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// Runs file-bound host logic off the async threads.
async fn blocking<T: Send + 'static>(
    state: &AppState,
    actor: Actor,
    f: impl FnOnce(&Services, &Actor) -> Result<T, CoreError> + Send + 'static,
) -> Result<T, ApiError> {
    let services = Arc::clone(state.agent.services());
    tokio::task::spawn_blocking(move || f(&services, &actor))
        .await
        .map_err(|_| ApiError::internal("internal_error", "the request could not be completed"))?
        .map_err(ApiError::from)
}

pub async fn list_commands(Authed(actor): Authed) -> Json<Value> {
    Json(json!({"commands": commands::available(&actor)}))
}

pub async fn memory(
    State(state): State<AppState>,
    Authed(actor): Authed,
) -> Result<Json<Value>, ApiError> {
    blocking(&state, actor, learning::memory_view)
        .await
        .map(Json)
}

pub async fn memory_edit(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Path(store): Path<String>,
    Json(edit): Json<learning::MemoryEdit>,
) -> Result<Json<Value>, ApiError> {
    blocking(&state, actor, move |s, a| {
        learning::memory_edit(s, a, &store, edit)
    })
    .await
    .map(Json)
}

pub async fn proposal(
    State(state): State<AppState>,
    Authed(actor): Authed,
    headers: HeaderMap,
    Path((id, decision)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let lang = request_locale(&headers).into();
    let approve = match decision.as_str() {
        "approve" => true,
        "discard" => false,
        _ => return Err(ApiError::for_status(axum::http::StatusCode::NOT_FOUND)),
    };
    blocking(&state, actor, move |s, a| {
        learning::decide_proposal(s, a, &id, approve, lang)
    })
    .await
    .map(Json)
}

pub async fn skills(
    State(state): State<AppState>,
    Authed(actor): Authed,
) -> Result<Json<Value>, ApiError> {
    blocking(&state, actor, learning::skills_list)
        .await
        .map(Json)
}

pub async fn skill(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    blocking(&state, actor, move |s, a| learning::skill_view(s, a, &name))
        .await
        .map(Json)
}

pub async fn skill_action(
    State(state): State<AppState>,
    Authed(actor): Authed,
    headers: HeaderMap,
    Path((name, action)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let lang = request_locale(&headers).into();
    blocking(&state, actor, move |s, a| {
        learning::skill_action(s, a, &name, &action, lang)
    })
    .await
    .map(Json)
}

fn personas_json(state: &AppState) -> Value {
    let (active, list) = state.agent.personas().list();
    let personas: Vec<Value> = list
        .into_iter()
        .map(|p| {
            let is_active = active.as_deref() == Some(p.id.as_str());
            json!({"id": p.id, "name": p.name, "style": p.style, "active": is_active})
        })
        .collect();
    json!({"active": active, "personas": personas})
}

pub async fn personas(State(state): State<AppState>, Authed(_): Authed) -> Json<Value> {
    Json(personas_json(&state))
}

#[derive(Deserialize)]
pub struct NewPersona {
    pub name: String,
    pub style: String,
}

pub async fn create_persona(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Json(p): Json<NewPersona>,
) -> Result<Json<Value>, ApiError> {
    blocking(&state, actor, move |s, a| {
        s.personas.create(a, &p.name, &p.style)
    })
    .await
    .map(|p| Json(json!(p)))
}

pub async fn edit_persona(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Path(id): Path<String>,
    Json(edit): Json<PersonaEdit>,
) -> Result<Json<Value>, ApiError> {
    blocking(&state, actor, move |s, a| s.personas.edit(a, &id, edit))
        .await
        .map(|p| Json(json!(p)))
}
