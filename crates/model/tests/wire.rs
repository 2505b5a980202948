//! The request body on the wire: its shape, tool choice, the output-limit spelling.

#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_model::wire::*;
use mpa_model::{ChatRequest, ToolChoice};
use mpa_protocol::{ContentPart, Message, ToolCall};
use mpa_protocol::{ImageUrl, Outcome, ToolSpec};
use serde_json::{Value, json};

fn opts(stream: bool) -> BodyOptions<'static> {
    BodyOptions {
        model: "m",
        temperature: Some(0.5),
        max_output_tokens: Some(4096),
        output_limit_param: OutputLimitParam::MaxTokens,
        stream,
    }
}

fn body(opts: &BodyOptions<'_>, req: &ChatRequest<'_>) -> Value {
    serde_json::from_slice(&request_body(opts, req).unwrap()).unwrap()
}

fn search_tool() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "search".into(),
        description: "d".into(),
        parameters: json!({"type":"object"}),
    }]
}

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
                image_url: ImageUrl::new("data:image/png;base64,AAAA"),
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
    let tools = search_tool();
    assert_eq!(
        body(&opts(true), &ChatRequest::new(&messages, &tools)),
        json!({
            "model": "m",
            "messages": [
                {"role":"system","content":"sys"},
                {"role":"user","content":[{"type":"text","text":"look"},
                    {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
                {"role":"assistant","content":"","tool_calls":[
                    {"id":"c1","type":"function","function":{"name":"search","arguments":"{}"}}]},
                {"role":"tool","content":"found","tool_call_id":"c1"},
                {"role":"assistant","content":"done"}
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "tools": [{"type":"function","function":{"name":"search","description":"d","parameters":{"type":"object"}}}],
            "tool_choice": "auto",
            "temperature": 0.5,
            "max_tokens": 4096
        })
    );
}

#[test]
fn tool_choice_only_with_tools_and_forced_function() {
    let messages = [Message::user("hi")];
    let tools = search_tool();
    let none = body(&opts(true), &ChatRequest::new(&messages, &[]));
    assert!(none.get("tool_choice").is_none(), "{none}");
    assert!(none.get("tools").is_none(), "{none}");
    let forced =
        ChatRequest::new(&messages, &tools).with_tool_choice(ToolChoice::Function("search".into()));
    assert_eq!(
        body(&opts(true), &forced)["tool_choice"],
        json!({"type": "function", "function": {"name": "search"}})
    );
    for (choice, wire) in [
        (ToolChoice::Auto, "auto"),
        (ToolChoice::None, "none"),
        (ToolChoice::Required, "required"),
    ] {
        let req = ChatRequest::new(&messages, &tools).with_tool_choice(choice);
        assert_eq!(body(&opts(true), &req)["tool_choice"], json!(wire));
    }
    // A forced choice without tools would be rejected: it is not sent.
    let req = ChatRequest::new(&messages, &[]).with_tool_choice(ToolChoice::Required);
    assert!(body(&opts(true), &req).get("tool_choice").is_none());
}

#[test]
fn output_limit_spelling_and_non_streamed_bodies() {
    let messages = [Message::user("hi")];
    let req = ChatRequest::new(&messages, &[]);
    let reasoning = BodyOptions {
        output_limit_param: OutputLimitParam::MaxCompletionTokens,
        max_output_tokens: Some(100_000),
        ..opts(false)
    };
    let b = body(&reasoning, &req);
    assert_eq!(b["max_completion_tokens"], json!(100_000));
    assert!(b.get("max_tokens").is_none(), "{b}");
    assert_eq!(b["stream"], json!(false));
    assert!(b.get("stream_options").is_none(), "{b}");
    let unlimited = BodyOptions {
        max_output_tokens: None,
        ..opts(true)
    };
    let b = body(&unlimited, &req);
    assert!(b.get("max_tokens").is_none() && b.get("max_completion_tokens").is_none());
}
