//! The state a session actor owns, and the part of it persisted with the chat snapshot.

use crate::review::ReviewCounters;
use crate::tools::SessionState;
use crate::transcript::Transcript;
use chrono::{DateTime, Utc};
use mpa_protocol::UserId;
use mpa_store::Chat;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

/// What a session keeps beyond its messages, written with every chat snapshot so an idle reload
/// (or a restart) continues exactly where it was.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PersistedState {
    /// The system prompt frozen at the session's first turn: byte-identical for the session's
    /// life, so provider prompt caches hit and the background review sees the turn's prompt. It
    /// holds the memory snapshot taken then; memory written later shows in the next session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    #[serde(default)]
    pub review: ReviewCounters,
    /// A stateless client's own system text (OpenAI-compatible endpoint), a marked layer of the
    /// frozen system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_system: Option<String>,
    /// Provider usage over the session (`last_*` / `total_*`, `model_call_count`).
    #[serde(default)]
    pub usage: crate::turn::model_call::UsageSnapshot,
    /// A secret read waiting for the user's `确认` / `取消` (spec runtime.md §11.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_secret_read: Option<crate::moviepilot::secret_read::PendingSecretRead>,
}

impl PersistedState {
    pub fn from_json(v: &serde_json::Value) -> Self {
        serde_json::from_value(v.clone()).unwrap_or_default()
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
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
    /// What tools may read or change (the plan, the terminal scope).
    pub tools: Arc<Mutex<SessionState>>,
    pub persisted: PersistedState,
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
            tools: Arc::new(Mutex::new(SessionState::default())),
            persisted: PersistedState::default(),
        }
    }

    pub fn from_chat(chat: Chat) -> Self {
        Self {
            session_id: chat.session_id,
            owner: chat.user_id,
            channel: chat.channel,
            title: chat.title,
            created_at: chat.created_at,
            persisted: PersistedState::from_json(&chat.session_state),
            transcript: Transcript::restored(chat.agent_messages)
                .with_display_archive(&chat.display_messages),
            // The plan is restored from the newest snapshot at the start of the next turn.
            tools: Arc::new(Mutex::new(SessionState::default())),
        }
    }
}
