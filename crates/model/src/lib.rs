//! OpenAI-compatible model client: streaming chat completions, tool-call assembly, retries, model
//! catalogue, token estimates.
//!
//! Public API:
//! - [`ModelClient::new`]`(`[`ModelConfig`]`)` and [`ModelClient::stream_chat`]: one
//!   `POST {base_url}/chat/completions` with `stream: true`, text/reasoning delivered as
//!   [`StreamEvent`]s while they arrive, the assembled [`Completion`] returned at the end;
//!   [`ModelClient::complete_chat`]: the same without streaming (one JSON answer).
//! - [`ChatRequest`] (borrowed messages, tools, optional [`ToolChoice`]);
//!   [`effective_max_output_tokens`]: the output limit a request carries (`LLM_MAX_OUTPUT_TOKENS`,
//!   else the catalogue's, else [`DEFAULT_MAX_OUTPUT_TOKENS`]).
//! - [`Completion`] with a typed [`FinishReason`], [`Completion::is_truncated`],
//!   [`Completion::is_empty_answer`], [`Completion::tool_call_statuses`] /
//!   [`arguments_status`] → [`ArgumentsStatus`] (`Complete`, `CutOff`, `Invalid`).
//! - [`ModelError`] (one enum, [`Result`] alias): `is_retryable()`, `code()`,
//!   `is_context_exceeded()` (code `model_context_exceeded`, phrasings in
//!   [`CONTEXT_EXCEEDED_MARKERS`]), `status()`, `is_image_input_rejected()`.
//! - [`model_profile`] → [`ModelProfile`] (context window, image support, output limit).
//! - [`TokenCounter::for_model`]: how a model's tokens are counted — OpenAI's families with their
//!   real BPE (`o200k_base`, `cl100k_base`), every other model with the calibrated estimate
//!   ([`estimate_tokens`] / [`estimate_breakdown`]); [`TokenCounter::breakdown`] of a request
//!   with a [`TokenCache`] (each message tokenized once); [`request_budget`] against
//!   [`BudgetLimits`] (window from the catalogue, else `LLM_MAX_CONTEXT_TOKENS`, and the counter).
//! - Pure building blocks, usable without I/O (tests, benchmarks, replays): [`sse::SseParser`]
//!   (bytes → events), [`chunk`] (lenient wire types), [`assembly::ToolCallAssembler`] and
//!   [`assembly::CompletionAssembler`] (chunks → completion), [`decoder::StreamDecoder`] (bytes →
//!   completion, `[DONE]`, in-stream errors), [`request_body`] (request → JSON).
//!
//! Invariants:
//! - Requests every common server accepts: an assistant message that only calls tools carries
//!   `"content": ""` (never `null`, never absent); `tool_choice` goes out whenever tools do
//!   (`auto` unless the request names one); the output limit always goes out unless configured 0.
//! - Lenient on the wire, strict inside: every provider field is optional, unknown fields are
//!   ignored, tool calls without `index` assemble; a [`Completion`] always has ids and names for
//!   its tool calls; `finish_reason: tool_calls` is never taken as proof that arguments are whole.
//! - No retry once an event of a 200 stream has arrived; deterministic refusals (context overflow,
//!   validation errors, auth) are never retried; cancellation ends a call at once.
//! - The API key goes only into the `Authorization` header (marked sensitive); it never appears in
//!   an error, `Debug` output or a log line, and provider text in errors is scrubbed of anything
//!   that looks like a key or a bearer token.
//! - The crate reads no environment variables; the host hands it a [`ModelConfig`].

pub mod assembly;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod catalogue;
pub mod chunk;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod classify;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod client;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod completion;
pub mod decoder;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod error;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod estimate;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod output_limit;
pub mod sse;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod tokens;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub mod wire;

pub use catalogue::{ModelProfile, model_profile};
pub use classify::{CONTEXT_EXCEEDED_MARKERS, MAX_RETRY_AFTER, parse_retry_after};
pub use client::ModelClient;
pub use completion::{ArgumentsStatus, Completion, FinishReason, arguments_status};
pub use error::{ModelError, NetworkFailure, Result, scrub};
pub use estimate::{
    BudgetLimits, ESTIMATOR, IMAGE_TOKENS, MESSAGE_OVERHEAD_TOKENS, TOOL_OVERHEAD_TOKENS,
    TokenEstimate, estimate_breakdown, estimate_message_tokens, estimate_text_tokens,
    estimate_tokens, estimate_tool_tokens, request_budget, with_serialisation_factor,
    without_serialisation_factor,
};
pub use tokens::{
    CHAT_MESSAGE_TOKENS, REPLY_PRIMING_TOKENS, TOOL_CALL_FRAMING_TOKENS, TokenCache, TokenCounter,
};
pub use wire::{BodyOptions, OutputLimitParam, request_body};

use mpa_protocol::{Message, ToolSpec};
use std::time::Duration;

/// The output limit sent for a model the catalogue does not know and the host did not configure:
/// enough for any chat answer or tool call, short enough that a model caught in a loop stops
/// within minutes on a slow local server.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4096;

/// Where and how to call the model. Built by the host from `LLM_*` settings.
#[derive(Clone)]
pub struct ModelConfig {
    /// e.g. `http://127.0.0.1:11434/v1`; a trailing slash is tolerated.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; never in errors, `Debug` or logs.
    pub api_key: Option<String>,
    pub model: String,
    pub temperature: Option<f32>,
    /// `LLM_MAX_OUTPUT_TOKENS`: the most tokens one answer may have. `None`: the catalogue's limit
    /// for the model, else [`DEFAULT_MAX_OUTPUT_TOKENS`]; `Some(0)`: send no limit at all (the
    /// server decides). See [`effective_max_output_tokens`].
    pub max_output_tokens: Option<u32>,
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
            max_output_tokens: None,
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
            .field("max_output_tokens", &self.max_output_tokens)
            .field("max_retries", &self.max_retries)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

/// The output limit a request carries (`max_tokens`, or `max_completion_tokens` for OpenAI's
/// reasoning models): the configured one, else the catalogue's for the model, else
/// [`DEFAULT_MAX_OUTPUT_TOKENS`]. `None` when configured as 0 (no limit sent).
pub fn effective_max_output_tokens(cfg: &ModelConfig) -> Option<u32> {
    match cfg.max_output_tokens {
        Some(0) => None,
        Some(n) => Some(n),
        None => Some(
            model_profile(&cfg.model)
                .max_output_tokens
                .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
        ),
    }
}

/// Which tool the model may or must call. Sent only when the request offers tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (what a request with tools sends when it names no choice: some servers,
    /// llama-cpp-python among them, drop the tools from the prompt without it).
    Auto,
    /// No tool this time, though the tools stay in the prompt.
    None,
    /// Some tool must be called.
    Required,
    /// This function must be called.
    Function(String),
}

/// What to send: the messages (borrowed from the transcript, so a model call never copies the
/// conversation), the tools the model may call, and optionally which one it must call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest<'a> {
    pub messages: Vec<&'a Message>,
    pub tools: &'a [ToolSpec],
    /// `None`: [`ToolChoice::Auto`] whenever tools are offered.
    pub tool_choice: Option<ToolChoice>,
}

impl<'a> ChatRequest<'a> {
    /// A request over owned messages (tests, one-off calls).
    pub fn new(messages: &'a [Message], tools: &'a [ToolSpec]) -> Self {
        Self {
            messages: messages.iter().collect(),
            tools,
            tool_choice: None,
        }
    }

    /// The same request with a tool choice.
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }
}

/// Streamed output, emitted as chunks arrive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    Content(String),
    Reasoning(String),
}
