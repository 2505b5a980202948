//! Fitting the output limit to what a server accepts — at most once per call.
//!
//! The limit that goes out (configured, catalogue, or the default) can be refused: under another
//! name (OpenAI's reasoning models want `max_completion_tokens`, most other servers know only
//! `max_tokens`), above the model's own limit ("supports at most 16384 completion tokens"), or
//! together with the prompt above the server's window (vLLM and TGI refuse what llama.cpp and
//! Ollama silently clamp). Each refusal names the fix; the client resends once with it. A refusal
//! that leaves too little room for an answer stays what it is (usually context exceeded).

use crate::error::ModelError;
use crate::wire::OutputLimitParam;

/// Less room than this for the answer is not worth a second request.
const MIN_FITTED_OUTPUT: u32 = 256;

/// The output limit of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimit {
    /// `None`: no limit is sent, so nothing can be refused.
    pub tokens: Option<u32>,
    pub param: OutputLimitParam,
}

/// The limit to resend with after `err`, if `err` refused the one `sent`.
pub fn refit(err: &ModelError, sent: OutputLimit) -> Option<OutputLimit> {
    let tokens = sent.tokens?;
    let (message, context) = match err {
        ModelError::InvalidRequest { message, .. } | ModelError::BadResponse { message, .. } => {
            (message, false)
        }
        ModelError::ContextLengthExceeded { message, .. } => (message, true),
        _ => return None,
    };
    let lower = message.to_ascii_lowercase();
    if !context && names_unsupported_param(&lower, sent.param) {
        return Some(OutputLimit {
            param: sent.param.other(),
            ..sent
        });
    }
    let fitted = if context {
        room_left(&lower)?
    } else {
        model_output_limit(&lower)?
    };
    (fitted >= MIN_FITTED_OUTPUT.min(tokens) && fitted < tokens).then_some(OutputLimit {
        tokens: Some(fitted),
        ..sent
    })
}

/// "Unsupported parameter: 'max_tokens' is not supported with this model. Use
/// 'max_completion_tokens' instead." (OpenAI), "Unrecognized request argument supplied:
/// max_completion_tokens" (older Azure), "Extra inputs are not permitted" (pydantic servers).
fn names_unsupported_param(lower: &str, param: OutputLimitParam) -> bool {
    lower.contains(param.as_str())
        && [
            "unsupported",
            "not supported",
            "unrecognized",
            "not permitted",
            "unknown",
        ]
        .iter()
        .any(|w| lower.contains(w))
}

/// The model's own output limit, from "This model supports at most 16384 completion tokens"
/// (OpenAI) or "max_tokens: 8192 > 4096, which is the maximum allowed number of output tokens"
/// (Anthropic).
fn model_output_limit(lower: &str) -> Option<u32> {
    if let Some(n) = number_after(lower, "supports at most ") {
        return u32::try_from(n).ok();
    }
    let at = lower.find(", which is the maximum allowed")?;
    number_ending_at(&lower[..at]).and_then(|n| u32::try_from(n).ok())
}

/// Window minus prompt, from the servers that count both:
/// - vLLM, OpenAI (older): "maximum context length is 4096 tokens. However, you requested 5000
///   tokens (1000 in the messages, 4000 in the completion)";
/// - vLLM (newer): "… maximum context length is 4096 tokens and your request has 100 input tokens";
/// - "… you requested 128000 output tokens and your prompt contains at least 134145 input tokens";
/// - TGI: "`inputs` tokens + `max_new_tokens` must be <= 4096. Given: 3474 `inputs` tokens".
fn room_left(lower: &str) -> Option<u32> {
    let window = number_after(lower, "maximum context length is ")
        .or_else(|| number_after(lower, "must be <= "))?;
    let prompt = lower
        .find(" in the messages")
        .and_then(|at| number_ending_at(&lower[..at]))
        .or_else(|| number_after(lower, "your request has "))
        .or_else(|| number_after(lower, "prompt contains at least "))
        .or_else(|| number_after(lower, "given: "))?;
    u32::try_from(window.checked_sub(prompt)?).ok()
}

/// The number right after the first `prefix` (digits, `,` and `_` separators allowed).
fn number_after(text: &str, prefix: &str) -> Option<u64> {
    let start = text.find(prefix)? + prefix.len();
    let digits: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '_')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The number `text` ends with (after trimming spaces).
fn number_ending_at(text: &str) -> Option<u64> {
    let text = text.trim_end();
    let start = text
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    text[start..].parse().ok()
}
