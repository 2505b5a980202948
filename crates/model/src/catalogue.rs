//! What is known about common models: context window (input tokens), image input, output limit.
//!
//! Lookup is lenient: case-insensitive, provider prefixes (`openai/`, `openrouter/anthropic/`,
//! `meta-llama/`) and tag suffixes (`:7b`, `:free`) are dropped, then the longest catalogue key the
//! name starts with wins (`gpt-4o-mini-2024-07-18` → `gpt-4o-mini`). Unknown models get `None`s;
//! the host then falls back to `LLM_MAX_CONTEXT_TOKENS`, `LLM_SUPPORT_IMAGE_INPUT` and
//! [`crate::DEFAULT_MAX_OUTPUT_TOKENS`]. The same matching picks the token counter
//! ([`crate::TokenCounter::for_model`]): OpenAI's families get their real tokenizer.
//!
//! Output limits are the most a model's API accepts as `max_tokens` (a provider rejects a larger
//! value, so an entry never exceeds the documented limit). Open-weight models have no separate
//! limit — the server's window bounds prompt plus answer, and some servers (vLLM) reject a request
//! whose prompt plus `max_tokens` exceeds it — so they get a conservative cap for reasoning models
//! and none (the default) otherwise.

use crate::TokenCounter;

/// What the catalogue knows about a model; `None` means unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelProfile {
    /// Maximum input tokens.
    pub context_window_tokens: Option<u64>,
    pub supports_images: Option<bool>,
    /// Most output tokens one answer may have (`max_tokens`).
    pub max_output_tokens: Option<u32>,
}

impl ModelProfile {
    /// The window to budget against: the catalogue's, else `LLM_MAX_CONTEXT_TOKENS` (in thousands
    /// of tokens, as MoviePilot configures it) × 1000.
    pub fn context_window_or(&self, llm_max_context_k_tokens: u64) -> u64 {
        self.context_window_tokens
            .unwrap_or(llm_max_context_k_tokens.saturating_mul(1000))
    }

    /// Vision is on when the switch `LLM_SUPPORT_IMAGE_INPUT` is on and the catalogue does not
    /// mark the model text-only; unknown models follow the switch (spec runtime §9.4).
    pub fn vision_enabled(&self, llm_support_image_input: bool) -> bool {
        llm_support_image_input && self.supports_images != Some(false)
    }
}

const K: u64 = 1000;

/// (key, window, images, output limit). Keys are lower-case name prefixes after normalisation.
const CATALOGUE: &[(&str, u64, bool, Option<u32>)] = &[
    // OpenAI
    ("gpt-5-chat", 128 * K, true, Some(16_384)),
    ("gpt-5", 272 * K, true, Some(128_000)),
    ("gpt-4.1", 1_047_576, true, Some(32_768)),
    ("gpt-4o", 128 * K, true, Some(16_384)),
    ("gpt-4o-2024-05-13", 128 * K, true, Some(4_096)),
    ("chatgpt-4o", 128 * K, true, Some(16_384)),
    ("gpt-4-turbo", 128 * K, true, Some(4_096)),
    ("gpt-4-1106", 128 * K, false, Some(4_096)),
    ("gpt-4-0125", 128 * K, false, Some(4_096)),
    ("gpt-4-32k", 32_768, false, None),
    ("gpt-4", 8_192, false, Some(8_192)),
    ("gpt-3.5-turbo", 16_385, false, Some(4_096)),
    ("gpt-oss", 131_072, false, Some(16_384)),
    ("o1", 200 * K, true, Some(100_000)),
    ("o1-mini", 128 * K, false, Some(65_536)),
    ("o1-preview", 128 * K, false, Some(32_768)),
    ("o3", 200 * K, true, Some(100_000)),
    ("o3-mini", 200 * K, false, Some(100_000)),
    ("o4-mini", 200 * K, true, Some(100_000)),
    // DeepSeek
    ("deepseek-chat", 128 * K, false, Some(8_192)),
    ("deepseek-reasoner", 128 * K, false, Some(32_768)),
    ("deepseek-v3", 128 * K, false, Some(8_192)),
    ("deepseek-r1", 128 * K, false, Some(16_384)),
    ("deepseek-coder", 128 * K, false, None),
    // Qwen
    ("qwen2.5", 32_768, false, Some(8_192)),
    ("qwen2.5-vl", 128 * K, true, Some(8_192)),
    ("qwen2.5vl", 128 * K, true, Some(8_192)),
    ("qwen2.5-coder", 32_768, false, Some(8_192)),
    ("qwen3", 32_768, false, Some(16_384)),
    ("qwen3-vl", 262_144, true, Some(16_384)),
    ("qwen3-coder", 262_144, false, Some(65_536)),
    ("qwen3-235b-a22b-2507", 262_144, false, Some(16_384)),
    ("qwen3-30b-a3b-2507", 262_144, false, Some(16_384)),
    ("qwen-max", 32_768, false, Some(8_192)),
    ("qwen-plus", 131_072, false, Some(8_192)),
    ("qwen-turbo", 1_000_000, false, Some(8_192)),
    ("qwen-vl", 32_768, true, None),
    ("qwq", 131_072, false, Some(16_384)),
    // Meta
    ("llama3", 8_192, false, None),
    ("llama-3", 8_192, false, None),
    ("meta-llama-3", 8_192, false, None),
    ("llama3.1", 131_072, false, None),
    ("llama-3.1", 131_072, false, None),
    ("meta-llama-3.1", 131_072, false, None),
    ("llama3.2", 131_072, false, None),
    ("llama-3.2", 131_072, false, None),
    ("llama3.2-vision", 131_072, true, None),
    ("llama-3.2-11b-vision", 131_072, true, None),
    ("llama-3.2-90b-vision", 131_072, true, None),
    ("llama3.3", 131_072, false, None),
    ("llama-3.3", 131_072, false, None),
    ("llama4", 1_048_576, true, None),
    ("llama-4", 1_048_576, true, None),
    // Anthropic (through OpenAI-compatible gateways)
    ("claude", 200 * K, true, Some(4_096)),
    ("claude-3-5", 200 * K, true, Some(8_192)),
    ("claude-3.5", 200 * K, true, Some(8_192)),
    ("claude-3-7", 200 * K, true, Some(64_000)),
    ("claude-3.7", 200 * K, true, Some(64_000)),
    ("claude-sonnet-4", 200 * K, true, Some(64_000)),
    ("claude-opus-4", 200 * K, true, Some(32_000)),
    ("claude-haiku-4", 200 * K, true, Some(64_000)),
    ("claude-2", 100 * K, false, Some(4_096)),
    ("claude-instant", 100 * K, false, Some(4_096)),
    // Google
    ("gemini", 1_048_576, true, Some(8_192)),
    ("gemini-2.5", 1_048_576, true, Some(65_536)),
    ("gemini-1.5-pro", 2_097_152, true, Some(8_192)),
    ("gemini-1.0", 32_760, false, Some(2_048)),
    ("gemini-pro", 32_760, false, Some(2_048)),
    ("gemma3", 131_072, true, None),
    ("gemma-3", 131_072, true, None),
    ("gemma3:270m", 32_768, false, None),
    ("gemma-3-270m", 32_768, false, None),
    ("gemma3:1b", 32_768, false, None),
    ("gemma-3-1b", 32_768, false, None),
    ("gemma2", 8_192, false, None),
    ("gemma-2", 8_192, false, None),
    // Mistral
    ("mistral-large", 131_072, false, None),
    ("mistral-medium", 131_072, true, None),
    ("mistral-small", 32_768, false, None),
    ("mistral-small3.1", 131_072, true, None),
    ("mistral-small-3.1", 131_072, true, None),
    ("mistral-small3.2", 131_072, true, None),
    ("mistral-small-3.2", 131_072, true, None),
    ("mistral-nemo", 131_072, false, None),
    ("mistral", 32_768, false, None),
    ("mixtral", 32_768, false, None),
    ("pixtral", 131_072, true, None),
    ("codestral", 256 * K, false, None),
    ("ministral", 131_072, false, None),
    // Others common behind OpenAI-compatible endpoints
    ("glm-4", 128 * K, false, None),
    ("glm-4v", 8 * K, true, None),
    ("glm-4.5", 131_072, false, None),
    ("glm-4.5v", 65_536, true, None),
    ("glm-4.6", 200 * K, false, None),
    ("kimi-k2", 131_072, false, None),
    ("kimi-k2-0905", 262_144, false, None),
    ("moonshot-v1-8k", 8 * K, false, None),
    ("moonshot-v1-32k", 32 * K, false, None),
    ("moonshot-v1-128k", 128 * K, false, None),
    ("grok-2-vision", 32_768, true, None),
    ("grok-3", 131_072, false, None),
    ("grok-4", 256 * K, true, None),
    ("phi3", 131_072, false, None),
    ("phi-3", 131_072, false, None),
    ("phi4", 16_384, false, None),
    ("phi-4", 16_384, false, None),
    ("command-r", 128 * K, false, None),
    ("llava", 4_096, true, None),
    ("minicpm-v", 32_768, true, None),
];

/// Normalises a configured model name for lookup.
fn normalise(model_name: &str) -> String {
    let lower = model_name.trim().to_ascii_lowercase();
    let base = lower.rsplit('/').next().unwrap_or(&lower);
    base.to_owned()
}

/// The longest catalogue key `name` (normalised) starts with at a word boundary.
fn best_key<'k>(keys: impl Iterator<Item = &'k str>, name: &str) -> Option<&'k str> {
    // Tags usually name a size or a tier (`:7b`, `:free`), but some keys include one (`gemma3:1b`).
    let untagged = name.split(':').next().unwrap_or(name);
    keys.filter(|key| {
        // A key must end at a word boundary, so `o1` does not match `o1x` nor `gpt-4` `gpt-40`.
        let rest = name
            .strip_prefix(key)
            .or_else(|| untagged.strip_prefix(key));
        rest.is_some_and(|r| r.is_empty() || r.starts_with(['-', ':', '.', '_', '@', ' ']))
    })
    .max_by_key(|key| key.len())
}

/// The catalogue entry for a model name (see the module docs for matching).
pub fn model_profile(model_name: &str) -> ModelProfile {
    let name = normalise(model_name);
    let best = best_key(CATALOGUE.iter().map(|e| e.0), &name)
        .and_then(|key| CATALOGUE.iter().find(|e| e.0 == key));
    match best {
        Some(&(_, window, images, output)) => ModelProfile {
            context_window_tokens: Some(window),
            supports_images: Some(images),
            max_output_tokens: output,
        },
        None => {
            let untagged = name.split(':').next().unwrap_or(&name);
            ModelProfile {
                context_window_tokens: None,
                supports_images: (untagged.contains("vision") || untagged.contains("-vl"))
                    .then_some(true),
                max_output_tokens: None,
            }
        }
    }
}

/// OpenAI's reasoning families refuse `max_tokens` and take `max_completion_tokens` instead;
/// everyone else (llama.cpp, Ollama, older vLLM, most gateways) knows only `max_tokens`.
const COMPLETION_TOKENS_FAMILIES: &[&str] = &["o1", "o3", "o4", "gpt-5"];

/// Whether the output limit of `model_name` goes out as `max_completion_tokens`.
pub fn takes_max_completion_tokens(model_name: &str) -> bool {
    let name = normalise(model_name);
    best_key(COMPLETION_TOKENS_FAMILIES.iter().copied(), &name).is_some()
        && !name.starts_with("gpt-5-chat")
}

/// Families whose tokenizer ships as a crate (OpenAI's, through `tiktoken-rs`), matched like the
/// catalogue: `gpt-4` is cl100k_base but `gpt-4o` and `gpt-4.1` (longer keys) are o200k_base.
/// gpt-oss uses `o200k_harmony`, which is o200k_base plus special tokens (ordinary text counts the
/// same). Any other model is counted by the calibrated estimate.
const TOKENIZER_FAMILIES: &[(&str, TokenCounter)] = &[
    ("gpt-4o", TokenCounter::O200kBase),
    ("chatgpt-4o", TokenCounter::O200kBase),
    ("gpt-4.1", TokenCounter::O200kBase),
    ("gpt-4.5", TokenCounter::O200kBase),
    ("gpt-5", TokenCounter::O200kBase),
    ("o1", TokenCounter::O200kBase),
    ("o3", TokenCounter::O200kBase),
    ("o4", TokenCounter::O200kBase),
    ("gpt-oss", TokenCounter::O200kBase),
    ("gpt-4", TokenCounter::Cl100kBase),
    ("gpt-3.5", TokenCounter::Cl100kBase),
    ("gpt-35", TokenCounter::Cl100kBase),
    ("text-embedding-3", TokenCounter::Cl100kBase),
    ("text-embedding-ada-002", TokenCounter::Cl100kBase),
];

/// How the tokens of `model_name` are counted (see [`TOKENIZER_FAMILIES`]).
pub(crate) fn token_counter(model_name: &str) -> TokenCounter {
    let name = normalise(model_name);
    best_key(TOKENIZER_FAMILIES.iter().map(|e| e.0), &name)
        .and_then(|key| TOKENIZER_FAMILIES.iter().find(|e| e.0 == key))
        .map_or(TokenCounter::Estimate, |e| e.1)
}
