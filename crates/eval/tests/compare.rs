//! Comparing runs: rows per subject and scenario, false completions.

use mpa_eval::compare::{RunSummary, compare, markdown};
use serde_json::Value;
use serde_json::json;

fn report(label: Option<&str>, scenario: &str, passed: bool, status: &str) -> Value {
    json!({"scenario": scenario, "passed": passed, "evidence_kind": "live_model",
           "model": "m", "label": label, "model_calls": 4,
           "failure_codes": if passed { json!([]) } else { json!(["download_not_verified"]) },
           "answer": {"status": status}, "tokens": {"input": 100, "output": 10, "total": 110},
           "host_overhead_ms": 12.5, "oracle_ms": 0.4})
}

#[test]
fn rows_per_subject_and_scenario_with_false_completions() {
    let runs: Vec<RunSummary> = [
        report(Some("a"), "x", true, "completed"),
        report(Some("a"), "x", false, "completed"),
        report(None, "x", false, "blocked"),
    ]
    .iter()
    .filter_map(RunSummary::from_report)
    .collect();
    let c = compare(&["d".into()], &runs);
    assert_eq!(c.subjects, ["a", "m"]);
    let a = &c.rows[0];
    assert_eq!((a.runs, a.passed, a.false_completions), (2, 1, 1));
    assert_eq!(a.failure_codes["download_not_verified"], 1);
    assert_eq!(a.mean_input_tokens, Some(100.0));
    assert_eq!(c.rows[1].scenario, "all");
    assert_eq!(
        c.rows[2].false_completions, 0,
        "a blocked answer claims nothing"
    );
    let md = markdown(&c);
    assert!(md.contains("| a | `x` | 2 | 1/2 (50 %) | 1 |"), "{md}");
    assert!(RunSummary::from_report(&json!({"scenarios": []})).is_none());
}
