//! Secret-read confirmation (spec runtime.md §11.4). A model response holding a `moviepilot_api`
//! call that asks for secret setting values (`show_secrets`) runs none of its calls: each is
//! answered "paused, nothing executed", and the host asks the user. Only the same user, on the
//! same channel, within [`CONFIRMATION_TTL`], can answer: `确认` runs that one call with its
//! secrets shown and hands the result to the user on the protected channel
//! ([`Event::Protected`](mpa_protocol::Event::Protected)) — never to the model, the chat
//! snapshot, the display history or the evidence — and `取消` drops it. Entry points that cannot
//! ask the user (the OpenAI-compatible endpoint) answer "this entry point cannot confirm".

use crate::services::Services;
use crate::tools::gate::{Admission, Batch, Gate, Halt};
use crate::tools::invoke::invoke;
use crate::tools::policy::Origin;
use crate::tools::{SessionState, ToolContext, ToolOutput, moviepilot_api};
use mpa_protocol::{Actor, ToolCall, TurnStatus, UserId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// How long a question waits for its answer (`SECRET_CONFIRMATION_TTL`).
pub const CONFIRMATION_TTL: Duration = Duration::from_secs(5 * 60);

/// Channels where a person reads the question and can answer it.
const INTERACTIVE_CHANNELS: [&str; 2] = ["web", "cli"];

/// The host's question, said instead of running the calls.
pub const QUESTION: &str = "这次操作要显示 MoviePilot 设置中的敏感值（密码、密钥等）。回复「确认」显示，回复「取消」放弃（5 分钟内有效），结果只显示给你，不会保存在对话里。\n\
Showing these MoviePilot settings reveals secret values (passwords, keys). Reply 确认 to show them or 取消 to cancel (within 5 minutes); the values are shown only to you and are not kept in the conversation.";

/// A secret read waiting for its answer, kept with the session (so a reload or the next
/// `mpagent chat` process can answer it). Its arguments name the setting, never a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingSecretRead {
    /// The call's JSON arguments, run as they are on `确认`.
    pub arguments: String,
    pub user_id: UserId,
    pub channel: String,
    /// When the question was asked, seconds since the epoch.
    pub asked_at: i64,
}

/// Whether `call` asks MoviePilot for secret values.
pub fn requests_secrets(call: &ToolCall) -> bool {
    serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .is_some_and(|v| asks_secrets(&call.name, &v))
}

/// Whether a call of `tool` with these parsed arguments asks MoviePilot for secret values.
fn asks_secrets(tool: &str, args: &Value) -> bool {
    tool == moviepilot_api::NAME && shows_secrets(&args["query"])
}

/// A query's `show_secrets` is set (`true`, or the text "true" the validation also accepts).
pub fn shows_secrets(query: &Value) -> bool {
    let v = &query["show_secrets"];
    v == &Value::Bool(true) || v.as_str().is_some_and(|s| s.eq_ignore_ascii_case("true"))
}

/// Whether a person on `channel` can answer the question.
pub fn interactive(channel: &str) -> bool {
    INTERACTIVE_CHANNELS.contains(&channel)
}

/// The answer every call of a pausing response gets.
pub fn paused(interactive: bool) -> ToolOutput {
    if interactive {
        ToolOutput::failure(
            "secret_read_confirmation_required",
            "paused, nothing executed: showing secret setting values needs the user's confirmation, \
             and the host has asked the user; do not repeat the call",
        )
    } else {
        ToolOutput::failure(
            "secret_read_not_confirmable",
            "paused, nothing executed: this entry point cannot confirm showing secret values; \
             read the settings without show_secrets (secret values stay hidden)",
        )
    }
}

/// The secret read of a session: the question waiting in the loop, and the one-shot permission
/// of a confirmed call (a slot of the session's state).
#[derive(Debug, Default)]
pub struct SecretReadState {
    /// Asked during the current turn; the turn moves it into the persisted state when it ends.
    pub pending: Option<PendingSecretRead>,
    /// Set by the host for the one confirmed secret read; consumed by that call.
    pub confirmed: bool,
}

/// Records the question for `call` (one at a time; a newer question replaces an older one). The
/// turn moves it into the session's persisted state when it ends.
pub fn ask(state: &SessionState, call: &ToolCall, actor: &Actor, channel: &str) {
    let pending = PendingSecretRead {
        arguments: call.arguments.clone(),
        user_id: actor.user_id.clone(),
        channel: channel.to_string(),
        asked_at: chrono::Utc::now().timestamp(),
    };
    state.with(|s: &mut SecretReadState| s.pending = Some(pending));
}

/// The question asked during this turn, if any (taken).
pub fn take_asked(state: &SessionState) -> Option<PendingSecretRead> {
    state.with(|s: &mut SecretReadState| s.pending.take())
}

/// The one-shot permission a confirmed call consumes: `true` once after [`answer`] set it.
pub fn take_confirmed(state: &Arc<SessionState>) -> bool {
    state.with(|s: &mut SecretReadState| std::mem::take(&mut s.confirmed))
}

/// Spec §11.4 as a gate: in a user's turn, when an administrator's response holds a call asking
/// for secret values, none of that response's calls runs. Where a person can answer, the host
/// asks and the turn ends with the question; elsewhere the model is told it cannot be confirmed.
/// (Settings are administrators' operations: anyone else is refused by the policy.)
pub struct SecretReadGate;

impl Gate for SecretReadGate {
    fn name(&self) -> &'static str {
        "secret_read_confirmation"
    }

    fn admit(&self, batch: &Batch<'_>, admission: &mut Admission) {
        if batch.origin != Origin::Turn || !batch.actor.is_admin {
            return;
        }
        let Some(secret) = batch.calls.iter().find(|c| {
            c.args
                .as_ref()
                .is_some_and(|a| asks_secrets(&c.call.name, a))
        }) else {
            return;
        };
        let interactive = interactive(batch.channel);
        for i in 0..batch.calls.len() {
            admission.answer(i, paused(interactive));
        }
        if interactive {
            ask(batch.session, secret.call, batch.actor, batch.channel);
            admission.halt(Halt {
                code: "secret_read_confirmation_required".into(),
                message: "the host asked the user to confirm showing secret values".into(),
                status: TurnStatus::Completed,
                reply: Some(QUESTION.to_string()),
            });
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    Confirm,
    Cancel,
}

fn reply_of(text: &str) -> Option<Reply> {
    let t = text.trim().trim_end_matches(['。', '.', '!', '！']);
    if t == "确认" || t.eq_ignore_ascii_case("confirm") {
        Some(Reply::Confirm)
    } else if t == "取消" || t.eq_ignore_ascii_case("cancel") {
        Some(Reply::Cancel)
    } else {
        None
    }
}

/// The host's answer to a confirmation reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// What the transcript keeps (and the model later reads): never the values.
    pub reply: String,
    /// The confirmed result, for the user only.
    pub protected: Option<String>,
}

/// When `text` answers this session's pending question from the same user and channel, the
/// host's answer; `None` otherwise (the text is an ordinary message — and from that user, it
/// drops the question: a later `确认` answers nothing).
pub async fn answer(
    services: &Arc<Services>,
    actor: &Actor,
    session_id: &str,
    channel: &str,
    pending: &mut Option<PendingSecretRead>,
    state: &Arc<SessionState>,
    text: &str,
) -> Option<Answer> {
    let pending = match pending {
        Some(p) if p.user_id == actor.user_id && p.channel == channel => pending.take(),
        _ => None,
    }?;
    let reply = reply_of(text)?;
    let age = chrono::Utc::now()
        .timestamp()
        .saturating_sub(pending.asked_at);
    if !(0..=CONFIRMATION_TTL.as_secs() as i64).contains(&age) {
        return Some(Answer {
            reply: "确认已过期（超过 5 分钟），没有执行。需要的话请重新提出。\n\
                    The confirmation expired (over 5 minutes); nothing was executed. Ask again if you still need it."
                .into(),
            protected: None,
        });
    }
    if reply == Reply::Cancel {
        return Some(Answer {
            reply: "已取消，没有执行。\nCancelled; nothing was executed.".into(),
            protected: None,
        });
    }
    let call = ToolCall {
        id: format!("secret-read-{}", uuid::Uuid::new_v4().simple()),
        name: moviepilot_api::NAME.to_string(),
        arguments: pending.arguments,
    };
    let mut ctx = ToolContext::detached(actor.clone(), session_id, &call.id);
    ctx.channel = channel.to_string();
    ctx.request_id = uuid::Uuid::new_v4().simple().to_string();
    ctx.session = Arc::clone(state);
    ctx.agent = crate::handle::AgentHandle::new(services, Origin::Turn, &ctx.request_id);
    state.with(|s: &mut SecretReadState| s.confirmed = true);
    // The user's answer to the batch gate's question admits this one call: it passes the
    // per-call gates only (admitting it again would pause it again).
    let invoked = invoke(services.invoker(), ctx, Origin::Turn, &call, 1).await;
    // Consumed by the call; cleared here too if the call never got that far (policy refusal).
    take_confirmed(state);
    let outcome = invoked.output.outcome;
    let content = invoked.full_content.unwrap_or(invoked.output.content);
    Some(Answer {
        reply: format!(
            "[已按你的确认读取设置（{outcome}），结果只显示给你，不保存在对话中。\n\
             The settings were read as you confirmed ({outcome}); the result was shown only to you and is not kept in the conversation.]"
        ),
        protected: Some(content),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(args: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: moviepilot_api::NAME.into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn only_show_secrets_asks_and_only_exact_replies_answer() {
        assert!(requests_secrets(&call(
            r#"{"operation_id":"config.system.get","query":{"show_secrets":true}}"#
        )));
        assert!(requests_secrets(&call(
            r#"{"operation_id":"config.system.get","query":{"show_secrets":"TRUE"}}"#
        )));
        assert!(!requests_secrets(&call(
            r#"{"operation_id":"config.system.get","query":{"show_secrets":false}}"#
        )));
        assert!(!requests_secrets(&call(
            r#"{"operation_id":"config.system.get"}"#
        )));
        assert!(!requests_secrets(&ToolCall {
            name: "memory".into(),
            ..call(r#"{"query":{"show_secrets":true}}"#)
        }));
        assert_eq!(reply_of(" 确认。"), Some(Reply::Confirm));
        assert_eq!(reply_of("Cancel"), Some(Reply::Cancel));
        assert_eq!(reply_of("确认一下再说"), None);
        assert!(interactive("web") && interactive("cli") && !interactive("openai"));
    }
}
