//! The model catalogue: lenient name matching, unknown models, the output-limit parameter.

use mpa_model::catalogue::*;

/// The catalogue's unit: context windows are written in thousands of tokens.
const K: u64 = 1000;

fn p(window: u64, images: bool, output: Option<u32>) -> ModelProfile {
    ModelProfile {
        context_window_tokens: Some(window),
        supports_images: Some(images),
        max_output_tokens: output,
    }
}

#[test]
fn lenient_matching() {
    let cases: &[(&str, ModelProfile)] = &[
        ("gpt-4o-mini-2024-07-18", p(128 * K, true, Some(16_384))),
        ("openai/GPT-4o", p(128 * K, true, Some(16_384))),
        ("gpt-4o-2024-05-13", p(128 * K, true, Some(4_096))),
        ("gpt-4", p(8_192, false, Some(8_192))),
        ("gpt-4-32k", p(32_768, false, None)),
        ("gpt-4.1-mini", p(1_047_576, true, Some(32_768))),
        ("o3-mini", p(200 * K, false, Some(100_000))),
        ("o3", p(200 * K, true, Some(100_000))),
        ("gpt-5-nano", p(272 * K, true, Some(128_000))),
        ("deepseek-reasoner", p(128 * K, false, Some(32_768))),
        ("qwen2.5:7b", p(32_768, false, Some(8_192))),
        ("qwen2.5vl:7b", p(128 * K, true, Some(8_192))),
        ("Qwen/Qwen3-8B", p(32_768, false, Some(16_384))),
        ("llama3.1:8b-instruct-q4_K_M", p(131_072, false, None)),
        ("meta-llama/Llama-3.3-70B-Instruct", p(131_072, false, None)),
        (
            "openrouter/anthropic/claude-3.5-sonnet",
            p(200 * K, true, Some(8_192)),
        ),
        ("claude-3-opus-20240229", p(200 * K, true, Some(4_096))),
        ("claude-sonnet-4-5", p(200 * K, true, Some(64_000))),
        ("google/gemini-2.5-flash", p(1_048_576, true, Some(65_536))),
        ("gemini-2.0-flash", p(1_048_576, true, Some(8_192))),
        ("gemma3:1b", p(32_768, false, None)),
        ("gemma3:27b", p(131_072, true, None)),
        (
            "deepseek/deepseek-chat:free",
            p(128 * K, false, Some(8_192)),
        ),
    ];
    for (name, want) in cases {
        assert_eq!(model_profile(name), *want, "{name}");
    }
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
    // The GGUF file name llama.cpp reports as the model id.
    let gguf = model_profile("gemma-3-270m-q4_k_m.gguf");
    assert_eq!(gguf.max_output_tokens, None);
    // Gemma 3 270M is a 32 K, text-only model, not the 128 K family default.
    assert_eq!(gguf.context_window_or(128), 32_768);
    assert!(!gguf.vision_enabled(true));
    assert_eq!(model_profile("gemma3:270m").context_window_or(128), 32_768);
}

#[test]
fn output_limit_parameter_name() {
    for name in [
        "o1",
        "o3-mini",
        "o4-mini-2025-04-16",
        "gpt-5",
        "openai/gpt-5-mini",
    ] {
        assert!(takes_max_completion_tokens(name), "{name}");
    }
    for name in [
        "gpt-4o",
        "gpt-5-chat-latest",
        "o1x",
        "qwen3:8b",
        "deepseek-chat",
    ] {
        assert!(!takes_max_completion_tokens(name), "{name}");
    }
}
