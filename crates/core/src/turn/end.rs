//! Turn end: interruption notice (on stop or failure), plan snapshot on the last AI/tool message,
//! secret redaction of this turn's messages, and the chat snapshot written to the main store.
//!
//! The same snapshot is also written during the turn, after every completed step
//! ([`checkpoint`]), in its recovery form: calls without a received result are answered
//! "result unknown" and a recovery notice closes it. A process killed mid-turn (kill -9, a crash,
//! power loss) thus leaves the conversation up to its last completed step, and the next turn sees
//! it; a turn that ends normally overwrites it with the real snapshot.

use crate::plan::{PLAN_METADATA_KEY, PlanState};
use crate::redaction::redact;
use crate::review::ReviewCounters;
use crate::services::Services;
use crate::session::{PersistedState, SessionData};
use crate::tools::{SessionState, ToolOutput};
use crate::transcript::Transcript;
use crate::turn::StopCause;
use chrono::{DateTime, Utc};
use mpa_protocol::{Content, ContentPart, Message, Outcome, Role, ToolCall, TurnStatus, UserId};
use mpa_store::{Chat, Store, TurnJournal};
use std::sync::Arc;

pub const INTERRUPTION_KEY: &str = "moviepilot_interruption";
/// Host metadata of a turn's last assistant message: the host stop state the turn ended in
/// (blocked, waiting, unknown, partial).
pub const TURN_STATUS_KEY: &str = "moviepilot_turn_status";
/// Marks the notice of a snapshot written mid-turn (the turn never reached its end); the next
/// turn lists the session's open write receipts under it (see `session::recovery`).
pub const RECOVERY_KEY: &str = "moviepilot_recovery";

/// The notice closing a mid-turn snapshot. Only read when the process died before the turn ended.
pub const RECOVERY_NOTICE: &str = "[The previous turn did not finish: the host stopped before the turn \
ended (for example the process was killed or crashed). The conversation is kept up to the last completed \
step. Tool calls without a received result are marked \"result unknown\": they may or may not have taken \
effect. Before retrying any write, verify read-only whether it is already present (read the download, \
subscription or setting, or call get_tool_execution with the invocation_id of its receipt); retry only \
what is verifiably missing.]";

/// The result a mid-turn snapshot gives a call that had not reported one yet.
pub fn unanswered_result(call: &ToolCall) -> Message {
    let out = ToolOutput::unknown(
        "interrupted",
        "result unknown: the host stopped before this call reported a result; its effects may or may \
         not have happened — verify the current state read-only before retrying",
    );
    let mut m = Message::tool(
        call.id.clone(),
        call.name.clone(),
        out.content,
        Outcome::Unknown,
    );
    m.metadata = out.metadata;
    m.metadata
        .insert(RECOVERY_KEY.into(), serde_json::Value::Bool(true));
    m
}

/// Whether a message belongs to the recovery form of a turn not yet continued (a running turn's
/// snapshot, or one a killed process left): the web page hides these while the turn still runs.
pub fn is_recovery_form(m: &Message) -> bool {
    m.metadata.get(RECOVERY_KEY) == Some(&serde_json::Value::Bool(true))
}

fn notice(text: String, recovery: bool) -> Message {
    let mut m = Message::assistant(text, vec![]);
    m.metadata
        .insert(INTERRUPTION_KEY.into(), serde_json::Value::Bool(true));
    if recovery {
        m.metadata
            .insert(RECOVERY_KEY.into(), serde_json::Value::Bool(true));
    }
    m
}

fn current_plan(state: &SessionState) -> Option<serde_json::Value> {
    PlanState::of(state).map(|p| p.to_json())
}

/// The plan snapshot goes on the last AI/tool message of the turn.
fn attach_plan(tail: &mut [Message], plan: Option<serde_json::Value>) {
    if let Some(plan) = plan
        && let Some(last) = tail
            .iter_mut()
            .rev()
            .find(|m| matches!(m.role, Role::Assistant | Role::Tool))
    {
        last.metadata.insert(PLAN_METADATA_KEY.into(), plan);
    }
}

/// A turn that ended in a host stop state keeps it on its last assistant message, so the
/// conversation shows where a turn was blocked, left waiting or unknown, or partial (a stop and
/// a failure have their notice already).
fn attach_status(tail: &mut [Message], status: TurnStatus) {
    if !matches!(
        status,
        TurnStatus::Blocked | TurnStatus::Waiting | TurnStatus::Unknown | TurnStatus::Partial
    ) {
        return;
    }
    if let Some(last) = tail.iter_mut().rev().find(|m| m.role == Role::Assistant) {
        last.metadata.insert(
            TURN_STATUS_KEY.into(),
            serde_json::Value::String(status.as_str().into()),
        );
    }
}

/// The chat's title: the one it has, else made from the first message the user wrote. A
/// compaction summary has the user role but is the host's text, so it never names a chat (the
/// copy of the first user message kept after it is the user's words and may). A title earlier
/// versions made from a summary is made again.
fn title_of(title: &str, messages: &[Message]) -> String {
    if !title.is_empty() && !super::compact::is_summary_title(title) {
        return title.to_string();
    }
    messages
        .iter()
        .find(|m| m.role == Role::User && !super::compact::is_summary(m))
        .map(|first| make_title(&first.text()))
        .unwrap_or_default()
}

/// Closes the turn in `data` (notice, plan, redaction, title) and writes the chat snapshot. An
/// error means the snapshot was not written: the turn stays in `data` only, and the caller must
/// not acknowledge it ([`save`] writes it later).
pub async fn finish(
    services: &Services,
    data: &mut SessionData,
    turn_start: usize,
    status: TurnStatus,
    error: Option<&str>,
    cause: StopCause,
) -> Result<(), mpa_store::StoreError> {
    let text = match status {
        TurnStatus::Stopped => Some(format!(
            "[The previous turn was stopped {}. Tool calls without a received result are marked \
             \"result unknown\": verify the current state read-only before retrying any write.]",
            match cause {
                StopCause::User => "by the user",
                StopCause::Shutdown => "because the host was shutting down",
            }
        )),
        TurnStatus::Failed => Some(format!(
            "[The previous turn ended with an error: {}. Tool calls without a received result are marked \
             \"result unknown\".]",
            error.unwrap_or("unknown error")
        )),
        TurnStatus::Completed
        | TurnStatus::IterationLimit
        | TurnStatus::Partial
        | TurnStatus::Blocked
        | TurnStatus::Waiting
        | TurnStatus::Unknown => None,
    };
    if let Some(text) = text {
        data.transcript.push(notice(text, false));
    }
    let plan = current_plan(&data.state);
    data.save_capabilities(&services.caps);
    attach_plan(data.transcript.tail_mut(turn_start), plan);
    attach_status(data.transcript.tail_mut(turn_start), status);
    for m in data.transcript.tail_mut(turn_start) {
        crate::vision::retire_images(m);
        redact_message(m);
    }
    data.title = title_of(&data.title, data.transcript.messages());
    data.turn_status = Some(status);
    save(services, data).await
}

/// Writes the chat snapshot of `data` as it is in memory (after [`finish`], or again when an
/// earlier write failed).
pub async fn save(services: &Services, data: &SessionData) -> Result<(), mpa_store::StoreError> {
    let messages = data.transcript.messages();
    let chat = Chat {
        session_id: data.session_id.clone(),
        user_id: data.owner.clone(),
        channel: data.channel.clone(),
        title: data.title.clone(),
        agent_messages: messages.to_vec(),
        display_messages: data.transcript.display(),
        message_count: messages.len() as i64,
        session_state: data.persisted.to_json(),
        turn_status: data.turn_status,
        created_at: data.created_at,
        updated_at: chrono::Utc::now(),
    };
    let saved = services.store.save_chat(chat).await;
    if let Err(e) = &saved {
        tracing::error!(session = %data.session_id, error = %e, "chat snapshot not saved");
    }
    saved
}

/// What a mid-turn snapshot needs besides the transcript, taken when the turn's model loop
/// starts (the frozen system prompt is set by then).
pub struct Checkpoint {
    pub session_id: String,
    pub owner: UserId,
    pub channel: String,
    pub title: String,
    pub created_at: DateTime<Utc>,
    /// The session state at loop start; the review counters are taken fresh at each write.
    pub persisted: PersistedState,
    pub state: Arc<SessionState>,
    pub turn_start: usize,
    /// The turn start the store's full snapshot was last written for (`usize::MAX`: not yet in
    /// this turn; [`BASE_STALE`]: a compaction changed it): while it equals `turn_start`, a step
    /// writes only the journal.
    pub base_saved: std::sync::atomic::AtomicUsize,
}

/// `Checkpoint::base_saved` after a compaction: the saved base no longer holds the messages (nor
/// the display archive) before the turn, whatever its length, so the next step writes it again.
pub const BASE_STALE: usize = usize::MAX - 1;

impl Checkpoint {
    pub fn of(data: &SessionData, turn_start: usize) -> Self {
        Self {
            session_id: data.session_id.clone(),
            owner: data.owner.clone(),
            channel: data.channel.clone(),
            title: data.title.clone(),
            created_at: data.created_at,
            persisted: data.persisted.clone(),
            state: Arc::clone(&data.state),
            turn_start,
            base_saved: std::sync::atomic::AtomicUsize::new(usize::MAX),
        }
    }
}

/// Answers every call of `messages[from..]` that has no result yet with "result unknown", right
/// after the results that did arrive.
pub fn mark_unanswered(messages: &mut Vec<Message>, from: usize) {
    let mut i = from.min(messages.len());
    while i < messages.len() {
        if messages[i].role != Role::Assistant || messages[i].tool_calls.is_empty() {
            i += 1;
            continue;
        }
        let mut end = i + 1;
        while end < messages.len() && messages[end].role == Role::Tool {
            end += 1;
        }
        let missing: Vec<Message> = messages[i]
            .tool_calls
            .iter()
            .filter(|c| {
                !messages[i + 1..end]
                    .iter()
                    .any(|m| m.tool_call_id.as_deref() == Some(c.id.as_str()))
            })
            .map(unanswered_result)
            .collect();
        let n = missing.len();
        messages.splice(end..end, missing);
        i = end + n;
    }
}

/// The recovery form of this turn's messages (`transcript[turn_start..]`): unanswered calls marked
/// "result unknown", the recovery notice, the plan, secrets redacted. Only the turn is copied.
pub fn recovery_tail(
    transcript: &Transcript,
    turn_start: usize,
    plan: Option<serde_json::Value>,
) -> Vec<Message> {
    let all = transcript.messages();
    let mut tail = all[turn_start.min(all.len())..].to_vec();
    mark_unanswered(&mut tail, 0);
    tail.push(notice(RECOVERY_NOTICE.to_string(), true));
    attach_plan(&mut tail, plan);
    for m in &mut tail {
        crate::vision::retire_images(m);
        redact_message(m);
    }
    tail
}

/// The whole conversation in its recovery form: the messages before the turn as they are, then
/// [`recovery_tail`].
pub fn recovery_messages(
    transcript: &Transcript,
    turn_start: usize,
    plan: Option<serde_json::Value>,
) -> Vec<Message> {
    let all = transcript.messages();
    let mut messages = all[..turn_start.min(all.len())].to_vec();
    messages.extend(recovery_tail(transcript, turn_start, plan));
    messages
}

/// Writes the recovery snapshot of a running turn: only this turn's messages (the journal), on
/// top of the chat's full snapshot from before the turn, so a step costs what the turn wrote and
/// not what the chat holds. The first step of a turn (or the first after a compaction, which
/// changes the messages before it) saves the messages before the turn once more as the base — as
/// does a step after an earlier write of the chat failed (the stored base is then shorter). A
/// failure is returned: the turn must not go on unsaved (the invocation ledger stays the durable
/// boundary of the writes already made).
pub async fn checkpoint(
    store: &Store,
    cp: &Checkpoint,
    review: &ReviewCounters,
    transcript: &Transcript,
) -> Result<(), mpa_store::StoreError> {
    let start = cp.turn_start.min(transcript.len());
    let tail = recovery_tail(transcript, start, current_plan(&cp.state));
    let journal = TurnJournal {
        display: display_lines(&tail),
        messages: tail,
    };
    let mut persisted = cp.persisted.clone();
    persisted.review = review.clone();
    let state = persisted.to_json();
    let now = chrono::Utc::now();
    // The chat's full snapshot from the end of the last turn holds exactly the messages before
    // this one when nothing changed them since (its `message_count` is checked in the update);
    // after a compaction moved the turn's start, the base is written again.
    let saved = cp.base_saved.load(std::sync::atomic::Ordering::Acquire);
    if saved == start || saved == usize::MAX {
        match store
            .update_turn_journal(&cp.session_id, start, &journal, &state, now)
            .await
        {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(session = %cp.session_id, error = %e, "mid-turn snapshot not saved");
                return Err(e);
            }
        }
    }
    let before = &transcript.messages()[..start];
    let title = if before.is_empty() {
        title_of(&cp.title, &journal.messages)
    } else {
        title_of(&cp.title, before)
    };
    let chat = Chat {
        session_id: cp.session_id.clone(),
        user_id: cp.owner.clone(),
        channel: cp.channel.clone(),
        title,
        display_messages: transcript.display_upto(start),
        message_count: start as i64,
        agent_messages: before.to_vec(),
        session_state: state,
        // A running turn has no status yet (nor has one a crash cut short).
        turn_status: None,
        created_at: cp.created_at,
        updated_at: now,
    };
    match store.save_chat_with_journal(chat, &journal).await {
        Ok(()) => {
            cp.base_saved
                .store(start, std::sync::atomic::Ordering::Release);
            Ok(())
        }
        Err(e) => {
            tracing::warn!(session = %cp.session_id, error = %e, "mid-turn snapshot not saved");
            Err(e)
        }
    }
}

fn redact_in_place(s: &mut String) {
    if let std::borrow::Cow::Owned(o) = redact(s) {
        *s = o;
    }
}

fn redact_message(m: &mut Message) {
    match &mut m.content {
        Content::Text(t) => redact_in_place(t),
        Content::Parts(parts) => {
            for p in parts {
                if let ContentPart::Text { text } = p {
                    redact_in_place(text);
                }
            }
        }
    }
    for c in &mut m.tool_calls {
        redact_in_place(&mut c.arguments);
    }
}

/// Title from the first user message: at most 36 columns, CJK characters counting two.
pub fn make_title(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut width = 0;
    let mut out = String::new();
    for c in flat.chars() {
        let w = if (c as u32) >= 0x2E80 { 2 } else { 1 };
        if width + w > 36 {
            out.push('…');
            break;
        }
        width += w;
        out.push(c);
    }
    out
}

/// What a front end shows: user and assistant text, plus one line per tool result. A compaction
/// summary is a `context` line where the model's context was summarised (the user never typed
/// it), and the copy of the first user message kept after it is not shown twice.
pub fn display_messages(messages: &[Message]) -> serde_json::Value {
    serde_json::Value::Array(display_lines(messages))
}

/// The attached images a user message refers to, as the page shows them after a reload (the
/// file route; it answers while the attachment is kept).
fn attached_images(m: &Message) -> Vec<serde_json::Value> {
    let mpa_protocol::Content::Parts(parts) = &m.content else {
        return Vec::new();
    };
    parts
        .iter()
        .filter_map(|p| match p {
            mpa_protocol::ContentPart::ImageUrl { image_url }
                if crate::web::attachments::is_reference(&image_url.url) =>
            {
                let id = &image_url.url[crate::web::attachments::REF_PREFIX.len()..];
                Some(serde_json::json!({
                    "kind": "image",
                    "ref": image_url.url,
                    "url": format!("/api/v1/agent/file/{id}"),
                }))
            }
            _ => None,
        })
        .collect()
}

/// [`display_messages`] as a list.
pub fn display_lines(messages: &[Message]) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    // The calls' arguments, for each result's line detail (a result follows its call).
    let mut calls: std::collections::HashMap<&str, &mpa_protocol::ToolCall> =
        std::collections::HashMap::new();
    for m in messages {
        for c in &m.tool_calls {
            calls.insert(c.id.as_str(), c);
        }
        match m.role {
            Role::User if super::compact::is_summary(m) => out.push(serde_json::json!({
                "role": "context",
                "event": "compacted",
                "summary": super::compact::summary_text(m),
            })),
            Role::User if super::compact::is_pinned_copy(m) => {}
            Role::User if let Some(id) = super::steering::steering_id(m) => {
                out.push(super::steering::display_line(m, id));
            }
            Role::User => {
                let mut v = serde_json::json!({
                    "role": "user",
                    "content": m.text(),
                    "images": m.content.image_count(),
                });
                if let Some(at) = m.metadata.get(crate::web::CREATED_AT_KEY) {
                    v["created_at"] = at.clone();
                }
                let attached = attached_images(m);
                if !attached.is_empty() {
                    v["attachments"] = serde_json::Value::Array(attached);
                }
                out.push(v);
            }
            Role::Assistant => {
                let text = m.text();
                if !text.is_empty() {
                    let mut v = serde_json::json!({"role": "assistant", "content": text});
                    if m.metadata.contains_key(INTERRUPTION_KEY) {
                        v["notice"] = serde_json::Value::Bool(true);
                        // The page renders a host notice in its own language by this code.
                        if let Some(code) = crate::web::i18n::notice_code(&text) {
                            v["notice_code"] = serde_json::json!(code);
                        }
                    }
                    if is_recovery_form(m) {
                        v["recovery"] = serde_json::Value::Bool(true);
                    }
                    if let Some(status) = m.metadata.get(TURN_STATUS_KEY) {
                        v["turn_status"] = status.clone();
                    }
                    // When the turn's answer was saved, and the tokens the turn used.
                    if let Some(at) = m.metadata.get(crate::web::CREATED_AT_KEY) {
                        v["created_at"] = at.clone();
                    }
                    if let Some(usage) = m.metadata.get(crate::web::TURN_USAGE_KEY) {
                        v["usage"] = usage.clone();
                    }
                    out.push(v);
                }
            }
            Role::Tool => {
                let outcome = m.outcome.unwrap_or(mpa_protocol::Outcome::Unknown);
                let mut v = serde_json::json!({
                    "role": "tool",
                    "tool_id": m.tool_call_id,
                    "name": m.name,
                    "outcome": outcome.as_str(),
                    "status": if outcome.is_error() { "error" } else { "done" },
                    "message": crate::tools::invoke::summary_line(&m.text()),
                });
                let text = m.text();
                let arguments = m
                    .tool_call_id
                    .as_deref()
                    .and_then(|id| calls.get(id))
                    .map_or("", |c| c.arguments.as_str());
                let name = m.name.as_deref().unwrap_or("");
                if let (Some(line), serde_json::Value::Object(detail)) = (
                    v.as_object_mut(),
                    crate::tools::line::detail(name, arguments, Some(&text)),
                ) {
                    for (k, d) in detail {
                        line.entry(k).or_insert(d);
                    }
                }
                if is_recovery_form(m) {
                    v["recovery"] = serde_json::Value::Bool(true);
                }
                out.push(v);
            }
            Role::System => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "moviepilot_api".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn unanswered_calls_get_result_unknown_right_after_the_results_that_arrived() {
        let mut t = Transcript::restored(vec![Message::user("earlier")]);
        t.push(Message::user("add both"));
        t.push(Message::assistant(
            "",
            vec![call("a"), call("b"), call("c")],
        ));
        t.push(Message::tool(
            "b",
            "moviepilot_api",
            "{}",
            Outcome::Succeeded,
        ));
        let m = recovery_messages(&t, 1, Some(serde_json::json!({"objective": "x"})));
        let shape: Vec<(Role, Option<&str>, Option<Outcome>)> = m
            .iter()
            .map(|m| (m.role, m.tool_call_id.as_deref(), m.outcome))
            .collect();
        assert_eq!(
            shape,
            [
                (Role::User, None, None),
                (Role::User, None, None),
                (Role::Assistant, None, None),
                (Role::Tool, Some("b"), Some(Outcome::Succeeded)),
                (Role::Tool, Some("a"), Some(Outcome::Unknown)),
                (Role::Tool, Some("c"), Some(Outcome::Unknown)),
                (Role::Assistant, None, None),
            ]
        );
        assert!(m[4].text().contains("result unknown"));
        let last = m.last().unwrap();
        assert_eq!(last.text(), RECOVERY_NOTICE);
        assert_eq!(last.metadata[RECOVERY_KEY], true);
        assert_eq!(last.metadata[PLAN_METADATA_KEY]["objective"], "x");
        // The live transcript is untouched.
        assert_eq!(t.len(), 4);
    }

    #[test]
    fn a_title_made_from_a_summary_is_made_again_from_the_users_words() {
        let mut summary = Message::user(
            "[Summary of the earlier conversation / 较早对话的摘要. The messages it replaces…",
        );
        summary.metadata.insert(
            crate::turn::compact::SUMMARY_SOURCE_KEY.into(),
            crate::turn::compact::SUMMARY_SOURCE.into(),
        );
        let msgs = [summary.clone(), Message::user("find Dune")];
        let broken = make_title(&summary.text());
        assert_eq!(broken, "[Summary of the earlier conversation…");
        assert_eq!(title_of(&broken, &msgs), "find Dune");
        assert_eq!(title_of("", &msgs), "find Dune");
        assert_eq!(title_of("kept", &msgs), "kept");
        assert_eq!(title_of("", &msgs[..1]), "");
    }

    #[test]
    fn titles_are_bounded() {
        assert_eq!(make_title("  hello   world "), "hello world");
        let t = make_title(&"电影".repeat(20));
        assert_eq!(t.chars().count(), 19);
        assert!(t.ends_with('…'));
    }
}
