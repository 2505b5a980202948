//! Translation of a turn's [`Event`] stream into SSE frames (`data: <json>\n\n`): at most one
//! delta frame per [`DELTA_WINDOW`] (the first at once, later ones coalesced; [`DELTA_MAX`] bytes
//! flush early), `heartbeat` after a silence, `done` last. Text and tool frames carry the
//! assistant segment they belong to (`assistant_message_id`): the turn's first, then each
//! continuation a `steering` `applied` frame opens. The pump stops reading when the client hangs up; the turn itself keeps running (dropping the
//! receiver never stops it) and writes its snapshot when it ends.

use bytes::Bytes;
use mpa_core::redaction::redact;
use mpa_core::web::i18n::{self, Locale};
use mpa_protocol::{Event, Outcome, SteeringStatus};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

pub const DELTA_WINDOW: Duration = Duration::from_millis(30);
pub const DELTA_MAX: usize = 256;
/// Frames buffered towards a slow client; beyond it the pump waits and deltas coalesce.
pub const FRAME_QUEUE: usize = 64;

pub fn frame(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

/// An `error` frame: `message` in the stream's language, both texts in `message_i18n`,
/// `retryable` when trying again may help (the page offers a retry).
pub fn error_json(code: &str, message: &str, locale: Locale) -> Value {
    json!({"type": "error", "code": code,
           "message": i18n::localise(code, message, locale),
           "message_i18n": {"en": message, "zh": i18n::localise(code, message, Locale::Zh)},
           "retryable": i18n::retryable(code)})
}

/// `done`/`error` frames for a turn that never started (queue full, shutting down).
pub fn error_frames(code: &str, message: &str, locale: Locale) -> Vec<Bytes> {
    vec![
        frame(&error_json(code, message, locale)),
        frame(&json!({"type": "done", "status": "failed"})),
    ]
}

/// The whole answer to a message that steered a running turn (spec runtime.md §2.5): `start`,
/// the `queued` acknowledgement, `done`. The running turn's own stream says `applied` later.
pub fn queued_frames(session_id: &str, queued: &Event) -> Vec<Bytes> {
    let mut frames = vec![frame(&json!({"type": "start", "session_id": session_id}))];
    frames.extend(event_frame(queued, session_id, "", Locale::En).map(|v| frame(&v)));
    frames.push(frame(&json!({"type": "done", "status": "queued"})));
    frames
}

/// Tool status as the page shows it: failed and unknown both need the user's attention
/// ([`Outcome::is_error`], the same rule the saved `display_messages` use).
pub fn tool_status(outcome: Outcome) -> &'static str {
    if outcome.is_error() { "error" } else { "done" }
}

/// A tool frame with the host's line detail (operation, arguments, preview, summary in both
/// languages — already redacted by the host) beside its own fields.
fn with_detail(mut frame: Value, detail: &Value) -> Value {
    if let (Some(f), Some(d)) = (frame.as_object_mut(), detail.as_object()) {
        for (k, v) in d {
            f.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    frame
}

/// The SSE frame for one non-delta event (`None` for events the web protocol does not carry).
/// `session_id` is the id the client uses (not the server-side one). Tool lines are redacted the
/// way the stored chat is, so a secret a tool printed never reaches the page live either.
fn event_frame(
    ev: &Event,
    session_id: &str,
    assistant_message_id: &str,
    locale: Locale,
) -> Option<Value> {
    Some(match ev {
        Event::TurnStarted {
            assistant_message_id,
            ..
        } => json!({"type": "start", "session_id": session_id,
                    "assistant_message_id": assistant_message_id}),
        Event::ToolStarted {
            tool_id,
            name,
            message,
            detail,
        } => with_detail(
            json!({"type": "tool", "tool_id": tool_id, "name": name, "status": "running",
                   "message": redact(message), "assistant_message_id": assistant_message_id}),
            detail,
        ),
        Event::ToolFinished {
            tool_id,
            name,
            outcome,
            message,
            detail,
        } => with_detail(
            json!({"type": "tool", "tool_id": tool_id, "name": name,
                   "status": tool_status(*outcome), "outcome": outcome.as_str(),
                   "message": redact(message), "assistant_message_id": assistant_message_id}),
            detail,
        ),
        Event::Error {
            code,
            message,
            kind,
        } => {
            let mut v = error_json(code, message, locale);
            v["kind"] = json!(kind);
            v
        }
        Event::TurnEnded { status, .. } => json!({"type": "done", "status": status}),
        Event::Protected { content } => {
            json!({"type": "interaction-protected", "content": content})
        }
        Event::Steering {
            status,
            message_id,
            content,
            assistant_message_id,
            continuation_message_id,
        } => {
            let mut v = json!({"type": "steering", "status": status.as_str(),
                               "message_id": message_id, "content": content});
            if *status == SteeringStatus::Applied {
                // The user line the page inserts at the boundary, as the saved chat lists it.
                v["display_message"] = json!({"role": "user", "content": content,
                                              "steering_message_id": message_id});
                v["assistant_message_id"] = json!(assistant_message_id);
                v["continuation_message_id"] = json!(continuation_message_id);
            }
            v
        }
        // The page marks where the model's context was summarised, as the stored chat does.
        Event::Compacted { summary } => {
            json!({"type": "context", "event": "compacted", "summary": redact(summary)})
        }
        // The whole plan, replacing the page's panel (objective, steps with status and
        // evidence, explanation); the tool already scrubbed it of secrets.
        Event::PlanUpdated { plan } => json!({"type": "plan", "plan": plan}),
        Event::Delta { .. }
        // Summed by the pump into the `done` frame's `usage` (the turn's tokens).
        | Event::Usage { .. }
        | Event::Reasoning { .. }
        | Event::Budget { .. }
        // A nested agent's events (a subagent's) are not the user's stream.
        | Event::Nested { .. } => return None,
    })
}

/// Reads `events` until the turn ends, writing frames to `out`; `session_id` is the client's id
/// of the session. Returns early (dropping `events`) when the client is gone.
pub async fn pump(
    mut events: mpsc::UnboundedReceiver<Event>,
    out: mpsc::Sender<Bytes>,
    heartbeat: Duration,
    session_id: String,
    locale: Locale,
) {
    let mut buf = String::new();
    let mut flush_at: Option<Instant> = None;
    let mut last_sent = Instant::now();
    let mut last_delta: Option<Instant> = None;
    let mut assistant_message_id = String::new();
    let mut usage: Option<mpa_protocol::Usage> = None;
    loop {
        let hb_at = last_sent + heartbeat;
        let wake = flush_at.map_or(hb_at, |f| f.min(hb_at));
        tokio::select! {
            ev = events.recv() => {
                let Some(ev) = ev else {
                    // The session actor went away without ending the turn (host shutdown).
                    if !flush(&mut buf, &out, &assistant_message_id).await { return; }
                    let _ = out.send(frame(&json!({"type": "done", "status": "failed"}))).await;
                    return;
                };
                if let Event::Delta { content } = &ev {
                    buf.push_str(content);
                    // Leading edge: the first delta after a quiet window goes out at once (time
                    // to first text matters most); later ones wait for the window or the size cap.
                    let window_open = last_delta.is_none_or(|t| t.elapsed() >= DELTA_WINDOW);
                    if buf.len() >= DELTA_MAX || window_open {
                        if !flush(&mut buf, &out, &assistant_message_id).await { return; }
                        flush_at = None;
                        last_sent = Instant::now();
                        last_delta = Some(last_sent);
                    } else if flush_at.is_none() {
                        flush_at = Some(last_delta.map_or_else(Instant::now, |t| t + DELTA_WINDOW));
                    }
                    continue;
                }
                if let Event::TurnStarted { assistant_message_id: id, .. } = &ev {
                    assistant_message_id.clone_from(id);
                }
                if let Event::Usage { usage: u } = &ev {
                    usage.get_or_insert_default().add(u);
                    continue;
                }
                if !flush(&mut buf, &out, &assistant_message_id).await { return; }
                flush_at = None;
                if let Some(mut v) = event_frame(&ev, &session_id, &assistant_message_id, locale) {
                    // The turn's tokens (every model call of it) ride on its `done` frame.
                    if let (Event::TurnEnded { .. }, Some(u)) = (&ev, &usage) {
                        v["usage"] = json!(u);
                    }
                    if out.send(frame(&v)).await.is_err() { return; }
                    last_sent = Instant::now();
                }
                // Everything after an applied steering message belongs to its continuation.
                if let Event::Steering { continuation_message_id: Some(id), .. } = &ev {
                    assistant_message_id.clone_from(id);
                }
                if matches!(ev, Event::TurnEnded { .. }) {
                    return;
                }
            }
            _ = tokio::time::sleep_until(wake) => {
                if flush_at.is_some_and(|f| f <= Instant::now()) {
                    if !flush(&mut buf, &out, &assistant_message_id).await { return; }
                    flush_at = None;
                    last_sent = Instant::now();
                    last_delta = Some(last_sent);
                } else if Instant::now() >= hb_at {
                    if out.send(frame(&json!({"type": "heartbeat"}))).await.is_err() { return; }
                    last_sent = Instant::now();
                }
            }
            _ = out.closed() => return,
        }
    }
}

/// Sends the buffered delta text of segment `assistant_message_id`; `false` when the client is
/// gone.
async fn flush(buf: &mut String, out: &mpsc::Sender<Bytes>, assistant_message_id: &str) -> bool {
    if buf.is_empty() {
        return true;
    }
    let content = std::mem::take(buf);
    out.send(frame(&json!({"type": "delta", "content": content,
                           "assistant_message_id": assistant_message_id})))
        .await
        .is_ok()
}
