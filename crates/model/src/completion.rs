//! What one model answer is, and how it ended: typed finish reasons and tool-call arguments
//! checked for completeness (a provider's `finish_reason` alone is not trusted: llama.cpp reports
//! `tool_calls` for calls cut off by its context size).

use mpa_protocol::{ToolCall, Usage};

/// Why the provider stopped generating. `None` on a [`Completion`] when it sent no reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// A natural end or a stop sequence (`stop`, `end_turn`, `stop_sequence`, `eos`).
    Stop,
    /// The output limit (`max_tokens`) or the server's context ran out: the answer was cut.
    Length,
    /// The model called tools (`tool_calls`, legacy `function_call`). Not proof the calls are whole.
    ToolCalls,
    /// The provider withheld or cut the answer (`content_filter`, `safety`, `recitation`).
    ContentFilter,
    /// Anything else, as sent.
    Other(String),
}

impl FinishReason {
    /// Maps a provider's value; spellings of other dialects (Anthropic and Gemini through
    /// gateways, Ollama) land on the OpenAI variants.
    pub fn from_wire(value: &str) -> FinishReason {
        match value.trim().to_ascii_lowercase().as_str() {
            "stop" | "end_turn" | "stop_sequence" | "eos" | "eos_token" => FinishReason::Stop,
            "length" | "max_tokens" | "max_output_tokens" | "model_length" => FinishReason::Length,
            "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
            "content_filter" | "safety" | "recitation" | "blocklist" | "prohibited_content" => {
                FinishReason::ContentFilter
            }
            _ => FinishReason::Other(value.to_owned()),
        }
    }

    /// The OpenAI spelling (or the provider's own for [`FinishReason::Other`]).
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(s) => s,
        }
    }
}

impl std::fmt::Display for FinishReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a tool call's argument text can be executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgumentsStatus {
    /// A JSON object that parses.
    Complete,
    /// The text ends before the JSON does (or never began): the output limit or the server's
    /// context cut it. Not to be executed.
    CutOff,
    /// Whole but not a JSON object (malformed JSON, or an array, string or number).
    Invalid,
}

/// Classifies tool-call argument text. A JSON object cannot be a proper prefix of another, so one
/// that parses is whole whatever the finish reason said; text that breaks off mid-value is cut.
pub fn arguments_status(arguments: &str) -> ArgumentsStatus {
    if arguments.trim().is_empty() {
        return ArgumentsStatus::CutOff;
    }
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(_)) => ArgumentsStatus::Complete,
        Ok(_) => ArgumentsStatus::Invalid,
        Err(e) if e.is_eof() => ArgumentsStatus::CutOff,
        Err(_) => ArgumentsStatus::Invalid,
    }
}

/// One finished model answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    pub content: String,
    pub reasoning: String,
    /// Assembled, in index order (arrival order when the provider sent no index). A call whose
    /// arguments never began keeps empty arguments when the answer was cut ([`FinishReason::Length`]),
    /// `{}` otherwise (a call without parameters).
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
    pub finish_reason: Option<FinishReason>,
}

impl Completion {
    /// The provider said the output limit cut the answer, or a tool call's arguments break off.
    pub fn is_truncated(&self) -> bool {
        self.finish_reason == Some(FinishReason::Length) || self.has_cut_off_tool_calls()
    }

    /// No text and no tool call (reasoning alone does not answer anything).
    pub fn is_empty_answer(&self) -> bool {
        self.content.trim().is_empty() && self.tool_calls.is_empty()
    }

    /// Each tool call with the status of its arguments, in order.
    pub fn tool_call_statuses(&self) -> impl Iterator<Item = (&ToolCall, ArgumentsStatus)> {
        self.tool_calls
            .iter()
            .map(|c| (c, arguments_status(&c.arguments)))
    }

    /// Whether any tool call's arguments were cut off (those must not be dispatched).
    pub fn has_cut_off_tool_calls(&self) -> bool {
        self.tool_call_statuses()
            .any(|(_, s)| s == ArgumentsStatus::CutOff)
    }
}
