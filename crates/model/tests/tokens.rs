//! Token counting against OpenAI's own tiktoken counts.

use mpa_model::estimate::{self, IMAGE_TOKENS, with_serialisation_factor};
use mpa_model::tokens::*;
use mpa_protocol::{ContentPart, Message, ToolSpec};
use mpa_protocol::{ImageUrl, Outcome, ToolCall};

/// Reference counts from OpenAI's own `tiktoken` 0.14 (Python), `encode_ordinary`, computed
/// once by hand with the vocabularies this crate embeds (their SHA-256 matches OpenAI's):
/// `(text, o200k_base, cl100k_base)`.
const REFERENCE: &[(&str, u64, u64)] = &[
    ("hello world", 2, 2),
    ("Hello, world! How are you today?", 9, 9),
    ("你好，世界！请列出我的订阅。", 11, 16),
    (
        "第3页：请列出订阅，每页 20 条，不要删除任何东西 (page 3, count 20)",
        28,
        35,
    ),
    (
        "{\"success\":true,\"items\":[{\"id\":1,\"name\":\"流浪地球 The Wandering Earth\",\"state\":\"R\"}],\"total\":400}",
        32,
        32,
    ),
    ("  leading spaces and\ttabs\n\nnewlines   \n", 10, 10),
    (
        "The quick brown fox jumps over the lazy dog. 1234567890 3.14159",
        20,
        20,
    ),
    (
        "すべての人間は、生まれながらにして自由であり、かつ、尊厳と権利とについて平等である。",
        35,
        45,
    ),
    ("emoji 🎬🍿 and accents: café naïve résumé", 12, 16),
    ("", 0, 0),
];

#[test]
fn real_tokenizers_match_openais_counts() {
    for &(text, o200k, cl100k) in REFERENCE {
        assert_eq!(TokenCounter::O200kBase.text_tokens(text), o200k, "{text:?}");
        assert_eq!(
            TokenCounter::Cl100kBase.text_tokens(text),
            cl100k,
            "{text:?}"
        );
    }
    // Every role is one token in both vocabularies.
    for role in ["system", "user", "assistant", "tool"] {
        assert_eq!(TokenCounter::O200kBase.text_tokens(role), 1);
        assert_eq!(TokenCounter::Cl100kBase.text_tokens(role), 1);
    }
}

#[test]
fn models_pick_their_counter() {
    let cases = [
        ("gpt-4o", TokenCounter::O200kBase),
        ("gpt-4o-mini-2024-07-18", TokenCounter::O200kBase),
        ("openai/gpt-4.1-nano", TokenCounter::O200kBase),
        ("chatgpt-4o-latest", TokenCounter::O200kBase),
        ("gpt-5", TokenCounter::O200kBase),
        ("gpt-5-chat-latest", TokenCounter::O200kBase),
        ("o1", TokenCounter::O200kBase),
        ("o3-mini", TokenCounter::O200kBase),
        ("o4-mini-2025-04-16", TokenCounter::O200kBase),
        ("gpt-oss:20b", TokenCounter::O200kBase),
        ("gpt-4", TokenCounter::Cl100kBase),
        ("gpt-4-turbo", TokenCounter::Cl100kBase),
        ("gpt-4-0613", TokenCounter::Cl100kBase),
        ("gpt-3.5-turbo", TokenCounter::Cl100kBase),
        ("gpt-35-turbo-16k", TokenCounter::Cl100kBase),
        ("text-embedding-3-small", TokenCounter::Cl100kBase),
        ("deepseek-chat", TokenCounter::Estimate),
        ("qwen2.5:7b", TokenCounter::Estimate),
        ("claude-sonnet-4-5", TokenCounter::Estimate),
        ("house-model-x", TokenCounter::Estimate),
        ("gpt-40", TokenCounter::Estimate),
        ("o1x", TokenCounter::Estimate),
    ];
    for (model, want) in cases {
        assert_eq!(TokenCounter::for_model(model), want, "{model}");
    }
    assert_eq!(TokenCounter::O200kBase.name(), "o200k_base");
    assert_eq!(TokenCounter::Cl100kBase.name(), "cl100k_base");
    assert_eq!(TokenCounter::Estimate.name(), "calibrated_estimate");
}

#[test]
fn ready_once_loaded() {
    assert!(TokenCounter::Estimate.is_ready());
    TokenCounter::Cl100kBase.warm_up();
    assert!(TokenCounter::Cl100kBase.is_ready());
}

#[test]
fn chat_framing_is_openais_documented_one() {
    let c = TokenCounter::O200kBase;
    // "hello world": 2 tokens; 3 framing + 1 role.
    assert_eq!(c.message_tokens(&Message::user("hello world")), 3 + 1 + 2);
    let messages = [
        Message::system("hello world"),
        Message::user("你好，世界！请列出我的订阅。"),
    ];
    let est = c.breakdown(&messages, &[], &TokenCache::new());
    assert_eq!(est.system_tokens, 4 + 2);
    assert_eq!(est.message_tokens, 4 + 11 + REPLY_PRIMING_TOKENS);
    // No serialisation factor on messages.
    assert_eq!(est.input_tokens(), 6 + 15 + 3);
    // A tool call: framing + id + name + arguments; a tool result adds its call id.
    let call = Message::assistant(
        "",
        vec![ToolCall {
            id: "hello world".into(),
            name: "hello world".into(),
            arguments: "hello world".into(),
        }],
    );
    assert_eq!(c.message_tokens(&call), 4 + 3 + 2 + 2 + 2);
    let result = Message::tool("hello world", "t", "hello world", Outcome::Succeeded);
    assert_eq!(c.message_tokens(&result), 4 + 2 + 2);
    // Images: 85 each, reported apart.
    let img = Message::user_parts(vec![
        ContentPart::Text {
            text: "hello world".into(),
        },
        ContentPart::ImageUrl {
            image_url: ImageUrl::new("data:image/png;base64,AAAA"),
        },
    ]);
    let est = c.breakdown([&img], &[], &TokenCache::new());
    assert_eq!(est.message_tokens, 4 + 2 + REPLY_PRIMING_TOKENS);
    assert_eq!((est.image_count, est.multimodal_tokens), (1, IMAGE_TOKENS));
}

#[test]
fn tool_schemas_keep_the_serialisation_factor() {
    let t = ToolSpec {
        name: "hello world".into(),
        description: "Hello, world! How are you today?".into(),
        parameters: serde_json::json!({}),
    };
    // 8 framing + 2 + 9 + `{}` (1 token), ×1.5 rounded up.
    assert_eq!(TokenCounter::Cl100kBase.text_tokens("{}"), 1);
    assert_eq!(
        TokenCounter::Cl100kBase.tool_tokens(&t),
        (20u64 * 3).div_ceil(2)
    );
    let est = TokenCounter::Cl100kBase.breakdown([], std::slice::from_ref(&t), &TokenCache::new());
    assert_eq!(est.tool_tokens, 30);
    assert_eq!(est.input_tokens(), 30 + REPLY_PRIMING_TOKENS);
}

#[test]
fn the_estimate_is_unchanged_and_uncached() {
    let messages = [Message::system("abcdefgh"), Message::user("你好")];
    let cache = TokenCache::new();
    let est = TokenCounter::Estimate.breakdown(&messages, &[], &cache);
    assert_eq!(est, estimate::estimate_breakdown(&messages, &[]));
    assert_eq!(est.input_tokens(), with_serialisation_factor(12));
    assert!(cache.is_empty());
}

#[test]
fn the_cache_counts_each_message_once_and_never_returns_a_stale_count() {
    let c = TokenCounter::O200kBase;
    let cache = TokenCache::new();
    let mut messages = vec![
        Message::system("hello world"),
        Message::user("Hello, world! How are you today?"),
    ];
    let first = c.breakdown(&messages, &[], &cache);
    assert_eq!(cache.len(), 2);
    assert_eq!(c.breakdown(&messages, &[], &cache), first);
    assert_eq!(cache.len(), 2, "hits, nothing new");
    // Edited in place, same length: a new count.
    messages[1] = Message::user("Hello, world! How are you today!");
    let edited = c.breakdown(&messages, &[], &cache);
    assert_eq!(edited.message_tokens, 4 + 9 + REPLY_PRIMING_TOKENS);
    messages[1] = Message::user("你好，世界！请列出我的订阅。");
    let edited = c.breakdown(&messages, &[], &cache);
    assert_eq!(edited.message_tokens, 4 + 11 + REPLY_PRIMING_TOKENS);
    // The same text under another role, in parts, or as a tool result is another key.
    let as_parts = Message::user_parts(vec![ContentPart::Text {
        text: "你好，世界！请列出我的订阅。".into(),
    }]);
    let as_tool = Message::tool("x", "t", "你好，世界！请列出我的订阅。", Outcome::Succeeded);
    for (m, want) in [(&as_parts, 4 + 11), (&as_tool, 4 + 11 + 1)] {
        assert_eq!(cache.message_tokens(c, [m]), vec![want]);
    }
    // Tool calls: changed arguments are a new count.
    let mut call = Message::assistant(
        "",
        vec![ToolCall {
            id: "c1".into(),
            name: "hello".into(),
            arguments: "{}".into(),
        }],
    );
    let before = cache.message_tokens(c, [&call])[0];
    call.tool_calls[0].arguments = r#"{"page": 2, "count": 20}"#.into();
    let after = cache.message_tokens(c, [&call])[0];
    assert_eq!(after, c.message_tokens(&call));
    assert!(after > before);
    // Schemas too.
    let mut t = ToolSpec {
        name: "t".into(),
        description: "d".into(),
        parameters: serde_json::json!({"type": "object"}),
    };
    let a = c
        .breakdown([], std::slice::from_ref(&t), &cache)
        .tool_tokens;
    t.parameters =
        serde_json::json!({"type": "object", "properties": {"page": {"type": "integer"}}});
    let b = c
        .breakdown([], std::slice::from_ref(&t), &cache)
        .tool_tokens;
    assert_eq!(b, c.tool_tokens(&t));
    assert!(b > a);
    // Another counter never reads this one's entries.
    assert_eq!(
        TokenCounter::Cl100kBase
            .breakdown(&messages, &[], &cache)
            .message_tokens,
        4 + 16 + REPLY_PRIMING_TOKENS
    );
}

#[test]
fn the_cache_stays_the_size_of_the_live_context() {
    let c = TokenCounter::Cl100kBase;
    let cache = TokenCache::new();
    let mut live: Vec<Message> = Vec::new();
    for i in 0..2000 {
        live.push(Message::user(format!("message {i}")));
        if live.len() > 50 {
            live.remove(0);
        }
        c.breakdown(&live, &[], &cache);
    }
    assert!(cache.len() <= 2 * 50 + SWEEP_SLACK + 1, "{}", cache.len());
    // What is live is still cached (counted again, it is the same).
    let again = c.breakdown(&live, &[], &cache);
    assert_eq!(again.message_count, 50);
}
