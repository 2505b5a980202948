//! Streamed chunks: nulls and unknown fields tolerated, usage, error shapes.

use mpa_model::chunk::*;

#[test]
fn tolerates_nulls_unknown_fields_and_object_arguments() {
    let c: ChatChunk = serde_json::from_str(
        r#"{"id":"x","weird":{"a":1},"choices":[{"delta":{"content":null,"tool_calls":[
            {"function":{"name":"f","arguments":{"a":1}}}],"extra":true},"finish_reason":null}],
            "usage":null}"#,
    )
    .unwrap();
    let d = c.choices[0].delta.as_ref().unwrap();
    assert_eq!(d.content, None);
    assert_eq!(
        d.tool_calls[0]
            .function
            .as_ref()
            .unwrap()
            .arguments
            .as_deref(),
        Some(r#"{"a":1}"#)
    );
    let c: ChatChunk = serde_json::from_str(r#"{"choices":null}"#).unwrap();
    assert!(c.choices.is_empty());
}

#[test]
fn usage_mapping() {
    let u: WireUsage = serde_json::from_str(
        r#"{"prompt_tokens":10,"completion_tokens":5,"prompt_cache_hit_tokens":4}"#,
    )
    .unwrap();
    assert_eq!(
        u.to_usage(),
        mpa_protocol::Usage {
            input_tokens: 10,
            output_tokens: 5,
            total_tokens: 15,
            cache_read_tokens: 4,
            cache_write_tokens: 0,
            estimated: false,
        }
    );
}

#[test]
fn error_shapes() {
    let e: ChatChunk =
        serde_json::from_str(r#"{"error":{"message":"m","type":"t","code":502}}"#).unwrap();
    let e = e.error.unwrap();
    assert_eq!((e.message.as_str(), e.status), ("m", Some(502)));
    let e: ChatChunk = serde_json::from_str(r#"{"error":"plain"}"#).unwrap();
    assert_eq!(e.error.unwrap().message, "plain");
}
