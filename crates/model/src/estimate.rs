//! Cheap token estimates for budgeting a request (spec runtime §12.1).
//!
//! No tokenizer: CJK characters count one token each (BPE vocabularies rarely merge them), other
//! text one token per four bytes, rounded up; each message adds a fixed framing overhead; each image
//! counts 85 tokens (the low-detail tile cost OpenAI documents). Over-estimating a little is the
//! safe direction: the result only decides when to compact.

use mpa_protocol::{Content, ContentPart, Message, Role, ToolSpec};

/// Framing tokens per message (role markers, separators).
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;
/// Framing tokens per tool schema.
pub const TOOL_OVERHEAD_TOKENS: u64 = 8;
/// Tokens counted per image.
pub const IMAGE_TOKENS: u64 = 85;

/// An estimate broken down as the budget report wants it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenEstimate {
    /// Non-system messages, text and tool calls (images excluded).
    pub message_tokens: u64,
    pub system_tokens: u64,
    pub tool_tokens: u64,
    pub multimodal_tokens: u64,
    pub image_count: u64,
    pub message_count: u64,
    pub tool_count: u64,
}

impl TokenEstimate {
    pub fn total(&self) -> u64 {
        self.message_tokens + self.system_tokens + self.tool_tokens + self.multimodal_tokens
    }
}

fn is_cjk(c: char) -> bool {
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
    if text.is_ascii() {
        return (text.len() as u64).div_ceil(4);
    }
    let mut cjk = 0u64;
    let mut other_bytes = 0u64;
    for c in text.chars() {
        if is_cjk(c) {
            cjk += 1;
        } else {
            other_bytes += c.len_utf8() as u64;
        }
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

/// The estimate with its breakdown.
pub fn estimate_breakdown<'a>(
    messages: impl IntoIterator<Item = &'a Message>,
    tools: &[ToolSpec],
) -> TokenEstimate {
    let mut est = TokenEstimate {
        tool_count: tools.len() as u64,
        ..TokenEstimate::default()
    };
    for m in messages {
        est.message_count += 1;
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
        let tokens = MESSAGE_OVERHEAD_TOKENS + text + calls + id;
        if m.role == Role::System {
            est.system_tokens += tokens;
        } else {
            est.message_tokens += tokens;
        }
        est.image_count += images;
        est.multimodal_tokens += images * IMAGE_TOKENS;
    }
    for t in tools {
        est.tool_tokens += TOOL_OVERHEAD_TOKENS
            + estimate_text_tokens(&t.name)
            + estimate_text_tokens(&t.description)
            + estimate_text_tokens(&t.parameters.to_string());
    }
    est
}

/// Estimated input tokens of a request.
pub fn estimate_tokens<'a>(
    messages: impl IntoIterator<Item = &'a Message>,
    tools: &[ToolSpec],
) -> u64 {
    estimate_breakdown(messages, tools).total()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpa_protocol::ImageUrl;

    #[test]
    fn text_rules() {
        assert_eq!(estimate_text_tokens(""), 0);
        assert_eq!(estimate_text_tokens("abcd"), 1);
        assert_eq!(estimate_text_tokens("abcde"), 2);
        assert_eq!(estimate_text_tokens("你好世界"), 4);
        assert_eq!(estimate_text_tokens("你好 abc"), 3);
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
                    image_url: ImageUrl {
                        url: "data:x".repeat(1000),
                    },
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
            }
        );
        assert_eq!(estimate_tokens(&messages, &tools), 6 + 6 + 11 + 85);
    }
}
