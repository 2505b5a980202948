//! The request body in the OpenAI chat-completions shape.
//!
//! Only what the model may see goes out: host fields of [`Message`] (`outcome`, `metadata`, the
//! tool `name`) never do. Image parts are sent only on user messages; other roles send text.

use mpa_protocol::{Content, ContentPart, Message, Role, ToolCall, ToolSpec};
use serde::Serialize;

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    /// `None` serialises as `null`: an assistant message that only calls tools.
    content: Option<WireContent<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireContent<'a> {
    Text(std::borrow::Cow<'a, str>),
    Parts(&'a [ContentPart]),
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

fn text_content(content: &Content) -> std::borrow::Cow<'_, str> {
    match content {
        Content::Text(t) => std::borrow::Cow::Borrowed(t.as_str()),
        Content::Parts(_) => std::borrow::Cow::Owned(content.text()),
    }
}

fn wire_message(m: &Message) -> WireMessage<'_> {
    let content = match (m.role, &m.content) {
        (Role::User, Content::Parts(parts)) => Some(WireContent::Parts(parts)),
        (Role::Assistant, c) if !m.tool_calls.is_empty() && c.text().is_empty() => None,
        (_, c) => Some(WireContent::Text(text_content(c))),
    };
    let tool_calls = if m.role == Role::Assistant {
        m.tool_calls.iter().map(wire_tool_call).collect()
    } else {
        Vec::new()
    };
    let tool_call_id = if m.role == Role::Tool {
        Some(m.tool_call_id.as_deref().unwrap_or(""))
    } else {
        None
    };
    WireMessage {
        role: m.role.as_str(),
        content,
        tool_calls,
        tool_call_id,
    }
}

fn wire_tool_call(c: &ToolCall) -> WireToolCall<'_> {
    WireToolCall {
        id: &c.id,
        kind: "function",
        function: WireFunctionCall {
            name: &c.name,
            // Providers reject an empty string where a JSON object is due.
            arguments: if c.arguments.trim().is_empty() {
                "{}"
            } else {
                &c.arguments
            },
        },
    }
}

/// Serialises the request body.
pub fn request_body(
    model: &str,
    temperature: Option<f32>,
    messages: &[&Message],
    tools: &[ToolSpec],
) -> serde_json::Result<Vec<u8>> {
    let body = RequestBody {
        model,
        messages: messages.iter().map(|m| wire_message(m)).collect(),
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        tools: tools
            .iter()
            .map(|t| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.parameters,
                },
            })
            .collect(),
        temperature,
    };
    serde_json::to_vec(&body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpa_protocol::{ImageUrl, Outcome};
    use serde_json::json;

    #[test]
    fn body_shape() {
        let mut tool_msg = Message::tool("c1", "search", "found", Outcome::Succeeded);
        tool_msg
            .metadata
            .insert("secret_host_note".into(), json!(1));
        let messages = [
            Message::system("sys"),
            Message::user_parts(vec![
                ContentPart::Text {
                    text: "look".into(),
                },
                ContentPart::ImageUrl {
                    image_url: ImageUrl {
                        url: "data:image/png;base64,AAAA".into(),
                    },
                },
            ]),
            Message::assistant(
                "",
                vec![ToolCall {
                    id: "c1".into(),
                    name: "search".into(),
                    arguments: String::new(),
                }],
            ),
            tool_msg,
            Message::assistant("done", vec![]),
        ];
        let tools = vec![ToolSpec {
            name: "search".into(),
            description: "d".into(),
            parameters: json!({"type":"object"}),
        }];
        let body: serde_json::Value = serde_json::from_slice(
            &request_body("m", Some(0.5), &messages.iter().collect::<Vec<_>>(), &tools).unwrap(),
        )
        .unwrap();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "messages": [
                    {"role":"system","content":"sys"},
                    {"role":"user","content":[{"type":"text","text":"look"},
                        {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
                    {"role":"assistant","content":null,"tool_calls":[
                        {"id":"c1","type":"function","function":{"name":"search","arguments":"{}"}}]},
                    {"role":"tool","content":"found","tool_call_id":"c1"},
                    {"role":"assistant","content":"done"}
                ],
                "stream": true,
                "stream_options": {"include_usage": true},
                "tools": [{"type":"function","function":{"name":"search","description":"d","parameters":{"type":"object"}}}],
                "temperature": 0.5
            })
        );
    }
}
