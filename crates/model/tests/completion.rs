//! Completions: finish reasons across dialects, argument statuses, truncation.

use mpa_model::completion::*;
use mpa_protocol::ToolCall;

#[test]
fn finish_reasons_map_dialects() {
    for (wire, want) in [
        ("stop", FinishReason::Stop),
        ("end_turn", FinishReason::Stop),
        ("length", FinishReason::Length),
        ("MAX_TOKENS", FinishReason::Length),
        ("tool_calls", FinishReason::ToolCalls),
        ("function_call", FinishReason::ToolCalls),
        ("content_filter", FinishReason::ContentFilter),
        ("SAFETY", FinishReason::ContentFilter),
        ("abort", FinishReason::Other("abort".into())),
    ] {
        assert_eq!(FinishReason::from_wire(wire), want, "{wire}");
    }
    assert_eq!(FinishReason::Length.to_string(), "length");
    assert_eq!(FinishReason::Other("abort".into()).as_str(), "abort");
}

#[test]
fn argument_statuses() {
    use ArgumentsStatus::*;
    for (args, want) in [
        (r#"{"city": "Paris" }"#, Complete),
        ("{}", Complete),
        (" {\"a\":[1,2]}\n", Complete),
        ("", CutOff),
        ("   ", CutOff),
        (r#"{"objective": "user", "steps": [{"step": "add"#, CutOff),
        (r#"{"a":1"#, CutOff),
        ("{", CutOff),
        (r#"{"a":1}}"#, Invalid),
        (r#"{"a" 1}"#, Invalid),
        ("[1,2]", Invalid),
        (r#""text""#, Invalid),
    ] {
        assert_eq!(arguments_status(args), want, "{args:?}");
    }
}

#[test]
fn truncation_and_empty_answers() {
    let call = |args: &str| ToolCall {
        id: "c".into(),
        name: "f".into(),
        arguments: args.into(),
    };
    let whole = Completion {
        tool_calls: vec![call("{}")],
        finish_reason: Some(FinishReason::ToolCalls),
        ..Completion::default()
    };
    assert!(!whole.is_truncated());
    assert!(!whole.is_empty_answer());
    // llama.cpp: "tool_calls" although the arguments stop mid-string.
    let cut = Completion {
        tool_calls: vec![call("{}"), call(r#"{"q": "Du"#)],
        finish_reason: Some(FinishReason::ToolCalls),
        ..Completion::default()
    };
    assert!(cut.is_truncated());
    assert_eq!(
        cut.tool_call_statuses().map(|(_, s)| s).collect::<Vec<_>>(),
        vec![ArgumentsStatus::Complete, ArgumentsStatus::CutOff]
    );
    let long_text = Completion {
        content: "and then".into(),
        finish_reason: Some(FinishReason::Length),
        ..Completion::default()
    };
    assert!(long_text.is_truncated());
    let thought_only = Completion {
        reasoning: "hmm".into(),
        content: " \n".into(),
        finish_reason: Some(FinishReason::Stop),
        ..Completion::default()
    };
    assert!(thought_only.is_empty_answer());
}
