//! The test doubles themselves: recorded fixtures, scripted replies as SSE and JSON, reading a
//! llama.cpp server's model list.

// From crates/test-support/src/llama.rs.
use mpa_test_support::*;
use serde_json::{Value, json};
use std::path::PathBuf;

#[test]
fn model_ids_from_plain_and_chunked_bodies() {
    let plain = r#"{"object":"list","data":[{"id":"/m/gemma.gguf","object":"model"}]}"#;
    assert_eq!(first_model_id(plain).as_deref(), Some("/m/gemma.gguf"));
    let chunked = format!("{:x}\r\n{plain}\r\n0\r\n\r\n", plain.len());
    assert_eq!(first_model_id(&chunked).as_deref(), Some("/m/gemma.gguf"));
    assert_eq!(first_model_id("nope"), None);
}

// From crates/test-support/src/reply.rs.

#[test]
fn pieces_split_on_char_boundaries() {
    assert_eq!(pieces("你好世界!", 2), vec!["你好世", "界!"]);
    assert!(pieces("", 3).is_empty());
}

#[test]
fn scripted_replies_render_as_json_completions_too() {
    let reply = MockReply::text_and_tool_calls("", &[("c", "f", json!({"a": 1}))]);
    let body: Value = serde_json::from_str(&reply.json_body().unwrap()).unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(body["choices"][0]["message"]["content"], Value::Null);
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"a":1}"#
    );
    assert_eq!(body["usage"]["total_tokens"], 15);
    let cut = MockReply::text("and then").finish_reason("length");
    let body: Value = serde_json::from_str(&cut.json_body().unwrap()).unwrap();
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert!(
        cut.frames()
            .iter()
            .any(|f| String::from_utf8_lossy(f).contains(r#""finish_reason":"length""#))
    );
    assert!(MockReply::empty_stream().frames().is_empty());
    assert!(MockReply::status(400, "{}").json_body().is_none());
}

#[test]
fn scripted_frames_are_sse_and_end_with_done() {
    for d in [Dialect::OpenAi, Dialect::NoIndex, Dialect::Reasoning] {
        let frames = MockReply::text_and_tool_calls("hello", &[("c", "f", json!({"a": 1}))])
            .dialect(d)
            .frames();
        assert!(frames.len() > 4);
        for f in &frames[..frames.len() - 1] {
            let s = String::from_utf8(f.clone()).unwrap();
            let payload = s.strip_prefix("data: ").unwrap().trim_end();
            serde_json::from_str::<Value>(payload).unwrap();
        }
        assert_eq!(frames.last().unwrap(), b"data: [DONE]\n\n");
    }
}

// From crates/test-support/src/fixtures.rs.

#[test]
fn fixtures_exist_and_split_losslessly() {
    for f in FIXTURES {
        // The runtime directory, not the compile-time one: a build cache shared between
        // checkouts can hold a binary compiled at another path.
        let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or(env!("CARGO_MANIFEST_DIR").into());
        let on_disk = PathBuf::from(dir)
            .join("fixtures")
            .join(format!("{}.sse", f.name));
        assert!(on_disk.is_file(), "{}", f.name);
        assert!(fixture_path(f.name).ends_with(format!("fixtures/{}.sse", f.name)));
        let frames = split_events(f.bytes);
        assert!(frames.len() > 3, "{}", f.name);
        assert_eq!(frames.concat(), f.bytes, "{}", f.name);
    }
    assert!(fixture("nope").is_none());
    for body in [LLAMACPP_OVERFLOW_400, LLAMACPP_CONTENT_NULL_500] {
        serde_json::from_str::<serde_json::Value>(body).unwrap();
    }
}

// From crates/test-support/src/mask.rs.

#[test]
fn mask_replaces_what_the_selector_reaches_and_nothing_else() {
    let v = json!({
        "pid": 41,
        "sessions": [{"pid": 1, "name": "a"}, {"pid": 2, "name": "b"}],
        "other": {"pid": 7}
    });
    let m = mask(&v, &[(".pid", "[pid]"), (".sessions[].pid", "[pid]")]);
    assert_eq!(
        m,
        json!({
            "pid": "[pid]",
            "sessions": [{"pid": "[pid]", "name": "a"}, {"pid": "[pid]", "name": "b"}],
            "other": {"pid": 7}
        })
    );
    // Paths that are absent or of another shape mask nothing.
    assert_eq!(mask(&v, &[(".missing.x", "?"), (".pid[]", "?")]), v);
    let upper = mask_with(&json!([{"m": "ab"}, {"m": 3}]), "[].m", |x| {
        x.as_str()
            .map_or(x.clone(), |s| Value::String(s.to_uppercase()))
    });
    assert_eq!(upper, json!([{"m": "AB"}, {"m": 3}]));
}
