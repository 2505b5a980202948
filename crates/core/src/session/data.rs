//! The state a session actor owns, and the part of it persisted with the chat snapshot.

use crate::capability::{Capability, SessionInfo};
use crate::review::ReviewCounters;
use crate::tools::SessionState;
use crate::transcript::Transcript;
use chrono::{DateTime, Utc};
use mpa_protocol::UserId;
use mpa_store::Chat;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a session keeps beyond its messages, written with every chat snapshot so an idle reload
/// (or a restart) continues exactly where it was.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PersistedState {
    /// The system prompt frozen at the session's first turn: byte-identical for the session's
    /// life, so provider prompt caches hit and the background review sees the turn's prompt. It
    /// holds the memory snapshot taken then; memory written later shows in the next session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    pub review: ReviewCounters,
    /// A stateless client's own system text (OpenAI-compatible endpoint), a marked layer of the
    /// frozen system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_system: Option<String>,
    /// Provider usage over the session (`last_*` / `total_*`, `model_call_count`).
    pub usage: crate::turn::model_call::UsageSnapshot,
    /// A secret read waiting for the user's `确认` / `取消` (spec runtime.md §11.4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_secret_read: Option<crate::moviepilot::secret_read::PendingSecretRead>,
    /// What capabilities saved of their session slots, by capability name (and any key this
    /// version does not know, kept as it was).
    #[serde(flatten)]
    pub capabilities: BTreeMap<String, serde_json::Value>,
}

/// What of a chat's saved session state could not be read when it was loaded. The chat still
/// opens (with defaults for what was lost); the next turn tells the user what was reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateLost {
    /// The unreadable parts, by key (`*` when the whole state was not a JSON object).
    pub fields: Vec<String>,
}

impl StateLost {
    pub const CODE: &'static str = "session_state_unreadable";

    fn describe(field: &str) -> &str {
        match field {
            "system_prompt" => "the frozen system prompt (rebuilt with today's memory)",
            "review" => "the background-review counters",
            "client_system" => "the client's own system text",
            "usage" => "the usage totals",
            "pending_secret_read" => "a pending secret-read confirmation",
            "*" => "all of it (prompt, counters, usage, pending confirmation)",
            other => other,
        }
    }

    pub fn message(&self) -> String {
        let what: Vec<&str> = self.fields.iter().map(|f| Self::describe(f)).collect();
        format!(
            "this conversation's saved state could not be read and was reset: {}; the messages are \
             intact / 会话保存的状态无法读取，已重置：{}；消息记录完好",
            what.join(", "),
            self.fields.join(", ")
        )
    }

    pub fn to_event(&self) -> mpa_protocol::Event {
        mpa_protocol::Event::Error {
            kind: mpa_protocol::ErrorKind::StateLost,
            code: Self::CODE.into(),
            message: self.message(),
        }
    }
}

fn field<T: DeserializeOwned + Default>(
    v: &serde_json::Value,
    key: &str,
    lost: &mut Vec<String>,
) -> T {
    match v.get(key) {
        None | Some(serde_json::Value::Null) => T::default(),
        Some(x) => serde_json::from_value(x.clone()).unwrap_or_else(|e| {
            tracing::warn!(field = key, error = %e, "saved session state unreadable; reset");
            lost.push(key.to_string());
            T::default()
        }),
    }
}

impl PersistedState {
    const KNOWN: [&'static str; 5] = [
        "system_prompt",
        "review",
        "client_system",
        "usage",
        "pending_secret_read",
    ];

    /// The saved state, field by field: a field that does not read is reset (and named in the
    /// returned [`StateLost`]), the others are kept.
    pub fn restore(v: &serde_json::Value) -> (Self, Option<StateLost>) {
        let mut lost = Vec::new();
        let Some(obj) = v.as_object() else {
            if !v.is_null() {
                tracing::warn!("saved session state is not an object; reset");
                lost.push("*".to_string());
            }
            return (
                Self::default(),
                Some(StateLost { fields: lost }).filter(|l| !l.fields.is_empty()),
            );
        };
        let state = Self {
            system_prompt: field(v, "system_prompt", &mut lost),
            review: field(v, "review", &mut lost),
            client_system: field(v, "client_system", &mut lost),
            usage: field(v, "usage", &mut lost),
            pending_secret_read: field(v, "pending_secret_read", &mut lost),
            capabilities: obj
                .iter()
                .filter(|(k, _)| !Self::KNOWN.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        };
        (
            state,
            (!lost.is_empty()).then_some(StateLost { fields: lost }),
        )
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_else(|e| {
            tracing::error!(error = %e, "session state not serialisable; saved empty");
            serde_json::Value::Object(serde_json::Map::new())
        })
    }
}

pub struct SessionData {
    pub session_id: String,
    /// The original owner; continuing as an admin never changes it.
    pub owner: UserId,
    pub channel: String,
    pub title: String,
    pub created_at: DateTime<Utc>,
    pub transcript: Transcript,
    /// What tools, gates and capabilities keep for the session (the plan, the terminal scope,
    /// kept results, …): typed slots.
    pub state: Arc<SessionState>,
    pub persisted: PersistedState,
    /// What of the saved state could not be read at load (told to the user at the next turn).
    pub state_lost: Option<StateLost>,
    /// The last turn's snapshot could not be written: what is in memory is newer than the store.
    /// The actor saves it before it retires and keeps running until it could.
    pub unsaved: bool,
    /// How the last turn ended, as the chat keeps it (none before the first turn).
    pub turn_status: Option<mpa_protocol::TurnStatus>,
}

impl SessionData {
    pub fn new(session_id: &str, owner: UserId, channel: &str) -> Self {
        Self {
            session_id: session_id.to_string(),
            owner,
            channel: channel.to_string(),
            title: String::new(),
            created_at: Utc::now(),
            transcript: Transcript::default(),
            state: Arc::new(SessionState::new()),
            persisted: PersistedState::default(),
            state_lost: None,
            unsaved: false,
            turn_status: None,
        }
    }

    pub fn from_chat(chat: Chat) -> Self {
        let (persisted, state_lost) = PersistedState::restore(&chat.session_state);
        let turn_status = chat.turn_status;
        if state_lost.is_some() {
            tracing::warn!(session = %chat.session_id, "session opened with part of its saved state reset");
        }
        Self {
            session_id: chat.session_id,
            owner: chat.user_id,
            channel: chat.channel,
            title: chat.title,
            created_at: chat.created_at,
            persisted,
            state_lost,
            transcript: Transcript::restored(chat.agent_messages)
                .with_display_archive(&chat.display_messages),
            // The plan is restored from the newest snapshot at the start of the next turn.
            state: Arc::new(SessionState::new()),
            unsaved: false,
            turn_status,
        }
    }

    /// A turn ended: what only a running turn needs goes (the capped results' full contents are
    /// captured by now; buffers grown during the turn are cut to what they hold).
    pub fn release_turn_memory(&mut self) {
        self.transcript.release_turn_memory();
    }

    pub fn info(&self) -> SessionInfo<'_> {
        SessionInfo {
            session_id: &self.session_id,
            owner: &self.owner,
        }
    }

    /// Every capability sets up its slot from what it saved.
    pub fn open_capabilities(&self, capabilities: &[Arc<dyn Capability>]) {
        for c in capabilities {
            c.open_session(
                self.info(),
                &self.state,
                self.persisted.capabilities.get(c.name()),
            );
        }
    }

    /// Every capability's slot, as it is to be saved with the chat.
    pub fn save_capabilities(&mut self, capabilities: &[Arc<dyn Capability>]) {
        for c in capabilities {
            match c.save(&self.state) {
                Some(v) => {
                    self.persisted.capabilities.insert(c.name().to_string(), v);
                }
                None => {
                    self.persisted.capabilities.remove(c.name());
                }
            }
        }
    }
}
