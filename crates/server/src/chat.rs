//! `/api/v1/agent/*`: the SSE chat stream and the session endpoints. Session ids only locate; the
//! core decides access, and another user's session is "not found" everywhere.

use crate::auth::Authed;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::sse::{FRAME_QUEUE, error_frames, pump};
use crate::state::AppState;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
use mpa_core::CoreError;
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
    #[serde(default)]
    pub images: Vec<String>,
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
    Json(req): Json<StreamRequest>,
) -> Result<Response, ApiError> {
    if state.shutting_down.is_cancelled() {
        return Err(ApiError::unavailable());
    }
    if req.text.trim().is_empty() && req.images.is_empty() {
        return Err(ApiError::bad_request("text must not be empty"));
    }
    let session_id = match req.session_id.filter(|s| !s.is_empty()) {
        Some(s) => s,
        None => mpa_core::new_session_id(),
    };
    let submitted = state
        .agent
        .submit(&actor, &session_id, WEB_CHANNEL, req.text, req.images)
        .await;
    let events = match submitted {
        Ok(rx) => rx,
        Err(e @ (CoreError::QueueFull { .. } | CoreError::SessionClosed)) => {
            return Ok(sse_once(error_frames(e.code(), &e.to_string())));
        }
        Err(e) => return Err(e.into()),
    };
    let (tx, rx) = mpsc::channel(FRAME_QUEUE);
    tokio::spawn(pump(events, tx, state.cfg.heartbeat));
    Ok(sse_response(rx))
}

#[derive(Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    pub page: Option<u32>,
    #[serde(default)]
    pub count: Option<u32>,
    /// Admins only: everyone's sessions.
    #[serde(default)]
    pub all: Option<bool>,
}

/// The fields a session list row and a session detail share.
fn summary_json(c: &mpa_core::ChatSummary, processing: bool) -> Value {
    json!({
        "session_id": c.session_id,
        "title": c.title,
        "user_id": c.user_id.0,
        "channel": c.channel,
        "message_count": c.message_count,
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

pub async fn list_sessions(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let page = q.page.unwrap_or(1).max(1);
    let count = q.count.unwrap_or(30).clamp(1, 200);
    let rows = state
        .agent
        .list_sessions(&actor, q.all.unwrap_or(false), page, count)
        .await?;
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
) -> Result<Json<Value>, ApiError> {
    let processing = is_processing(&state, &session_id);
    match state.agent.chat_for(&actor, &session_id).await {
        Ok(c) => {
            let mut v = summary_json(&c.summary(), processing);
            v["display_messages"] = c.display_messages;
            // Provider usage over the session (`last_*` / `total_*`, `model_call_count`).
            v["usage"] = c.session_state.get("usage").cloned().unwrap_or(Value::Null);
            Ok(Json(v))
        }
        // Started but not yet snapshotted (its first turn is still running).
        Err(CoreError::SessionNotFound) => {
            state.agent.check_access(&actor, &session_id).await?;
            let owner = state
                .agent
                .live(&session_id)
                .map(|h| h.owner().0.clone())
                .unwrap_or_default();
            Ok(Json(json!({
                "session_id": session_id,
                "title": "",
                "user_id": owner,
                "channel": WEB_CHANNEL,
                "message_count": 0,
                "display_messages": [],
                "is_processing": processing,
            })))
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn delete_session(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Path(session_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    state.agent.delete_session(&actor, &session_id).await?;
    tracing::info!(session = %session_id, "session deleted");
    Ok(Json(json!({"deleted": true, "session_id": session_id})))
}

pub async fn stop_session(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Path(session_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let stopped = state.agent.stop_session(&actor, &session_id).await?;
    Ok(Json(json!({"stopped": stopped})))
}

pub async fn healthz() -> impl IntoResponse {
    (StatusCode::OK, Json(json!({"status": "ok"})))
}
