//! The OpenAI-compatible surface: `POST /v1/chat/completions` (streaming and not) and
//! `GET /v1/models`. The agent keeps the conversation in its own session, so only the newest user
//! message of the request is submitted (for a session it has never seen, the request's earlier
//! messages go along as context); the `user` field (or an `X-Session-Id` header) selects the
//! session. The answer is the agent's final text; tool activity is left out.
//!
//! Steering (spec runtime.md §2.5): a request for a session whose turn is still running waits
//! behind that turn, as before, unless it says `"steer": true` (an extension field; with the
//! official clients, `extra_body={"steer": True}`). Then the message joins the running turn at
//! its next model call and the request is answered at once: an empty assistant message with a
//! top-level `steering` object `{status: "queued", message_id, content}` (streamed: one chunk
//! with no choices carrying it). The running turn's own stream gets a chunk with no choices
//! and `steering: {status: "applied", …}` where the message joined. With no running turn of
//! the caller's (or eight messages already waiting) the request is an ordinary turn.
//!
//! Sessions here are always the caller's own ([`mpa_core::SessionScope::Own`]), admins and the
//! static admin token included: another user's session id is exactly a missing one (a new
//! session of the caller's).

use crate::auth::Authed;
use crate::chat::sse_response;
use crate::error::ApiError;
use crate::extract::Json;
use crate::sse::{FRAME_QUEUE, frame};
use crate::state::AppState;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use mpa_core::Steered;
use mpa_protocol::{Actor, Event, SteeringStatus, TurnStatus, Usage};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

pub const OPENAI_CHANNEL: &str = "openai";

#[derive(Deserialize)]
pub struct CompletionRequest {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub messages: Vec<Value>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub user: Option<String>,
    /// Join the session's running turn instead of waiting behind it (see the module docs).
    #[serde(default)]
    pub steer: bool,
}

/// Text and image URLs of an OpenAI message `content` (a string or a list of parts).
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub fn split_content(content: &Value) -> (String, Vec<String>) {
    match content {
        Value::String(s) => (s.clone(), Vec::new()),
        Value::Array(parts) => {
            let mut text = Vec::new();
            let mut images = Vec::new();
            for p in parts {
                match p["type"].as_str() {
                    Some("text") => text.push(p["text"].as_str().unwrap_or_default().to_string()),
                    Some("image_url") => {
                        let url = p["image_url"]["url"]
                            .as_str()
                            .or_else(|| p["image_url"].as_str());
                        if let Some(u) = url {
                            images.push(u.to_string());
                        }
                    }
                    _ => {}
                }
            }
            (text.join("\n"), images)
        }
        _ => (String::new(), Vec::new()),
    }
}

/// What a stateless client sent before its newest user message: its own system text and its
/// earlier user/assistant turns, as real messages (a session the host has not seen takes them
/// in once; a known session already has its own history).
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub fn client_context(messages: &[Value]) -> Option<mpa_protocol::ClientContext> {
    let last_user = messages.iter().rposition(|m| m["role"] == "user")?;
    let system: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "system" || m["role"] == "developer")
        .map(|m| split_content(&m["content"]).0)
        .filter(|t| !t.trim().is_empty())
        .collect();
    let earlier: Vec<mpa_protocol::Message> = messages[..last_user]
        .iter()
        .filter_map(|m| {
            let (text, _) = split_content(&m["content"]);
            if text.trim().is_empty() {
                return None;
            }
            match m["role"].as_str() {
                Some("user") => Some(mpa_protocol::Message::user(text)),
                Some("assistant") => Some(mpa_protocol::Message::assistant(text, vec![])),
                _ => None,
            }
        })
        .collect();
    if system.is_empty() && earlier.is_empty() {
        return None;
    }
    Some(mpa_protocol::ClientContext {
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        messages: earlier,
    })
}

/// The session a request continues: the header names it outright; a `user` value maps to a
/// per-caller id (hashed with the caller's id, so equal `user` strings of two callers never meet).
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub fn session_for(actor: &Actor, headers: &HeaderMap, user: Option<&str>) -> String {
    if let Some(s) = headers
        .get("x-session-id")
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
    {
        return s.to_string();
    }
    match user.filter(|u| !u.is_empty()) {
        Some(u) => {
            let digest = Sha256::digest(format!("{}:{u}", actor.user_id.0).as_bytes());
            format!("openai-{}", &hex::encode(digest)[..32])
        }
        None => format!("openai-{}", mpa_core::new_session_id()),
    }
}

fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

pub async fn completions(
    State(state): State<AppState>,
    Authed(actor): Authed,
    headers: HeaderMap,
    Json(req): Json<CompletionRequest>,
) -> Result<Response, ApiError> {
    if state.shutting_down.is_cancelled() {
        return Err(ApiError::unavailable());
    }
    let last_user = req
        .messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .ok_or_else(|| ApiError::bad_request("messages must contain a user message"))?;
    let (text, images) = split_content(&last_user["content"]);
    if text.trim().is_empty() && images.is_empty() {
        return Err(ApiError::bad_request("the last user message is empty"));
    }
    // Always the id `/v1/models` lists, whatever the client asked for.
    let _ = req.model;
    let model = state.cfg.model_name.clone();
    let session = state
        .agent
        .resolve_session(
            &actor,
            &session_for(&actor, &headers, req.user.as_deref()),
            &mpa_core::SessionScope::Own,
        )
        .await?;
    // A stateless client resends the whole conversation; a session the agent has never seen gets
    // the earlier turns as context so nothing the client showed the user is lost.
    let context = if session.exists {
        None
    } else {
        client_context(&req.messages)
    };
    let events = if req.steer && session.exists {
        match state
            .agent
            .steer_to(&actor, &session, OPENAI_CHANNEL, text, images, None)
            .await?
        {
            Steered::Turn(rx) => rx,
            Steered::Queued { event, .. } => {
                let mut resp = queued_response(&event, &model, req.stream);
                if let Ok(v) = session.client_id.parse() {
                    resp.headers_mut().insert("x-session-id", v);
                }
                return Ok(resp);
            }
        }
    } else {
        state
            .agent
            .submit_to(&actor, &session, OPENAI_CHANNEL, text, images, context)
            .await?
    };
    let session_id = session.client_id;
    let id = format!("chatcmpl-{}", mpa_core::new_session_id());
    let mut resp = if req.stream {
        let (tx, rx) = mpsc::channel(FRAME_QUEUE);
        tokio::spawn(stream_chunks(events, tx, id, model, session_id.clone()));
        sse_response(rx)
    } else {
        let (status, text, usage, error) = collect(events).await;
        match failure(status, !text.is_empty(), error) {
            Some(body) => (failure_status(&body), Json(body)).into_response(),
            None => Json(json!({
                "id": id,
                "object": "chat.completion",
                "created": now_secs(),
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish_reason(status),
                }],
                "usage": usage_json(&usage),
                // The host's stop state (an extension field OpenAI clients ignore).
                "turn_status": status,
            }))
            .into_response(),
        }
    };
    // Which session answered (a client that did not choose one can continue it).
    if let Ok(v) = session_id.parse() {
        resp.headers_mut().insert("x-session-id", v);
    }
    Ok(resp)
}

/// The `steering` object of a steering event (`None` for other events).
fn steering_json(ev: &Event) -> Option<Value> {
    let Event::Steering {
        status,
        message_id,
        content,
        assistant_message_id,
        continuation_message_id,
    } = ev
    else {
        return None;
    };
    let mut v = json!({"status": status.as_str(), "message_id": message_id, "content": content});
    if *status == SteeringStatus::Applied {
        v["assistant_message_id"] = json!(assistant_message_id);
        v["continuation_message_id"] = json!(continuation_message_id);
    }
    Some(v)
}

/// The answer to a request that joined the running turn: nothing to say yet but the
/// acknowledgement (see the module docs).
fn queued_response(queued: &Event, model: &str, stream: bool) -> Response {
    let id = format!("chatcmpl-{}", mpa_core::new_session_id());
    let steering = steering_json(queued).unwrap_or(Value::Null);
    let created = now_secs();
    if !stream {
        return Json(json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ""},
                         "finish_reason": "stop"}],
            "usage": usage_json(&Usage::default()),
            "steering": steering,
        }))
        .into_response();
    }
    let chunk = |choices: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
               "choices": choices})
    };
    let mut info = chunk(json!([]));
    info["steering"] = steering;
    let frames = [
        frame(&chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": ""},
                             "finish_reason": null}]),
        )),
        frame(&info),
        frame(&chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
        )),
        bytes::Bytes::from_static(b"data: [DONE]\n\n"),
    ];
    let (tx, rx) = mpsc::channel(frames.len());
    for f in frames {
        let _ = tx.try_send(f);
    }
    sse_response(rx)
}

/// A turn that did not complete and produced no text is an error, not an empty answer (the
/// OpenAI clients raise on an `error` object, streamed or not). A turn that could not be saved
/// is an error even with its text: the host never acknowledges what it did not store.
fn failure(status: TurnStatus, answered: bool, error: Option<(String, String)>) -> Option<Value> {
    let unsaved = error.as_ref().is_some_and(|(code, _)| is_storage(code));
    if status == TurnStatus::Completed || (answered && !unsaved) {
        return None;
    }
    let (code, message) = error.unwrap_or((
        "agent_failed".into(),
        "the turn ended without an answer".into(),
    ));
    Some(json!({"error": {"code": code, "message": message, "type": "server_error"}}))
}

/// `storage_full` / `storage_error`: the turn's snapshot was not written.
fn is_storage(code: &str) -> bool {
    matches!(code, "storage_full" | "storage_error")
}

/// The HTTP status of a failed turn: the host's own storage, else the model behind it.
fn failure_status(body: &Value) -> StatusCode {
    match body["error"]["code"].as_str() {
        Some("storage_full") => StatusCode::INSUFFICIENT_STORAGE,
        Some("storage_error") => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_GATEWAY,
    }
}

/// The turn's usage as OpenAI spells it; the host's own estimate (the provider reported none)
/// is marked `estimated: true`.
fn usage_json(u: &Usage) -> Value {
    let mut v = json!({
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.total_tokens.max(u.input_tokens + u.output_tokens),
    });
    if u.estimated {
        v["estimated"] = json!(true);
    }
    v
}

fn finish_reason(status: TurnStatus) -> &'static str {
    match status {
        // A host stop state (blocked, waiting, unknown) still ends with the host's own words;
        // `turn_status` next to it says which.
        TurnStatus::Completed
        | TurnStatus::Stopped
        | TurnStatus::Failed
        | TurnStatus::Blocked
        | TurnStatus::Waiting
        | TurnStatus::Unknown => "stop",
        TurnStatus::IterationLimit | TurnStatus::Partial => "length",
    }
}

async fn collect(
    mut events: mpsc::UnboundedReceiver<Event>,
) -> (TurnStatus, String, Usage, Option<(String, String)>) {
    let mut usage = Usage::default();
    let mut error = None;
    while let Some(ev) = events.recv().await {
        match ev {
            Event::Usage { usage: u } => usage.add(&u),
            Event::Error { code, message, .. } => error = Some((code, message)),
            Event::TurnEnded {
                status, final_text, ..
            } => return (status, final_text, usage, error),
            _ => {}
        }
    }
    (TurnStatus::Failed, String::new(), usage, error)
}

async fn stream_chunks(
    mut events: mpsc::UnboundedReceiver<Event>,
    out: mpsc::Sender<bytes::Bytes>,
    id: String,
    model: String,
    session_id: String,
) {
    let created = now_secs();
    let chunk = |delta: Value, finish: Option<&str>| {
        frame(&json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": session_id,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }))
    };
    if out
        .send(chunk(json!({"role": "assistant", "content": ""}), None))
        .await
        .is_err()
    {
        return;
    }
    let mut status = TurnStatus::Failed;
    let (mut answered, mut error) = (false, None);
    let mut usage = Usage::default();
    while let Some(ev) = events.recv().await {
        match ev {
            Event::Usage { usage: u } => usage.add(&u),
            Event::Delta { content } => {
                answered |= !content.is_empty();
                let sent = out.send(chunk(json!({"content": content}), None)).await;
                if sent.is_err() {
                    return;
                }
            }
            Event::Error { code, message, .. } => error = Some((code, message)),
            Event::TurnEnded { status: s, .. } => {
                status = s;
                break;
            }
            ev @ Event::Steering { .. } => {
                // Where a steering message joined (or was discarded): a chunk with no choices.
                let mut info = json!({
                    "id": id, "object": "chat.completion.chunk", "created": created,
                    "model": model, "system_fingerprint": session_id, "choices": [],
                });
                info["steering"] = steering_json(&ev).unwrap_or(Value::Null);
                if out.send(frame(&info)).await.is_err() {
                    return;
                }
            }
            _ => {}
        }
    }
    let last = match failure(status, answered, error) {
        Some(body) => frame(&body),
        None => {
            let mut last = json!({
                "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                "system_fingerprint": session_id,
                "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason(status)}],
                "turn_status": status,
            });
            last["usage"] = usage_json(&usage);
            frame(&last)
        }
    };
    let _ = out.send(last).await;
    let _ = out
        .send(bytes::Bytes::from_static(b"data: [DONE]\n\n"))
        .await;
}

pub async fn models(State(state): State<AppState>, Authed(_actor): Authed) -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{"id": state.cfg.model_name, "object": "model", "created": 0, "owned_by": "mpagent"}],
    }))
}
