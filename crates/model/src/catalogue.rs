//! What is known about common models: context window (input tokens) and image input.
//!
//! Lookup is lenient: case-insensitive, provider prefixes (`openai/`, `openrouter/anthropic/`,
//! `meta-llama/`) and tag suffixes (`:7b`, `:free`) are dropped, then the longest catalogue key the
//! name starts with wins (`gpt-4o-mini-2024-07-18` → `gpt-4o-mini`). Unknown models get `None`s;
//! the host then falls back to `LLM_MAX_CONTEXT_TOKENS` and `LLM_SUPPORT_IMAGE_INPUT`.

/// What the catalogue knows about a model; `None` means unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelProfile {
    /// Maximum input tokens.
    pub context_window_tokens: Option<u64>,
    pub supports_images: Option<bool>,
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

/// (key, window, images). Keys are lower-case name prefixes after normalisation.
const CATALOGUE: &[(&str, u64, bool)] = &[
    // OpenAI
    ("gpt-5-chat", 128 * K, true),
    ("gpt-5", 272 * K, true),
    ("gpt-4.1", 1_047_576, true),
    ("gpt-4o", 128 * K, true),
    ("chatgpt-4o", 128 * K, true),
    ("gpt-4-turbo", 128 * K, true),
    ("gpt-4-1106", 128 * K, false),
    ("gpt-4-0125", 128 * K, false),
    ("gpt-4-32k", 32_768, false),
    ("gpt-4", 8_192, false),
    ("gpt-3.5-turbo", 16_385, false),
    ("gpt-oss", 131_072, false),
    ("o1", 200 * K, true),
    ("o1-mini", 128 * K, false),
    ("o1-preview", 128 * K, false),
    ("o3", 200 * K, true),
    ("o3-mini", 200 * K, false),
    ("o4-mini", 200 * K, true),
    // DeepSeek
    ("deepseek-chat", 128 * K, false),
    ("deepseek-reasoner", 128 * K, false),
    ("deepseek-v3", 128 * K, false),
    ("deepseek-r1", 128 * K, false),
    ("deepseek-coder", 128 * K, false),
    // Qwen
    ("qwen2.5", 32_768, false),
    ("qwen2.5-vl", 128 * K, true),
    ("qwen2.5vl", 128 * K, true),
    ("qwen2.5-coder", 32_768, false),
    ("qwen3", 32_768, false),
    ("qwen3-vl", 262_144, true),
    ("qwen3-coder", 262_144, false),
    ("qwen3-235b-a22b-2507", 262_144, false),
    ("qwen3-30b-a3b-2507", 262_144, false),
    ("qwen-max", 32_768, false),
    ("qwen-plus", 131_072, false),
    ("qwen-turbo", 1_000_000, false),
    ("qwen-vl", 32_768, true),
    ("qwq", 131_072, false),
    // Meta
    ("llama3", 8_192, false),
    ("llama-3", 8_192, false),
    ("meta-llama-3", 8_192, false),
    ("llama3.1", 131_072, false),
    ("llama-3.1", 131_072, false),
    ("meta-llama-3.1", 131_072, false),
    ("llama3.2", 131_072, false),
    ("llama-3.2", 131_072, false),
    ("llama3.2-vision", 131_072, true),
    ("llama-3.2-11b-vision", 131_072, true),
    ("llama-3.2-90b-vision", 131_072, true),
    ("llama3.3", 131_072, false),
    ("llama-3.3", 131_072, false),
    ("llama4", 1_048_576, true),
    ("llama-4", 1_048_576, true),
    // Anthropic (through OpenAI-compatible gateways)
    ("claude", 200 * K, true),
    ("claude-2", 100 * K, false),
    ("claude-instant", 100 * K, false),
    // Google
    ("gemini", 1_048_576, true),
    ("gemini-1.5-pro", 2_097_152, true),
    ("gemini-1.0", 32_760, false),
    ("gemini-pro", 32_760, false),
    ("gemma3", 131_072, true),
    ("gemma-3", 131_072, true),
    ("gemma3:1b", 32_768, false),
    ("gemma-3-1b", 32_768, false),
    ("gemma2", 8_192, false),
    ("gemma-2", 8_192, false),
    // Mistral
    ("mistral-large", 131_072, false),
    ("mistral-medium", 131_072, true),
    ("mistral-small", 32_768, false),
    ("mistral-small3.1", 131_072, true),
    ("mistral-small-3.1", 131_072, true),
    ("mistral-small3.2", 131_072, true),
    ("mistral-small-3.2", 131_072, true),
    ("mistral-nemo", 131_072, false),
    ("mistral", 32_768, false),
    ("mixtral", 32_768, false),
    ("pixtral", 131_072, true),
    ("codestral", 256 * K, false),
    ("ministral", 131_072, false),
    // Others common behind OpenAI-compatible endpoints
    ("glm-4", 128 * K, false),
    ("glm-4v", 8 * K, true),
    ("glm-4.5", 131_072, false),
    ("glm-4.5v", 65_536, true),
    ("glm-4.6", 200 * K, false),
    ("kimi-k2", 131_072, false),
    ("kimi-k2-0905", 262_144, false),
    ("moonshot-v1-8k", 8 * K, false),
    ("moonshot-v1-32k", 32 * K, false),
    ("moonshot-v1-128k", 128 * K, false),
    ("grok-2-vision", 32_768, true),
    ("grok-3", 131_072, false),
    ("grok-4", 256 * K, true),
    ("phi3", 131_072, false),
    ("phi-3", 131_072, false),
    ("phi4", 16_384, false),
    ("phi-4", 16_384, false),
    ("command-r", 128 * K, false),
    ("llava", 4_096, true),
    ("minicpm-v", 32_768, true),
];

/// Normalises a configured model name for lookup.
fn normalise(model_name: &str) -> String {
    let lower = model_name.trim().to_ascii_lowercase();
    let base = lower.rsplit('/').next().unwrap_or(&lower);
    base.to_owned()
}

/// The catalogue entry for a model name (see the module docs for matching).
pub fn model_profile(model_name: &str) -> ModelProfile {
    let name = normalise(model_name);
    // Tags usually name a size or a tier (`:7b`, `:free`), but some keys include one (`gemma3:1b`).
    let untagged = name.split(':').next().unwrap_or(&name);
    let best = CATALOGUE
        .iter()
        .filter(|(key, _, _)| name.starts_with(key) || untagged.starts_with(key))
        .filter(|(key, _, _)| {
            // A key must end at a word boundary, so `o1` does not match `o1x` nor `gpt-4` `gpt-40`.
            let rest = name
                .strip_prefix(key)
                .or_else(|| untagged.strip_prefix(key));
            rest.is_some_and(|r| r.is_empty() || r.starts_with(['-', ':', '.', '_', '@', ' ']))
        })
        .max_by_key(|(key, _, _)| key.len());
    match best {
        Some(&(_, window, images)) => ModelProfile {
            context_window_tokens: Some(window),
            supports_images: Some(images),
        },
        None => ModelProfile {
            context_window_tokens: None,
            supports_images: (untagged.contains("vision") || untagged.contains("-vl"))
                .then_some(true),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(window: u64, images: bool) -> ModelProfile {
        ModelProfile {
            context_window_tokens: Some(window),
            supports_images: Some(images),
        }
    }

    #[test]
    fn lenient_matching() {
        assert_eq!(model_profile("gpt-4o-mini-2024-07-18"), p(128 * K, true));
        assert_eq!(model_profile("openai/GPT-4o"), p(128 * K, true));
        assert_eq!(model_profile("gpt-4"), p(8_192, false));
        assert_eq!(model_profile("gpt-4.1-mini"), p(1_047_576, true));
        assert_eq!(model_profile("o3-mini"), p(200 * K, false));
        assert_eq!(model_profile("o3"), p(200 * K, true));
        assert_eq!(model_profile("gpt-5-nano"), p(272 * K, true));
        assert_eq!(model_profile("deepseek-reasoner"), p(128 * K, false));
        assert_eq!(model_profile("qwen2.5:7b"), p(32_768, false));
        assert_eq!(model_profile("qwen2.5vl:7b"), p(128 * K, true));
        assert_eq!(model_profile("Qwen/Qwen3-8B"), p(32_768, false));
        assert_eq!(
            model_profile("llama3.1:8b-instruct-q4_K_M"),
            p(131_072, false)
        );
        assert_eq!(
            model_profile("meta-llama/Llama-3.3-70B-Instruct"),
            p(131_072, false)
        );
        assert_eq!(
            model_profile("openrouter/anthropic/claude-3.5-sonnet"),
            p(200 * K, true)
        );
        assert_eq!(model_profile("google/gemini-2.5-flash"), p(1_048_576, true));
        assert_eq!(model_profile("gemma3:1b"), p(32_768, false));
        assert_eq!(model_profile("gemma3:27b"), p(131_072, true));
        assert_eq!(
            model_profile("deepseek/deepseek-chat:free"),
            p(128 * K, false)
        );
    }

    #[test]
    fn unknown_models_and_fallbacks() {
        let unknown = model_profile("my-custom-model");
        assert_eq!(unknown, ModelProfile::default());
        assert_eq!(unknown.context_window_or(128), 128_000);
        assert!(unknown.vision_enabled(true));
        assert!(!unknown.vision_enabled(false));
        assert!(!model_profile("gpt-4o1x").vision_enabled(false));
        assert_eq!(model_profile("o1x"), ModelProfile::default());
        assert_eq!(
            model_profile("some-vision-model").supports_images,
            Some(true)
        );
        assert!(!model_profile("deepseek-chat").vision_enabled(true));
    }
}
