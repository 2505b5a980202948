//! The request body in the OpenAI chat-completions shape.
//!
//! Only what the model may see goes out: host fields of [`Message`] (`outcome`, `metadata`, the
//! tool `name`) never do. Image parts are sent only on user messages; other roles send text.

use crate::{ChatRequest, ToolChoice};
use mpa_protocol::{Content, ContentPart, Message, Role, ToolCall};
use serde::Serialize;

/// How the output limit is spelled on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputLimitParam {
    /// `max_tokens`: llama.cpp, Ollama, vLLM, DeepSeek, most gateways, older OpenAI models.
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's reasoning models, which refuse `max_tokens`.
    MaxCompletionTokens,
}

impl OutputLimitParam {
    pub fn as_str(self) -> &'static str {
        match self {
            OutputLimitParam::MaxTokens => "max_tokens",
            OutputLimitParam::MaxCompletionTokens => "max_completion_tokens",
        }
    }

    pub(crate) fn other(self) -> Self {
        match self {
            OutputLimitParam::MaxTokens => OutputLimitParam::MaxCompletionTokens,
            OutputLimitParam::MaxCompletionTokens => OutputLimitParam::MaxTokens,
        }
    }
}

/// Everything of a request body that is not the conversation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BodyOptions<'a> {
    pub model: &'a str,
    pub temperature: Option<f32>,
    /// `None`: no limit is sent.
    pub max_output_tokens: Option<u32>,
    pub output_limit_param: OutputLimitParam,
    /// `false`: one `chat.completion` JSON answer instead of an event stream.
    pub stream: bool,
}

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    /// Only with `stream: true`: OpenAI rejects it otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireToolChoice<'a> {
    Mode(&'static str),
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        function: WireFunctionName<'a>,
    },
}

#[derive(Serialize)]
struct WireFunctionName<'a> {
    name: &'a str,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    /// Always present: an assistant message that only calls tools sends `""`. llama-cpp-python
    /// answers `null` with HTTP 500 (its schema wants a string) and crashes in its chat template
    /// when the key is missing; every other common server takes `""`.
    content: WireContent<'a>,
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
        (Role::User, Content::Parts(parts)) => WireContent::Parts(parts),
        (_, c) => WireContent::Text(text_content(c)),
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

fn wire_tool_choice(choice: Option<&ToolChoice>) -> WireToolChoice<'_> {
    match choice {
        None | Some(ToolChoice::Auto) => WireToolChoice::Mode("auto"),
        Some(ToolChoice::None) => WireToolChoice::Mode("none"),
        Some(ToolChoice::Required) => WireToolChoice::Mode("required"),
        Some(ToolChoice::Function(name)) => WireToolChoice::Function {
            kind: "function",
            function: WireFunctionName { name },
        },
    }
}

/// Serialises the request body. `tool_choice` goes out only with tools (OpenAI rejects it
/// otherwise), and then always: `auto` unless the request names another choice.
pub fn request_body(opts: &BodyOptions<'_>, req: &ChatRequest<'_>) -> serde_json::Result<Vec<u8>> {
    let limit = |param: OutputLimitParam| {
        opts.max_output_tokens
            .filter(|_| opts.output_limit_param == param)
    };
    let body = RequestBody {
        model: opts.model,
        messages: req.messages.iter().map(|m| wire_message(m)).collect(),
        stream: opts.stream,
        stream_options: opts.stream.then_some(StreamOptions {
            include_usage: true,
        }),
        tools: req
            .tools
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
        tool_choice: (!req.tools.is_empty()).then(|| wire_tool_choice(req.tool_choice.as_ref())),
        temperature: opts.temperature,
        max_tokens: limit(OutputLimitParam::MaxTokens),
        max_completion_tokens: limit(OutputLimitParam::MaxCompletionTokens),
    };
    serde_json::to_vec(&body)
}
