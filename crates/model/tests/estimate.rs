//! Token estimates: the text rules and the breakdown of a request.

use mpa_model::TokenCounter;
use mpa_model::estimate::*;
use mpa_protocol::ImageUrl;
use mpa_protocol::{ContentPart, Message, ToolSpec};

#[test]
fn text_rules() {
    assert_eq!(estimate_text_tokens(""), 0);
    assert_eq!(estimate_text_tokens("abcd"), 1);
    assert_eq!(estimate_text_tokens("abcde"), 2);
    assert_eq!(estimate_text_tokens("你好世界"), 4);
    assert_eq!(estimate_text_tokens("你好 abc"), 3);
    // The ASCII fast path and the per-character path agree.
    let mixed = "{\"id\": 12, \"title\": \"流浪地球 The Wandering Earth\"} é".repeat(7);
    let slow = mixed.chars().filter(|c| is_cjk(*c)).count() as u64
        + mixed
            .chars()
            .filter(|c| !is_cjk(*c))
            .map(|c| c.len_utf8() as u64)
            .sum::<u64>()
            .div_ceil(4);
    assert_eq!(estimate_text_tokens(&mixed), slow);
}

#[test]
fn breakdown() {
    let messages = vec![
        Message::system("abcdefgh"),
        Message::user_parts(vec![
            ContentPart::Text {
                text: "你好".into(),
            },
            ContentPart::ImageUrl {
                image_url: ImageUrl::new("data:x".repeat(1000)),
            },
        ]),
    ];
    let tools = vec![ToolSpec {
        name: "abcd".into(),
        description: "abcd".into(),
        parameters: serde_json::json!({}),
    }];
    let est = estimate_breakdown(&messages, &tools);
    assert_eq!(
        est,
        TokenEstimate {
            message_tokens: 4 + 2,
            system_tokens: 4 + 2,
            tool_tokens: 8 + 1 + 1 + 1,
            multimodal_tokens: 85,
            image_count: 1,
            message_count: 2,
            tool_count: 1,
            counter: TokenCounter::Estimate,
        }
    );
    assert_eq!(estimate_tokens(&messages, &tools), 6 + 6 + 11 + 85);
}
