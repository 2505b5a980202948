//! OpenAI-compatible model client: streaming chat completions, tool-call assembly, retries, model
//! catalogue, token estimates.
//!
//! Public API:
//! - [`ModelClient::new`]`(`[`ModelConfig`]`)` and [`ModelClient::stream_chat`]: one
//!   `POST {base_url}/chat/completions` with `stream: true`, text/reasoning delivered as
//!   [`StreamEvent`]s while they arrive, the assembled [`Completion`] returned at the end.
//! - [`ModelError`] (one enum, [`Result`] alias): `is_retryable()` and `code()`.
//! - [`model_profile`] → [`ModelProfile`] (context window, image support) for common models.
//! - [`estimate_tokens`] / [`estimate_breakdown`]: cheap request-size estimates.
//! - Pure building blocks, usable without I/O (tests, benchmarks, replays): [`sse::SseParser`]
//!   (bytes → events), [`chunk`] (lenient wire types), [`assembly::ToolCallAssembler`] and
//!   [`assembly::CompletionAssembler`] (chunks → completion), [`decoder::StreamDecoder`] (bytes →
//!   completion, `[DONE]`, in-stream errors).
//!
//! Invariants:
//! - Lenient on the wire, strict inside: every provider field is optional, unknown fields are
//!   ignored, tool calls without `index` assemble; a [`Completion`] always has ids, names and
//!   non-empty JSON argument text for its tool calls.
//! - No retry once a byte of a 200 stream has arrived; cancellation ends a call at once.
//! - The API key goes only into the `Authorization` header (marked sensitive); it never appears in
//!   an error, `Debug` output or a log line, and provider text in errors is scrubbed of anything
//!   that looks like a key or a bearer token.
//! - The crate reads no environment variables; the host hands it a [`ModelConfig`].

pub mod assembly;
mod catalogue;
pub mod chunk;
mod classify;
mod client;
pub mod decoder;
mod error;
mod estimate;
pub mod sse;
mod wire;

pub use catalogue::{ModelProfile, model_profile};
pub use classify::{MAX_RETRY_AFTER, parse_retry_after};
pub use client::ModelClient;
pub use error::{ModelError, Result, scrub};
pub use estimate::{
    IMAGE_TOKENS, MESSAGE_OVERHEAD_TOKENS, TOOL_OVERHEAD_TOKENS, TokenEstimate, estimate_breakdown,
    estimate_text_tokens, estimate_tokens,
};
pub use wire::request_body;

use mpa_protocol::{Message, ToolCall, ToolSpec, Usage};
use std::time::Duration;

/// Where and how to call the model. Built by the host from `LLM_*` settings.
#[derive(Clone)]
pub struct ModelConfig {
    /// e.g. `http://127.0.0.1:11434/v1`; a trailing slash is tolerated.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; never in errors, `Debug` or logs.
    pub api_key: Option<String>,
    pub model: String,
    pub temperature: Option<f32>,
    /// Retries after the first attempt (so up to `1 + max_retries` requests).
    pub max_retries: u32,
    pub connect_timeout: Duration,
    /// Longest silence tolerated while waiting for response headers or between stream bytes.
    pub idle_timeout: Duration,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            base_url: "http://127.0.0.1:11434/v1".to_owned(),
            api_key: None,
            model: String::new(),
            temperature: None,
            max_retries: 3,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelConfig")
            .field("base_url", &scrub(&self.base_url, self.api_key.as_deref()))
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .field("temperature", &self.temperature)
            .field("max_retries", &self.max_retries)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

/// What to send: the messages (borrowed from the transcript, so a model call never copies the
/// conversation) and the tools the model may call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest<'a> {
    pub messages: Vec<&'a Message>,
    pub tools: &'a [ToolSpec],
}

impl<'a> ChatRequest<'a> {
    /// A request over owned messages (tests, one-off calls).
    pub fn new(messages: &'a [Message], tools: &'a [ToolSpec]) -> Self {
        Self {
            messages: messages.iter().collect(),
            tools,
        }
    }
}

/// Streamed output, emitted as chunks arrive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    Content(String),
    Reasoning(String),
}

/// One finished model answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    pub content: String,
    pub reasoning: String,
    /// Assembled, in index order (arrival order when the provider sent no index).
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
}
