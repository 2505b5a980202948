//! Cheap token estimates for budgeting a request (spec runtime §12.1), for models without a
//! tokenizer crate ([`crate::TokenCounter`] picks; OpenAI's families are counted exactly).
//!
//! No tokenizer: CJK characters count one token each (BPE vocabularies rarely merge them), other
//! text one token per four bytes, rounded up; each message adds a fixed framing overhead; each image
//! counts 85 tokens (the low-detail tile cost OpenAI documents). Over-estimating a little is the
//! safe direction: the result only decides when to compact. The budget ([`request_budget`])
//! multiplies the sum by the provider-serialisation factor (×1.5: chat templates, JSON-escaped
//! tool arguments and schemas cost more than their text), so a request the estimate lets through
//! fits the window even on a model whose tokenizer splits finer than four bytes a token.

use crate::TokenCounter;
use mpa_protocol::{Content, ContentPart, Message, RequestBudget, Role, ToolSpec};

/// Framing tokens per message (role markers, separators).
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;
/// Framing tokens per tool schema.
pub const TOOL_OVERHEAD_TOKENS: u64 = 8;
/// Tokens counted per image.
pub const IMAGE_TOKENS: u64 = 85;

/// A request's tokens broken down as the budget report wants it, in the raw units of `counter`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenEstimate {
    /// Non-system messages, text and tool calls (images excluded); with a tokenizer also the
    /// reply priming.
    pub message_tokens: u64,
    pub system_tokens: u64,
    /// Tool schemas (with a tokenizer already times the serialisation factor).
    pub tool_tokens: u64,
    pub multimodal_tokens: u64,
    pub image_count: u64,
    pub message_count: u64,
    pub tool_count: u64,
    /// How the figures were counted.
    pub counter: TokenCounter,
}

impl TokenEstimate {
    /// Counts one message whose tokens, images included, are `tokens`.
    pub fn add_message(&mut self, m: &Message, tokens: u64) {
        self.message_count += 1;
        let images = m.content.image_count() as u64;
        let text = tokens.saturating_sub(images * IMAGE_TOKENS);
        if m.role == Role::System {
            self.system_tokens += text;
        } else {
            self.message_tokens += text;
        }
        self.image_count += images;
        self.multimodal_tokens += images * IMAGE_TOKENS;
    }

    /// The raw sum.
    pub fn total(&self) -> u64 {
        self.message_tokens + self.system_tokens + self.tool_tokens + self.multimodal_tokens
    }

    /// What is budgeted against the window: [`TokenCounter::budgeted`] of the sum.
    pub fn input_tokens(&self) -> u64 {
        self.counter.budgeted(self.total())
    }
}

pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF     // Hiragana, Katakana
        | 0x3000..=0x303F   // CJK punctuation
        | 0x3400..=0x4DBF   // Extension A
        | 0x4E00..=0x9FFF   // Unified Ideographs
        | 0xAC00..=0xD7AF   // Hangul syllables
        | 0xF900..=0xFAFF   // Compatibility Ideographs
        | 0xFF00..=0xFFEF   // Half/full-width forms
        | 0x20000..=0x2FFFF // Extensions B..
    )
}

/// Estimated tokens of a piece of text.
pub fn estimate_text_tokens(text: &str) -> u64 {
    let bytes = text.as_bytes();
    let mut cjk = 0u64;
    let mut other_bytes = 0u64;
    let mut i = 0;
    while i < bytes.len() {
        // ASCII runs eight bytes at a time (JSON results are mostly ASCII with some Chinese).
        if let Some(chunk) = bytes.get(i..i + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            if u64::from_ne_bytes(word) & 0x8080_8080_8080_8080 == 0 {
                other_bytes += 8;
                i += 8;
                continue;
            }
        }
        if bytes[i] < 0x80 {
            other_bytes += 1;
            i += 1;
            continue;
        }
        // A lead byte: `i` is on a char boundary here.
        let c = text[i..].chars().next().unwrap_or('\u{FFFD}');
        let n = c.len_utf8();
        if is_cjk(c) {
            cjk += 1;
        } else {
            other_bytes += n as u64;
        }
        i += n;
    }
    cjk + other_bytes.div_ceil(4)
}

fn content_tokens(content: &Content) -> (u64, u64) {
    match content {
        Content::Text(t) => (estimate_text_tokens(t), 0),
        Content::Parts(parts) => parts
            .iter()
            .fold((0, 0), |(text, images), part| match part {
                ContentPart::Text { text: t } => (text + estimate_text_tokens(t), images),
                ContentPart::ImageUrl { .. } => (text, images + 1),
            }),
    }
}

/// The calibrated estimate with its breakdown (`counter` is [`TokenCounter::Estimate`]).
pub fn estimate_breakdown<'a>(
    messages: impl IntoIterator<Item = &'a Message>,
    tools: &[ToolSpec],
) -> TokenEstimate {
    let mut est = TokenEstimate {
        tool_count: tools.len() as u64,
        ..TokenEstimate::default()
    };
    for m in messages {
        est.add_message(m, estimate_message_tokens(m));
    }
    est.tool_tokens = tools.iter().map(estimate_tool_tokens).sum();
    est
}

/// The calibrated estimate's name in the budget report.
pub const ESTIMATOR: &str = "calibrated_estimate";

/// The estimate times the provider-serialisation factor (×1.5, rounded up).
pub fn with_serialisation_factor(raw: u64) -> u64 {
    raw.saturating_mul(3).div_ceil(2)
}

/// The raw estimate that, times the factor, is `budget` (rounded down): how much text fits.
pub fn without_serialisation_factor(budget: u64) -> u64 {
    budget.saturating_mul(2) / 3
}

/// What one request is budgeted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetLimits {
    pub context_window_tokens: u64,
    pub model_max_output_tokens: Option<u32>,
    pub configured_output_limit_tokens: Option<u32>,
    /// How the model's tokens are counted.
    pub counter: TokenCounter,
}

impl BudgetLimits {
    /// The catalogue's window for the model, else `llm_max_context_k_tokens` × 1000, and the
    /// model family's token counter.
    pub fn for_model(cfg: &crate::ModelConfig, llm_max_context_k_tokens: u64) -> Self {
        let profile = crate::model_profile(&cfg.model);
        Self {
            context_window_tokens: profile.context_window_or(llm_max_context_k_tokens),
            model_max_output_tokens: profile.max_output_tokens,
            configured_output_limit_tokens: cfg.max_output_tokens,
            counter: TokenCounter::for_model(&cfg.model),
        }
    }
}

/// The figures of spec runtime §12.1 for one request, counted as `est.counter` says (the
/// serialisation factor on the whole sum for the estimate; on tool schemas only, already in
/// `tool_tokens`, with a tokenizer).
pub fn request_budget(est: &TokenEstimate, limits: &BudgetLimits) -> RequestBudget {
    let estimated = est.input_tokens();
    let window = limits.context_window_tokens;
    RequestBudget {
        message_count: est.message_count,
        tool_count: est.tool_count,
        image_count: est.image_count,
        unknown_multimodal_count: 0,
        message_tokens: est.message_tokens,
        system_tokens: est.system_tokens,
        tool_tokens: est.tool_tokens,
        multimodal_tokens: est.multimodal_tokens,
        estimated_input_tokens: estimated,
        context_window_tokens: window,
        estimated_remaining_input_tokens: window.saturating_sub(estimated),
        estimated_input_ratio: if window == 0 {
            0.0
        } else {
            // Ratios are for people; four decimals are plenty.
            ((estimated as f64 / window as f64) * 10_000.0).round() / 10_000.0
        },
        estimated_over_input_limit: estimated > window,
        model_max_output_tokens: limits.model_max_output_tokens,
        configured_output_limit_tokens: limits.configured_output_limit_tokens,
        estimator: est.counter.name().to_string(),
        compaction: None,
        tool_discovery: None,
    }
}

/// Estimated tokens of one message (framing, text, tool calls; images excluded).
pub fn estimate_message_tokens(m: &Message) -> u64 {
    let (text, images) = content_tokens(&m.content);
    let calls: u64 = m
        .tool_calls
        .iter()
        .map(|c| {
            MESSAGE_OVERHEAD_TOKENS
                + estimate_text_tokens(&c.id)
                + estimate_text_tokens(&c.name)
                + estimate_text_tokens(&c.arguments)
        })
        .sum();
    let id = m.tool_call_id.as_deref().map_or(0, estimate_text_tokens);
    MESSAGE_OVERHEAD_TOKENS + text + calls + id + images * IMAGE_TOKENS
}

/// Estimated tokens of one tool schema.
pub fn estimate_tool_tokens(t: &ToolSpec) -> u64 {
    TOOL_OVERHEAD_TOKENS
        + estimate_text_tokens(&t.name)
        + estimate_text_tokens(&t.description)
        + estimate_text_tokens(&t.parameters.to_string())
}

/// Estimated input tokens of a request.
pub fn estimate_tokens<'a>(
    messages: impl IntoIterator<Item = &'a Message>,
    tools: &[ToolSpec],
) -> u64 {
    estimate_breakdown(messages, tools).total()
}
