//! Injected faults: their JSON forms and which calls they select.

use mpa_eval::{CallView, Fault, FaultAction, FaultBook};
use serde_json::json;
use std::collections::BTreeMap;

fn view<'a>(op: &'a str, headers: &'a BTreeMap<String, String>) -> CallView<'a> {
    CallView {
        operation_id: op,
        headers,
        unknown_returned: false,
    }
}

#[test]
fn json_forms() {
    let f: Fault = serde_json::from_value(json!({
        "operation": "download.add", "action": {"kind": "drop"}, "nth": 1
    }))
    .unwrap();
    assert_eq!(f.operation, vec!["download.add"]);
    assert_eq!(f.action, FaultAction::Drop { after_effect: true });
    let f: Fault = serde_json::from_value(json!({
        "operation": ["download.tasks.active", "download.history.list"],
        "action": {"kind": "respond", "status": 503},
        "when": {"after_unknown": true}
    }))
    .unwrap();
    assert_eq!(f.operation.len(), 2);
    assert!(f.when.after_unknown);
    let bad = serde_json::from_value::<Fault>(json!({
        "operation": "x", "action": {"kind": "stall", "seconds": 3}
    }));
    assert!(bad.unwrap_err().to_string().contains("seconds"));
}

#[test]
fn nth_times_and_headers_select_calls() {
    let mut book = FaultBook::new(vec![
        serde_json::from_value(json!({
            "operation": "a", "action": {"kind": "respond", "status": 500}, "nth": 2
        }))
        .unwrap(),
        serde_json::from_value(json!({
            "operation": "b", "action": {"kind": "stall", "ms": 1}, "times": 1,
            "when": {"headers": {"X-MoviePilot-Agent-Source": "subagent"}}
        }))
        .unwrap(),
    ]);
    let none = BTreeMap::new();
    let sub = BTreeMap::from([(
        "x-moviepilot-agent-source".to_string(),
        "subagent".to_string(),
    )]);
    assert!(book.fire(&view("a", &none), false).is_empty());
    assert_eq!(book.fire(&view("a", &none), false).len(), 1);
    assert!(book.fire(&view("a", &none), false).is_empty());
    assert!(book.fire(&view("b", &none), false).is_empty());
    assert_eq!(book.fire(&view("b", &sub), false).len(), 1);
    assert!(book.fire(&view("b", &sub), false).is_empty());
    // Post-phase faults do not fire in the pre phase.
    assert!(book.fire(&view("a", &none), true).is_empty());
}
