//! Plain data shared by every crate of moviepilot-agent: serde types only — no I/O, no async
//! runtime, no crypto, no prompts (the floors test fails if this crate gains a dependency beyond
//! serde, serde_json, schemars and thiserror).
//!
//! Roles:
//! - [`UserId`]: who owns data (stable, never reused, unchanged by renames; the directory name
//!   derived from it is `mpa_redact::UserKey`).
//! - [`Message`], [`ToolCall`], [`ContentPart`]: the chat transcript in the OpenAI shape.
//! - [`ToolSpec`]: what the model is told about a tool.
//! - [`Outcome`]: what actually happened to an effect — the product's honesty enum.
//! - [`Op`] (client → session) and [`Event`] (session → clients): the session actor's interface.
//! - [`Durability`]: how hard the SQLite stores sync (the product's setting, or a throwaway
//!   data directory's).

mod image;
mod moviepilot_call;

use serde::{Deserialize, Serialize};
use std::fmt;

pub use image::{ImageBlock, ImageDetail, ImageMime};
pub use moviepilot_call::MoviePilotCall;

/// Stable identity of a user (never reused, unchanged by renames).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserId(pub String);

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The stable id as text (what `mpa_redact::UserKey::for_user` derives a user's key from).
impl AsRef<str> for UserId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Who is acting in a turn or a tool call. Built by the host, never from tool arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub user_id: UserId,
    pub user_name: String,
    pub is_admin: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One part of a multi-part user message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageUrl {
    pub url: String,
    /// How closely to look (`auto`, `low`, `high`); left out when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<ImageDetail>,
}

impl ImageUrl {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            detail: None,
        }
    }
}

/// Message content: plain text or parts (text + images).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl Default for Content {
    fn default() -> Self {
        Content::Text(String::new())
    }
}

impl Content {
    /// The text of the content; image parts are left out.
    pub fn text(&self) -> String {
        match self {
            Content::Text(t) => t.clone(),
            Content::Parts(parts) => {
                let texts: Vec<&str> = parts
                    .iter()
                    .filter_map(|p| match p {
                        ContentPart::Text { text } => Some(text.as_str()),
                        ContentPart::ImageUrl { .. } => None,
                    })
                    .collect();
                texts.join("\n")
            }
        }
    }

    pub fn image_count(&self) -> usize {
        match self {
            Content::Text(_) => 0,
            Content::Parts(parts) => parts
                .iter()
                .filter(|p| matches!(p, ContentPart::ImageUrl { .. }))
                .count(),
        }
    }
}

/// A tool call requested by the model. `arguments` is the raw JSON text the model produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One transcript message in the OpenAI chat shape, plus host metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(default)]
    pub content: Content,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Tool name on tool messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Host-side outcome of a tool message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// Host metadata (e.g. the plan snapshot under `moviepilot_task_plan`). Never sent to the model.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Images of a tool result, in memory only: never serialised, never sent as they are (the
    /// host projects them into an observation message for a model that can see, spec
    /// runtime.md §9.3), replaced by a note before the message is persisted.
    #[serde(skip)]
    pub images: Vec<ImageBlock>,
}

impl Message {
    fn base(role: Role, content: Content) -> Self {
        Self {
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            outcome: None,
            metadata: serde_json::Map::new(),
            images: Vec::new(),
        }
    }

    pub fn system(text: impl Into<String>) -> Self {
        Self::base(Role::System, Content::Text(text.into()))
    }

    pub fn user(text: impl Into<String>) -> Self {
        Self::base(Role::User, Content::Text(text.into()))
    }

    pub fn user_parts(parts: Vec<ContentPart>) -> Self {
        Self::base(Role::User, Content::Parts(parts))
    }

    pub fn assistant(text: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        let mut m = Self::base(Role::Assistant, Content::Text(text.into()));
        m.tool_calls = tool_calls;
        m
    }

    pub fn tool(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
        outcome: Outcome,
    ) -> Self {
        let mut m = Self::base(Role::Tool, Content::Text(content.into()));
        m.tool_call_id = Some(call_id.into());
        m.name = Some(name.into());
        m.outcome = Some(outcome);
        m
    }

    pub fn text(&self) -> String {
        self.content.text()
    }
}

/// What the model is told about a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// What actually happened to a tool call's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Succeeded,
    Failed,
    /// Accepted, not finished.
    Pending,
    /// The effect may or may not have happened.
    Unknown,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Pending => "pending",
            Outcome::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "succeeded" => Some(Outcome::Succeeded),
            "failed" => Some(Outcome::Failed),
            "pending" => Some(Outcome::Pending),
            "unknown" => Some(Outcome::Unknown),
            _ => None,
        }
    }

    /// Whether a front end should show the call as an error.
    pub fn is_error(self) -> bool {
        matches!(self, Outcome::Failed | Outcome::Unknown)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a call does to the world, in MoviePilot's names. Policy, the write ledger and read-only
/// subagents decide from it; for `moviepilot_api` it is the operation's class, decided per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectClass {
    /// Reads that reveal nothing sensitive.
    SafeRead,
    /// Reads whose result may hold private or secret data.
    SensitiveRead,
    /// A write that can be undone.
    ReversibleWrite,
    /// A write that cannot be undone (deletes, overwrites).
    DestructiveWrite,
    /// Starts something outside the host (downloads, notifications, scheduled jobs).
    ExternalSideEffect,
    /// Runs arbitrary code or commands.
    ArbitraryExecution,
    /// Not known: treated as a write.
    Unknown,
}

impl EffectClass {
    pub const ALL: [EffectClass; 7] = [
        EffectClass::SafeRead,
        EffectClass::SensitiveRead,
        EffectClass::ReversibleWrite,
        EffectClass::DestructiveWrite,
        EffectClass::ExternalSideEffect,
        EffectClass::ArbitraryExecution,
        EffectClass::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EffectClass::SafeRead => "safe_read",
            EffectClass::SensitiveRead => "sensitive_read",
            EffectClass::ReversibleWrite => "reversible_write",
            EffectClass::DestructiveWrite => "destructive_write",
            EffectClass::ExternalSideEffect => "external_side_effect",
            EffectClass::ArbitraryExecution => "arbitrary_execution",
            EffectClass::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// Whether the call only reads (never ledgered, allowed to read-only subagents).
    pub fn is_read(self) -> bool {
        matches!(self, EffectClass::SafeRead | EffectClass::SensitiveRead)
    }
}

impl fmt::Display for EffectClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Token usage reported by a provider (all optional on the wire; zero when absent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache (providers that report it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// The provider reported no usage: these are the host's own estimates.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.estimated |= other.estimated;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The size of one model request against the model's window (spec runtime.md §12.1), estimated
/// before it is sent, with what the context stages did to it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestBudget {
    pub message_count: u64,
    pub tool_count: u64,
    pub image_count: u64,
    pub unknown_multimodal_count: u64,
    pub message_tokens: u64,
    pub system_tokens: u64,
    pub tool_tokens: u64,
    pub multimodal_tokens: u64,
    /// What is budgeted against the window. With a real tokenizer (`estimator` names it) the sum
    /// above: messages are counted exactly with the chat format's documented framing, and
    /// `tool_tokens` already carries the serialisation factor (schemas are rendered by the
    /// provider in an undocumented way). With the calibrated estimate, the sum times the
    /// provider-serialisation factor (×1.5).
    pub estimated_input_tokens: u64,
    pub context_window_tokens: u64,
    pub estimated_remaining_input_tokens: u64,
    pub estimated_input_ratio: f64,
    pub estimated_over_input_limit: bool,
    pub model_max_output_tokens: Option<u32>,
    pub configured_output_limit_tokens: Option<u32>,
    /// How tokens were counted: the model family's tokenizer (`o200k_base`, `cl100k_base`) or
    /// `calibrated_estimate`.
    pub estimator: String,
    /// What compaction did before this request (`compacted`, `failed`, …), with its figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<serde_json::Value>,
    /// Discovered tools and whether each fits this request (`enabled`, `schema_budget_exceeded`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_discovery: Option<std::collections::BTreeMap<String, String>>,
}

/// How hard the SQLite stores push their commits to the disk. Set by the host from how its data
/// directory is used, never by a tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// The product: WAL with `synchronous = NORMAL` — a commit survives a crash of the process,
    /// and the file stays consistent across a power loss (the newest commits may be lost).
    #[default]
    Durable,
    /// A data directory deleted after use (an evaluation run): `synchronous = OFF`, no `fsync`
    /// at all. A crash of the process still loses nothing (the operating system has the writes),
    /// but a power loss can corrupt the files — never for data anyone keeps.
    Throwaway,
}

impl Durability {
    /// The value of SQLite's `PRAGMA synchronous` for this setting.
    pub fn sqlite_synchronous(self) -> &'static str {
        match self {
            Durability::Durable => "NORMAL",
            Durability::Throwaway => "OFF",
        }
    }
}

/// The language a person reads the host's own text in (command replies, notices, errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    #[default]
    En,
    Zh,
}

impl Lang {
    /// Chinese when `text` has a CJK character, else English.
    pub fn of(text: &str) -> Lang {
        if text
            .chars()
            .any(|c| matches!(c as u32, 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF))
        {
            Lang::Zh
        } else {
            Lang::En
        }
    }

    /// `en` or `zh`, whichever this language is.
    pub fn pick<T>(self, en: T, zh: T) -> T {
        match self {
            Lang::En => en,
            Lang::Zh => zh,
        }
    }
}

/// What a client submits to a session actor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Op {
    /// Start a turn with this user input.
    UserInput {
        text: String,
        #[serde(default)]
        images: Vec<String>,
        /// What a stateless client (the OpenAI-compatible endpoint) sent along for a session the
        /// host has not seen: taken into the conversation before this input, once.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_context: Option<ClientContext>,
        /// The language the person reads the host's own replies in (a front end's negotiated
        /// locale); `None`: the language of `text`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lang: Option<Lang>,
    },
    /// A message for the running turn (spec runtime.md §2): queued in the session's steering
    /// inbox and taken into the conversation before its next model call; a session with no
    /// running turn of this user (or a full inbox) takes it as a `UserInput` instead.
    Steer {
        text: String,
        #[serde(default)]
        images: Vec<String>,
    },
    /// Stop the running turn: cancel the model call, dispatch no further tool call, discard the
    /// turns and steering messages still waiting.
    Stop,
    /// Close the session actor after the current turn.
    Close,
    /// Give the chat this title (the user's choice, kept by later turns). Queued like a turn.
    Rename { title: String },
    /// Go back to the user's last message: `text: None` sends it again (regenerate), `Some`
    /// sends this text in its place (edit and resend). The messages from it on leave the
    /// conversation, then a turn runs. Queued like a turn.
    Redo {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
}

/// The conversation a stateless client already had: its own system text (kept as a marked layer
/// after the host's own) and its earlier user/assistant messages (kept as real messages).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientContext {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    #[serde(default)]
    pub messages: Vec<Message>,
}

/// How a turn ended: a host stop state, never proof that the user's goal was reached (a
/// `completed` turn only means the model gave a final answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    /// The model gave a final answer.
    Completed,
    /// A stop was requested.
    Stopped,
    /// The model call or the host failed.
    Failed,
    /// `LLM_MAX_ITERATIONS` model calls were made without a final answer.
    IterationLimit,
    /// A host guardrail stopped the turn (a tool loop without progress).
    Blocked,
    /// A write of the turn was accepted but has not finished (`pending`): the result is still to
    /// come.
    Waiting,
    /// A write of the turn may or may not have happened (`unknown`): verify before retrying.
    Unknown,
    /// The turn ended without a complete answer: the answer was cut off by the output limit, or
    /// the model kept announcing work it did not do after the host's continuation prompts.
    Partial,
}

/// Where a steering message stands (spec runtime.md §2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SteeringStatus {
    /// Accepted into the running turn's inbox; it will be applied (or discarded by a stop).
    Queued,
    /// Taken into the conversation at a model-call boundary: the assistant segment before it is
    /// closed, a continuation segment follows.
    Applied,
    /// A stop ended the turn before the message was applied: it was never seen by the model.
    Discarded,
}

impl SteeringStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SteeringStatus::Queued => "queued",
            SteeringStatus::Applied => "applied",
            SteeringStatus::Discarded => "discarded",
        }
    }
}

impl TurnStatus {
    pub const ALL: [TurnStatus; 8] = [
        TurnStatus::Completed,
        TurnStatus::Stopped,
        TurnStatus::Failed,
        TurnStatus::IterationLimit,
        TurnStatus::Blocked,
        TurnStatus::Waiting,
        TurnStatus::Unknown,
        TurnStatus::Partial,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Completed => "completed",
            TurnStatus::Stopped => "stopped",
            TurnStatus::Failed => "failed",
            TurnStatus::IterationLimit => "iteration_limit",
            TurnStatus::Blocked => "blocked",
            TurnStatus::Waiting => "waiting",
            TurnStatus::Unknown => "unknown",
            TurnStatus::Partial => "partial",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for TurnStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a session actor emits. Front ends (SSE, OpenAI endpoint, CLI) only translate these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    TurnStarted {
        session_id: String,
        assistant_message_id: String,
    },
    /// Streamed answer text.
    Delta {
        content: String,
    },
    /// Streamed reasoning text (providers that send `reasoning_content`).
    Reasoning {
        content: String,
    },
    ToolStarted {
        tool_id: String,
        name: String,
        message: String,
        /// What a person reads about the call (operation, redacted arguments), as the host's
        /// tool-line detail shapes it; `null` when there is none.
        #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
        detail: serde_json::Value,
    },
    ToolFinished {
        tool_id: String,
        name: String,
        outcome: Outcome,
        message: String,
        /// As on `ToolStarted`, plus the result's preview and a one-line summary in English and
        /// Chinese.
        #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
        detail: serde_json::Value,
    },
    PlanUpdated {
        plan: serde_json::Value,
    },
    Usage {
        usage: Usage,
    },
    /// The estimated size of the next model request (one per model call).
    Budget {
        budget: Box<RequestBudget>,
    },
    Error {
        /// What kind of failure this is (front ends may style it); `code` stays the stable
        /// machine-readable detail.
        #[serde(default)]
        kind: ErrorKind,
        code: String,
        message: String,
    },
    TurnEnded {
        status: TurnStatus,
        final_text: String,
        /// Set when a host gate ended the turn on purpose (e.g. it asked the user to confirm).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        halt: Option<TurnHalt>,
    },
    /// A result for the user's eyes only (a confirmed secret read): shown, never stored in the
    /// chat, the display history or the evidence, never sent to the model.
    Protected {
        content: String,
    },
    /// The model's context was summarised (a compaction was committed): the older messages left
    /// it for this summary; they stay in the chat's display list and in the evidence history.
    Compacted {
        summary: String,
    },
    /// A message sent while the turn ran (spec runtime.md §2.6). `queued` goes to the sender;
    /// `applied` and `discarded` come on the running turn's own stream. On `applied`,
    /// `assistant_message_id` is the segment it closed and `continuation_message_id` the new
    /// one every later delta and tool event belongs to.
    Steering {
        status: SteeringStatus,
        message_id: String,
        /// The user's text as they typed it.
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        assistant_message_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        continuation_message_id: Option<String>,
    },
    /// An event of a nested agent (a subagent, a kernel's tool call, …) started by a tool of this
    /// turn. Front ends keep these off the user's stream unless they mean to show them.
    Nested {
        agent_id: String,
        origin: AgentOrigin,
        event: Box<Event>,
    },
}

/// The broad kind of an [`Event::Error`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The model provider failed or refused the request.
    Model,
    /// A host limit ended the turn (model calls, input budget, output length, empty answers).
    Limit,
    /// The conversation does not fit the model's context window.
    Context,
    /// The session cannot take the turn (queue full, shutting down).
    Session,
    /// The session's saved state could not be read; the turn runs with what was kept.
    StateLost,
    #[default]
    Internal,
}

/// Why a host gate ended a turn on purpose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnHalt {
    pub code: String,
    pub message: String,
}

/// Who runs an agent loop or makes a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentOrigin {
    /// A user's turn.
    Turn,
    /// The background learning review.
    Review,
    /// `mpagent tool`: one call outside any turn.
    Direct,
    Subagent,
    /// A Python kernel's tool RPC.
    Kernel,
    /// An external MCP client.
    Mcp,
    /// The OpenAI-compatible endpoint.
    Api,
    Channel,
    Scheduled,
}
