//! Chat snapshots: what the agent needs to continue a conversation (transcript and session
//! state) and what a front end shows, upserted at the end of every turn.

use crate::{Result, Store, StoreError, ts};
use chrono::{DateTime, Utc};
use mpa_protocol::{Message, TurnStatus, UserId};
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

/// A chat session as persisted at the end of every turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chat {
    pub session_id: String,
    pub user_id: UserId,
    pub channel: String,
    pub title: String,
    /// The agent transcript (tool calls, results with outcomes, plan metadata).
    pub agent_messages: Vec<Message>,
    /// What a front end shows.
    pub display_messages: serde_json::Value,
    pub message_count: i64,
    /// A JSON object the agent keeps with the chat so a reloaded session continues exactly where
    /// it was (frozen prompt parts, counters). Opaque to the store; `{}` for chats saved before it
    /// existed.
    #[serde(default = "empty_object")]
    pub session_state: serde_json::Value,
    /// How the last turn ended (`None` while a turn runs, or before any ended): a host stop
    /// state, not proof the user's goal was reached.
    #[serde(default)]
    pub turn_status: Option<TurnStatus>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The value of [`Chat::session_state`] for a chat that has none yet.
pub fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl Chat {
    /// The list row of this chat (no transcript).
    pub fn summary(&self) -> ChatSummary {
        ChatSummary {
            session_id: self.session_id.clone(),
            user_id: self.user_id.clone(),
            channel: self.channel.clone(),
            title: self.title.clone(),
            message_count: self.message_count,
            turn_status: self.turn_status,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A row of the session list (no transcript).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatSummary {
    pub session_id: String,
    pub user_id: UserId,
    pub channel: String,
    pub title: String,
    pub message_count: i64,
    pub turn_status: Option<TurnStatus>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A stored status name; one this version does not know reads as none.
fn turn_status(s: Option<String>) -> Option<TurnStatus> {
    s.as_deref().and_then(TurnStatus::parse)
}

fn to_json<T: Serialize>(what: &str, v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn from_json<T: serde::de::DeserializeOwned>(what: &str, s: &str) -> Result<T> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// A `chats` row as read, before its JSON columns are parsed (outside the row callback, whose
/// error type is rusqlite's).
struct ChatRow {
    session_id: String,
    user_id: String,
    channel: String,
    title: String,
    agent_messages: String,
    display_messages: String,
    message_count: i64,
    session_state: String,
    turn_status: Option<String>,
    created_at: String,
    updated_at: String,
    journal: Option<String>,
}

const EMPTY_JOURNAL: &str = r#"{"messages":[],"display":[]}"#;

/// What a running turn saved after its last step: its own messages (in their recovery form) and
/// their display items, on top of the chat's last full snapshot.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnJournal {
    pub messages: Vec<Message>,
    pub display: Vec<serde_json::Value>,
}

impl ChatRow {
    fn finish(self) -> Result<Chat> {
        let session_state: serde_json::Value = from_json("session_state", &self.session_state)?;
        if !session_state.is_object() {
            return Err(StoreError::Corrupt("session_state is not an object".into()));
        }
        let mut agent_messages: Vec<Message> = from_json("agent_messages", &self.agent_messages)?;
        let mut display_messages: serde_json::Value =
            from_json("display_messages", &self.display_messages)?;
        let mut message_count = self.message_count;
        // A turn that had not ended (a crash, or one still running): its journal follows the
        // last full snapshot, so every reader sees the conversation up to its last step.
        if let Some(journal) = &self.journal {
            let journal: TurnJournal = from_json("journal", journal)?;
            message_count += journal.messages.len() as i64;
            agent_messages.extend(journal.messages);
            if let Some(items) = display_messages.as_array_mut() {
                items.extend(journal.display);
            }
        }
        Ok(Chat {
            session_id: self.session_id,
            user_id: UserId(self.user_id),
            channel: self.channel,
            title: self.title,
            agent_messages,
            display_messages,
            message_count,
            session_state,
            turn_status: turn_status(self.turn_status),
            created_at: ts(self.created_at)?,
            updated_at: ts(self.updated_at)?,
        })
    }
}

impl Store {
    /// Inserts or replaces the chat snapshot. `created_at` of an existing chat is kept, and so is
    /// its owner: continuing someone else's chat (an admin) never changes `user_id`.
    /// `session_state` must be a JSON object.
    pub async fn save_chat(&self, chat: Chat) -> Result<()> {
        self.upsert_chat(chat, None).await
    }

    /// A running turn's first save (or its save after a compaction): the chat as it was before
    /// the turn (`chat.agent_messages`, whose length becomes the journal's base) plus the turn's
    /// journal. Later steps of the turn call [`Store::update_turn_journal`].
    pub async fn save_chat_with_journal(&self, chat: Chat, journal: &TurnJournal) -> Result<()> {
        let journal = to_json("journal", journal)?;
        self.upsert_chat(chat, Some(journal)).await
    }

    /// Replaces the running turn's journal when the chat's full snapshot still holds exactly
    /// `base` messages (the turn's start); false when it does not (no chat yet, or another full
    /// snapshot since), and the caller saves the chat with [`Store::save_chat_with_journal`].
    /// Costs what the turn wrote, not what the chat holds.
    pub async fn update_turn_journal(
        &self,
        session_id: &str,
        base: usize,
        journal: &TurnJournal,
        session_state: &serde_json::Value,
        updated_at: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool> {
        if !session_state.is_object() {
            return Err(StoreError::SessionStateNotObject);
        }
        let journal = to_json("journal", journal)?;
        let state = to_json("session_state", session_state)?;
        let sid = session_id.to_string();
        let base = base as i64;
        self.run(move |c| {
            let n = c.execute(
                // The journal row records the base its full snapshot holds; the chat row itself is
                // not read (a column after the conversation would walk its overflow pages).
                "UPDATE chat_journals SET journal = ?3, session_state = ?4, updated_at = ?5
                 WHERE session_id = ?1 AND base = ?2",
                params![sid, base, journal, state, updated_at.to_rfc3339()],
            )?;
            Ok(n > 0)
        })
        .await
    }

    /// Replaces only a saved chat's session state — what changed after its last snapshot
    /// without a new message (a background review's usage) — leaving messages and activity time
    /// alone. False when the chat has no saved snapshot.
    pub async fn update_session_state(
        &self,
        session_id: &str,
        session_state: &serde_json::Value,
    ) -> Result<bool> {
        if !session_state.is_object() {
            return Err(StoreError::SessionStateNotObject);
        }
        let state = to_json("session_state", session_state)?;
        let sid = session_id.to_string();
        self.run(move |c| {
            // Readers take the journal row's state over the chat row's, and every full snapshot
            // writes one, so the chat row (with the conversation in it) is not rewritten.
            let n = c.execute(
                "UPDATE chat_journals SET session_state = ?2 WHERE session_id = ?1",
                params![sid, state],
            )?;
            Ok(n > 0)
        })
        .await
    }

    async fn upsert_chat(&self, chat: Chat, journal: Option<String>) -> Result<()> {
        if !chat.session_state.is_object() {
            return Err(StoreError::SessionStateNotObject);
        }
        let agent = to_json("agent_messages", &chat.agent_messages)?;
        let display = to_json("display_messages", &chat.display_messages)?;
        let state = to_json("session_state", &chat.session_state)?;
        self.run_snapshot(move |conn| {
            // The chat and its journal change together.
            let c = conn.transaction()?;
            c.execute(
                "INSERT INTO chats (session_id, user_id, channel, title, agent_messages, display_messages,
                                    message_count, session_state, created_at, updated_at, turn_status)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                 ON CONFLICT(session_id) DO UPDATE SET
                    title = excluded.title, agent_messages = excluded.agent_messages,
                    display_messages = excluded.display_messages, message_count = excluded.message_count,
                    session_state = excluded.session_state, updated_at = excluded.updated_at,
                    turn_status = excluded.turn_status",
                params![
                    chat.session_id,
                    chat.user_id.0,
                    chat.channel,
                    chat.title,
                    agent,
                    display,
                    chat.message_count,
                    state,
                    chat.created_at.to_rfc3339(),
                    chat.updated_at.to_rfc3339(),
                    chat.turn_status.map(TurnStatus::as_str)
                ],
            )?;
            // A full snapshot leaves an empty journal on its own base, so the next turn's steps
            // update the journal without touching the chat row.
            let j = journal.unwrap_or_else(|| EMPTY_JOURNAL.to_string());
            c.execute(
                "INSERT INTO chat_journals (session_id, base, journal, session_state, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(session_id) DO UPDATE SET
                    base = excluded.base, journal = excluded.journal,
                    session_state = excluded.session_state, updated_at = excluded.updated_at",
                params![
                    chat.session_id,
                    chat.message_count,
                    &j,
                    state,
                    chat.updated_at.to_rfc3339()
                ],
            )?;
            c.commit()?;
            Ok(())
        })
        .await
    }

    /// Who owns a stored chat, without reading it (its messages may be megabytes): a session
    /// id can be checked against the caller before anything of the chat is loaded.
    pub async fn chat_owner(&self, session_id: &str) -> Result<Option<UserId>> {
        let sid = session_id.to_string();
        self.read(move |c| {
            Ok(c.query_row(
                "SELECT user_id FROM chats WHERE session_id = ?1",
                params![sid],
                |r| r.get::<_, String>(0),
            )
            .optional()?
            .map(UserId))
        })
        .await
    }

    pub async fn chat(&self, session_id: &str) -> Result<Option<Chat>> {
        let sid = session_id.to_string();
        self.read(move |c| {
            c.query_row(
                "SELECT c.session_id, c.user_id, c.channel, c.title, c.agent_messages,
                        c.display_messages, c.message_count,
                        COALESCE(j.session_state, c.session_state), c.created_at,
                        COALESCE(j.updated_at, c.updated_at), j.journal, c.turn_status
                 FROM chats c LEFT JOIN chat_journals j ON j.session_id = c.session_id
                 WHERE c.session_id = ?1",
                params![sid],
                |r| {
                    Ok(ChatRow {
                        session_id: r.get(0)?,
                        user_id: r.get(1)?,
                        channel: r.get(2)?,
                        title: r.get(3)?,
                        agent_messages: r.get(4)?,
                        display_messages: r.get(5)?,
                        message_count: r.get(6)?,
                        session_state: r.get(7)?,
                        created_at: r.get(8)?,
                        updated_at: r.get(9)?,
                        journal: r.get(10)?,
                        turn_status: r.get(11)?,
                    })
                },
            )
            .optional()?
            .map(ChatRow::finish)
            .transpose()
        })
        .await
    }

    /// Chats of one user (or of everyone when `user` is `None`), newest first; `page` starts at 1.
    pub async fn list_chats(
        &self,
        user: Option<&UserId>,
        page: u32,
        count: u32,
    ) -> Result<Vec<ChatSummary>> {
        let user = user.map(|u| u.0.clone());
        let limit = i64::from(count.clamp(1, 200));
        let offset = i64::from(page.max(1) - 1) * limit;
        self.read(move |c| {
            let mut stmt = c.prepare(
                "SELECT session_id, user_id, channel, title, message_count, created_at, updated_at,
                        turn_status
                 FROM chats WHERE (?1 IS NULL OR user_id = ?1)
                 ORDER BY updated_at DESC, session_id LIMIT ?2 OFFSET ?3",
            )?;
            let rows = stmt.query_map(params![user, limit, offset], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, Option<String>>(7)?,
                ))
            })?;
            let mut out = Vec::new();
            for r in rows {
                let (session_id, user_id, channel, title, message_count, created, updated, status) =
                    r?;
                out.push(ChatSummary {
                    session_id,
                    user_id: UserId(user_id),
                    channel,
                    title,
                    message_count,
                    turn_status: turn_status(status),
                    created_at: ts(created)?,
                    updated_at: ts(updated)?,
                });
            }
            Ok(out)
        })
        .await
    }

    pub async fn delete_chat(&self, session_id: &str) -> Result<bool> {
        let sid = session_id.to_string();
        self.run(move |c| {
            Ok(c.execute("DELETE FROM chats WHERE session_id = ?1", params![sid])? > 0)
        })
        .await
    }
}
