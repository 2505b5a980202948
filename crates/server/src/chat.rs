//! `/api/v1/agent/*`: the SSE chat stream and the session endpoints. Session ids only locate: a
//! client's id is resolved in the caller's own namespace ([`mpa_core::Agent::resolve_session`]),
//! so another user's id is exactly a missing one everywhere — a new session on the stream, 404
//! on the others. Responses carry the client's id, never the server-side one.
//!
//! The one way into another user's chat is the web page's explicit admin continuation: a login
//! admin names the owner (`user_id` in the stream body, `?user_id=` on the other routes) of an
//! existing chat; it keeps its owner and tools run as the admin. The static `MPA_ADMIN_TOKEN`
//! never gets it (its `user_id` is ignored, and its `?all=true` list is its own sessions), and a
//! non-admin naming anyone else gets 404.

use crate::auth::{ADMIN_TOKEN_USER_ID, Authed};
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::sse::{FRAME_QUEUE, error_frames, pump, queued_frames};
use crate::state::AppState;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
use mpa_core::{CoreError, SessionRef, SessionScope, Steered};
use mpa_protocol::{Actor, UserId};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Channel name of chats started from the web page and the stream API.
pub const WEB_CHANNEL: &str = "web";

#[derive(Deserialize)]
pub struct StreamRequest {
    pub text: String,
    #[serde(default)]
    pub session_id: Option<String>,
    /// Image URLs, data URLs, attachment references (`attachment:<id>`) or attachment objects.
    #[serde(default)]
    pub images: Vec<AttachmentRef>,
    /// Uploaded files (attachment objects or references) the model is told about.
    #[serde(default)]
    pub files: Vec<AttachmentRef>,
    /// The owner of the chat `session_id` names, when a login admin continues another user's
    /// chat from the web page (see the module docs).
    #[serde(default)]
    pub user_id: Option<String>,
    /// Send the last user message again, replacing the answer after it (`text` may be empty).
    #[serde(default)]
    pub regenerate: bool,
    /// Replace the last user message by `text` and answer that instead.
    #[serde(default)]
    pub edit_last: bool,
}

/// An attachment as a stream request names it: a string (a URL, a data URL, `attachment:<id>`)
/// or the attachment object `/upload` returned (its `ref` or `id` is used).
#[derive(Deserialize)]
#[serde(untagged)]
pub enum AttachmentRef {
    Text(String),
    Object {
        #[serde(default, rename = "ref")]
        reference: Option<String>,
        #[serde(default)]
        id: Option<String>,
    },
}

impl AttachmentRef {
    fn into_text(self) -> String {
        match self {
            AttachmentRef::Text(s) => s,
            AttachmentRef::Object { reference, id } => reference.or(id).unwrap_or_default(),
        }
    }
}

/// `?user_id=`: the owner of the chat a login admin opens from the web page.
#[derive(Deserialize)]
pub struct OwnerQuery {
    #[serde(default)]
    pub user_id: Option<String>,
}

/// Whether the caller is an administrator who signed in. The static admin token is a protocol
/// entry for automation: its admin rights cover tools, never other users' chats (seed agent.md,
/// "protocol-entry admins get no cross-user history").
fn is_login_admin(actor: &Actor) -> bool {
    actor.is_admin && actor.user_id.0 != ADMIN_TOKEN_USER_ID
}

/// Where a web request looks its session id up: the caller's own sessions unless a login admin
/// names another owner (the static admin token never does; see the module docs). A non-admin
/// naming an owner is refused by the core, like a missing chat.
pub fn web_scope(actor: &Actor, user_id: Option<String>) -> SessionScope {
    match user_id.filter(|u| !u.is_empty()) {
        Some(u) if actor.user_id.0 != ADMIN_TOKEN_USER_ID => SessionScope::AdminContinue(UserId(u)),
        _ => SessionScope::Own,
    }
}

/// Resolves a path's session id for the routes that only read or change an existing session:
/// an id no client could have been given is "not found" there, like a missing one.
async fn existing(
    state: &AppState,
    actor: &Actor,
    session_id: &str,
    owner: OwnerQuery,
) -> Result<SessionRef, ApiError> {
    let scope = web_scope(actor, owner.user_id);
    match state.agent.resolve_session(actor, session_id, &scope).await {
        Ok(r) => Ok(r),
        Err(CoreError::InvalidSessionId(_)) => Err(CoreError::SessionNotFound.into()),
        Err(e) => Err(e.into()),
    }
}

/// An SSE response whose frames come from `rx`.
pub fn sse_response(rx: mpsc::Receiver<Bytes>) -> Response {
    let body = Body::from_stream(ReceiverStream::new(rx).map(Ok::<_, std::convert::Infallible>));
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Reverse proxies (nginx) would otherwise hold frames back.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

fn sse_once(frames: Vec<Bytes>) -> Response {
    let (tx, rx) = mpsc::channel(frames.len().max(1));
    for f in frames {
        let _ = tx.try_send(f);
    }
    sse_response(rx)
}

pub async fn stream(
    State(state): State<AppState>,
    Authed(actor): Authed,
    headers: axum::http::HeaderMap,
    Json(req): Json<StreamRequest>,
) -> Result<Response, ApiError> {
    let locale = crate::error::request_locale(&headers);
    if state.shutting_down.is_cancelled() {
        return Err(ApiError::unavailable());
    }
    if req.regenerate || req.edit_last {
        return redo(state, actor, locale, req).await;
    }
    if req.text.trim().is_empty() && req.images.is_empty() && req.files.is_empty() {
        return Err(ApiError::bad_request("text must not be empty"));
    }
    // Attachments resolve in the sender's own uploads; a reference that is not theirs refuses
    // the whole message before anything is queued.
    let images: Vec<String> = req
        .images
        .into_iter()
        .map(AttachmentRef::into_text)
        .collect();
    let files: Vec<String> = req
        .files
        .into_iter()
        .map(AttachmentRef::into_text)
        .collect();
    let agent = state.agent.clone();
    let owner = actor.user_id.clone();
    let text = req.text;
    let (text, images) = tokio::task::spawn_blocking(move || {
        agent.attachments().resolve(&owner, text, images, &files)
    })
    .await
    .map_err(|_| ApiError::internal("internal_error", "the attachments could not be read"))??;
    let client_id = match req.session_id.filter(|s| !s.is_empty()) {
        Some(s) => s,
        None => mpa_core::new_session_id(),
    };
    let scope = web_scope(&actor, req.user_id);
    let session = state
        .agent
        .resolve_session(&actor, &client_id, &scope)
        .await?;
    // While this user's turn runs, a message joins it (steering) instead of waiting behind it.
    let submitted = state
        .agent
        .steer_to(
            &actor,
            &session,
            WEB_CHANNEL,
            text,
            images,
            Some(locale.into()),
        )
        .await;
    let events = match submitted {
        Ok(Steered::Queued { event, .. }) => {
            return Ok(sse_once(queued_frames(&session.client_id, &event)));
        }
        Ok(Steered::Turn(rx)) => rx,
        Err(e @ (CoreError::QueueFull { .. } | CoreError::SessionClosed)) => {
            return Ok(sse_once(error_frames(e.code(), &e.to_string(), locale)));
        }
        Err(e) => return Err(e.into()),
    };
    let (tx, rx) = mpsc::channel(FRAME_QUEUE);
    tokio::spawn(pump(
        events,
        tx,
        state.cfg.heartbeat,
        session.client_id,
        locale,
    ));
    Ok(sse_response(rx))
}

/// Regenerate or edit-and-resend in an existing session (see [`mpa_core::Agent::redo`]).
async fn redo(
    state: AppState,
    actor: Actor,
    locale: mpa_core::web::i18n::Locale,
    req: StreamRequest,
) -> Result<Response, ApiError> {
    if req.regenerate && req.edit_last {
        return Err(ApiError::bad_request(
            "regenerate and edit_last cannot both be set",
        ));
    }
    if req.edit_last && req.text.trim().is_empty() {
        return Err(ApiError::bad_request("text must not be empty"));
    }
    let Some(client_id) = req.session_id.filter(|s| !s.is_empty()) else {
        return Err(ApiError::bad_request(
            "session_id names the session to regenerate or edit",
        ));
    };
    let r = existing(
        &state,
        &actor,
        &client_id,
        OwnerQuery {
            user_id: req.user_id,
        },
    )
    .await?;
    let text = req.edit_last.then_some(req.text);
    let events = state.agent.redo(&actor, &r, WEB_CHANNEL, text).await?;
    let (tx, rx) = mpsc::channel(FRAME_QUEUE);
    tokio::spawn(pump(events, tx, state.cfg.heartbeat, r.client_id, locale));
    Ok(sse_response(rx))
}

#[derive(Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    pub page: Option<u32>,
    #[serde(default)]
    pub count: Option<u32>,
    /// Login admins only: everyone's sessions (anyone else gets their own).
    #[serde(default)]
    pub all: Option<bool>,
    /// Search the caller's own sessions (titles, and content through the evidence history).
    #[serde(default)]
    pub q: Option<String>,
}

/// The fields a session list row and a session detail share; `session_id` is the id its owner's
/// clients use.
fn summary_json(c: &mpa_core::ChatSummary, processing: bool) -> Value {
    json!({
        "session_id": mpa_core::client_session_id(&c.user_id, &c.session_id),
        "title": c.title,
        "user_id": c.user_id.0,
        "channel": c.channel,
        "message_count": c.message_count,
        // How the last turn ended: a host stop state (blocked, waiting, unknown, partial, …),
        // not proof the task is done; null while a turn runs.
        "turn_status": c.turn_status,
        "created_at": c.created_at.to_rfc3339(),
        "updated_at": c.updated_at.to_rfc3339(),
        "is_processing": processing,
    })
}

fn is_processing(state: &AppState, session_id: &str) -> bool {
    state
        .agent
        .live(session_id)
        .is_some_and(|h| h.is_processing())
}

/// Steering messages waiting for the session's running turn.
fn steering_pending(state: &AppState, session_id: &str) -> usize {
    state
        .agent
        .live(session_id)
        .map_or(0, |h| h.steering_pending())
}

pub async fn list_sessions(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let page = q.page.unwrap_or(1).max(1);
    let count = q.count.unwrap_or(30).clamp(1, 200);
    if let Some(text) = q.q.as_deref() {
        let found = mpa_core::web::sessions::search(&state.agent, &actor, text).await?;
        let sessions: Vec<Value> = found
            .iter()
            .map(|m| {
                let mut v = summary_json(&m.summary, is_processing(&state, &m.summary.session_id));
                v["match"] = json!(m.matched);
                if let Some(s) = &m.snippet {
                    v["snippet"] = json!(s);
                }
                v
            })
            .collect();
        return Ok(Json(
            json!({"page": 1, "count": sessions.len(), "q": text, "sessions": sessions}),
        ));
    }
    let all = q.all.unwrap_or(false) && is_login_admin(&actor);
    let rows = state.agent.list_sessions(&actor, all, page, count).await?;
    let sessions: Vec<Value> = rows
        .iter()
        .map(|c| summary_json(c, is_processing(&state, &c.session_id)))
        .collect();
    Ok(Json(
        json!({"page": page, "count": count, "sessions": sessions}),
    ))
}

pub async fn session_detail(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Path(session_id): Path<String>,
    Query(owner): Query<OwnerQuery>,
) -> Result<Json<Value>, ApiError> {
    let r = existing(&state, &actor, &session_id, owner).await?;
    let processing = is_processing(&state, &r.id);
    let pending = steering_pending(&state, &r.id);
    // The session status fields of §14.4.
    let status = state.agent.live(&r.id).map_or_else(
        || mpa_core::QueueStatus::idle(state.agent.services().cfg.queue_capacity),
        |h| h.queue_status(),
    );
    let display_snapshot =
        mpa_core::web::sessions::load_display(&state.agent, &r.id).unwrap_or(Value::Null);
    match state.agent.chat_for(&actor, &r.id).await {
        Ok(c) => {
            let mut v = summary_json(&c.summary(), processing);
            v["steering_pending"] = json!(pending);
            v["status"] = json!(status);
            v["display_snapshot"] = display_snapshot;
            // Restored on reload: the newest plan snapshot of the chat.
            v["plan"] = mpa_core::web::plan_of(&c.agent_messages).unwrap_or(Value::Null);
            v["display_messages"] = c.display_messages;
            // Provider usage over the session (`last_*` / `total_*`, `model_call_count`).
            v["usage"] = c.session_state.get("usage").cloned().unwrap_or(Value::Null);
            Ok(Json(v))
        }
        // Started but not yet snapshotted (its first turn is still running).
        Err(CoreError::SessionNotFound) => {
            state.agent.check_access(&actor, &r.id).await?;
            Ok(Json(json!({
                "session_id": r.client_id,
                "title": "",
                "user_id": r.owner.0,
                "channel": WEB_CHANNEL,
                "message_count": 0,
                "turn_status": null,
                "display_messages": [],
                "plan": null,
                "is_processing": processing,
                "steering_pending": pending,
                "status": status,
                "display_snapshot": display_snapshot,
            })))
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn delete_session(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Path(session_id): Path<String>,
    Query(owner): Query<OwnerQuery>,
) -> Result<Json<Value>, ApiError> {
    let r = existing(&state, &actor, &session_id, owner).await?;
    state.agent.delete_session(&actor, &r.id).await?;
    mpa_core::web::sessions::forget_display(&state.agent, &r.id);
    tracing::info!(session = %r.id, "session deleted");
    Ok(Json(json!({"deleted": true, "session_id": r.client_id})))
}

#[derive(Deserialize)]
pub struct SessionPatch {
    pub title: String,
}

/// `PATCH /sessions/{id}` with `{"title"}`: renames the chat; answers its summary row.
pub async fn rename_session(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Path(session_id): Path<String>,
    Query(owner): Query<OwnerQuery>,
    Json(patch): Json<SessionPatch>,
) -> Result<Json<Value>, ApiError> {
    let r = existing(&state, &actor, &session_id, owner).await?;
    state.agent.rename_session(&actor, &r, &patch.title).await?;
    let c = state.agent.chat_for(&actor, &r.id).await?;
    Ok(Json(summary_json(
        &c.summary(),
        is_processing(&state, &r.id),
    )))
}

#[derive(Deserialize)]
pub struct DisplaySnapshot {
    pub display_messages: Value,
}

/// `PUT /sessions/{id}/display`: the page's own display snapshot, returned by the detail.
pub async fn save_display(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Path(session_id): Path<String>,
    Query(owner): Query<OwnerQuery>,
    Json(body): Json<DisplaySnapshot>,
) -> Result<Json<Value>, ApiError> {
    let r = existing(&state, &actor, &session_id, owner).await?;
    mpa_core::web::sessions::save_display(&state.agent, &actor, &r.id, &body.display_messages)
        .await?;
    Ok(Json(json!({"saved": true})))
}

pub async fn stop_session(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Path(session_id): Path<String>,
    Query(owner): Query<OwnerQuery>,
) -> Result<Json<Value>, ApiError> {
    let r = existing(&state, &actor, &session_id, owner).await?;
    let stopped = state.agent.stop_session(&actor, &r.id).await?;
    Ok(Json(json!({"stopped": stopped})))
}

/// `{"status": "ok"|"degraded", "disk": {available_bytes, total_bytes, floor_bytes, low},
/// "history": ..., "moviepilot": ...}`. Always 200 while the host serves: the process itself is
/// healthy, and a restart would not free space or mend a file. `degraded` while the data
/// directory's disk is below its free-space floor (new turns are then refused with
/// `storage_full`) or the evidence history reports trouble (a user's store that cannot be read).
/// `moviepilot` is what is known of the configured MoviePilot — whether its routes were read
/// (`reconciled`, with how many operations it offers) or only the catalogue is used
/// (`catalogue_only`, with why). No I/O beyond one statvfs: the state the parts hold.
pub async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    let disk = mpa_core::disk::status(state.agent.services());
    let low = disk.is_some_and(|d| d.low);
    let mut body = json!({"status": if low { "degraded" } else { "ok" }, "disk": disk});
    if let Some(h) = mpa_core::history::health(&state.agent) {
        if h.status != "ok" {
            body["status"] = json!("degraded");
        }
        body["history"] = json!(h);
    }
    if let Some(mp) = mpa_core::moviepilot::live::agent_health(&state.agent) {
        body["moviepilot"] = serde_json::to_value(mp).unwrap_or(Value::Null);
    }
    (StatusCode::OK, Json(body))
}
