//! Assembling tool calls from streamed fragments.

use mpa_model::FinishReason;
use mpa_model::assembly::*;
use mpa_model::chunk::FunctionDelta;
use mpa_model::chunk::{ChatChunk, ToolCallDelta};
use mpa_protocol::ToolCall;

fn d(
    index: Option<u32>,
    id: Option<&str>,
    name: Option<&str>,
    args: Option<&str>,
) -> ToolCallDelta {
    ToolCallDelta {
        index,
        id: id.map(Into::into),
        function: Some(FunctionDelta {
            name: name.map(Into::into),
            arguments: args.map(Into::into),
        }),
    }
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

fn run(deltas: &[ToolCallDelta]) -> Vec<ToolCall> {
    let mut a = ToolCallAssembler::new();
    for delta in deltas {
        a.push(delta);
    }
    a.finish()
}

#[test]
fn indexed_fragments_interleaved_sorted_by_index() {
    let got = run(&[
        d(Some(1), Some("b"), Some("g"), Some("")),
        d(Some(0), Some("a"), Some("f"), Some("{\"x\"")),
        d(Some(1), None, None, Some("{}")),
        d(Some(0), None, None, Some(":1}")),
    ]);
    assert_eq!(got, vec![call("a", "f", "{\"x\":1}"), call("b", "g", "{}")]);
}

#[test]
fn no_index_id_changes_start_new_calls() {
    let got = run(&[
        d(None, Some("a"), Some("f"), Some("{\"q\":")),
        d(None, None, None, Some("1}")),
        d(None, Some("b"), Some("g"), Some("{\"r\":2}")),
        d(None, Some("b"), Some("g"), None),
    ]);
    assert_eq!(
        got,
        vec![call("a", "f", "{\"q\":1}"), call("b", "g", "{\"r\":2}")]
    );
}

#[test]
fn unnumbered_anonymous_whole_calls_stay_apart() {
    let got = run(&[
        d(None, None, Some("f"), Some("{\"a\":1}")),
        d(None, None, Some("f"), Some("{\"a\":2}")),
        d(None, None, Some("g"), Some("{}")),
        d(None, None, Some("g"), None),
    ]);
    assert_eq!(
        got,
        vec![
            call("call_0", "f", "{\"a\":1}"),
            call("call_1", "f", "{\"a\":2}"),
            call("call_2", "g", "{}")
        ]
    );
    // A repeated name on continuation fragments still continues the call.
    let got = run(&[
        d(None, None, Some("f"), Some("{\"a\":")),
        d(None, None, Some("f"), Some("1}")),
    ]);
    assert_eq!(got, vec![call("call_0", "f", "{\"a\":1}")]);
}

#[test]
fn same_index_distinct_ids_are_distinct_calls() {
    let got = run(&[
        d(Some(0), Some("a"), Some("f"), Some("{}")),
        d(Some(0), Some("b"), Some("g"), Some("{\"k\":")),
        d(Some(0), None, None, Some("3}")),
    ]);
    assert_eq!(got, vec![call("a", "f", "{}"), call("b", "g", "{\"k\":3}")]);
}

#[test]
fn repeated_index_id_and_name_with_legacy_duplicate_assemble_once() {
    let chunk = |args: &str| -> ChatChunk {
        serde_json::from_value(serde_json::json!({"choices": [{"index": 0, "delta": {
            "role": null, "content": null,
            "function_call": {"name": "get_weather", "arguments": args},
            "tool_calls": [{"index": 0, "id": "call__0", "type": "function",
                "function": {"name": "get_weather", "arguments": args}}]}}]}))
        .unwrap()
    };
    let mut a = CompletionAssembler::new();
    for piece in ["{\"", "city", "\":", " \"", "Paris", "\"", " }", ""] {
        a.apply(&chunk(piece), &mut |_| {});
    }
    let c = a.finish();
    assert_eq!(
        c.tool_calls,
        vec![call("call__0", "get_weather", r#"{"city": "Paris" }"#)]
    );
}

#[test]
fn legacy_function_call_alone_is_a_tool_call() {
    let mut a = CompletionAssembler::new();
    for d in [
        serde_json::json!({"function_call": {"name": "f", "arguments": "{\"a\""}}),
        serde_json::json!({"function_call": {"arguments": ":1}"}}),
    ] {
        let chunk: ChatChunk =
            serde_json::from_value(serde_json::json!({"choices": [{"delta": d}]})).unwrap();
        a.apply(&chunk, &mut |_| {});
    }
    let finish: ChatChunk = serde_json::from_value(
        serde_json::json!({"choices": [{"delta": {}, "finish_reason": "function_call"}]}),
    )
    .unwrap();
    a.apply(&finish, &mut |_| {});
    let c = a.finish();
    assert_eq!(c.tool_calls, vec![call("call_0", "f", r#"{"a":1}"#)]);
    assert_eq!(c.finish_reason, Some(FinishReason::ToolCalls));
}

#[test]
fn a_call_cut_before_its_arguments_keeps_them_empty() {
    let mut a = CompletionAssembler::new();
    let chunks = [
        serde_json::json!({"choices": [{"delta": {"tool_calls": [
            {"index": 0, "id": "c", "function": {"name": "f", "arguments": ""}}]}}]}),
        serde_json::json!({"choices": [{"delta": {}, "finish_reason": "length"}]}),
    ];
    for c in chunks {
        a.apply(&serde_json::from_value(c).unwrap(), &mut |_| {});
    }
    let c = a.finish();
    assert_eq!(c.tool_calls, vec![call("c", "f", "")]);
    assert!(c.has_cut_off_tool_calls());
}

#[test]
fn missing_id_and_args_are_filled_and_empty_fragments_dropped() {
    let got = run(&[
        d(None, None, Some("f"), None),
        d(None, None, Some("f"), Some("")),
    ]);
    assert_eq!(got, vec![call("call_0", "f", "{}")]);
    assert!(run(&[d(Some(0), Some("x"), None, Some(""))]).is_empty());
}
