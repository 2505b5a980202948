//! Scripted trajectories: the MoviePilot form, limits, placeholders.

use mpa_eval::trajectory::{DEFAULT_SUMMARY, Trajectory, resolve};
use serde_json::{Value, json};

#[test]
fn moviepilot_form_and_limits() {
    let t = Trajectory::from_json(
        r#"{"calls": [{"operation_id": "site.list", "query": {"status": "active"}}],
            "final": {"status": "completed"}}"#,
        "t",
    )
    .unwrap();
    let s = t.script().unwrap();
    assert_eq!(s.responses.len(), 1);
    assert_eq!(
        s.responses[0].calls[0].arguments["query"]["status"],
        "active"
    );
    assert_eq!(s.final_text, r#"{"status":"completed"}"#);
    let many: Vec<Value> = (0..33)
        .map(|_| json!({"operation_id": "site.list"}))
        .collect();
    let text = json!({"calls": many, "final": {}}).to_string();
    assert!(
        Trajectory::from_json(&text, "t")
            .unwrap_err()
            .contains("at most 32")
    );
    assert!(Trajectory::from_json(r#"{"calls": []}"#, "t").is_err());
    assert!(Trajectory::from_json(r#"{"final": {}, "extra": 1}"#, "t").is_err());
}

#[test]
fn the_scripted_window_and_summary_are_checked() {
    let t = Trajectory::from_json(
        r#"{"final": {}, "context_window_tokens": 16000, "summary": "pages 1-3 read"}"#,
        "t",
    )
    .unwrap();
    assert_eq!(t.context_window_tokens, Some(16_000));
    assert_eq!(t.script().unwrap().summary, "pages 1-3 read");
    let plain = Trajectory::from_json(r#"{"final": {}}"#, "t").unwrap();
    assert_eq!(plain.script().unwrap().summary, DEFAULT_SUMMARY);
    for bad in [
        r#"{"final": {}, "context_window_tokens": 16500}"#,
        r#"{"final": {}, "context_window_tokens": 1000}"#,
        r#"{"final": {}, "summary": " "}"#,
    ] {
        assert!(Trajectory::from_json(bad, "t").is_err(), "{bad}");
    }
}

#[test]
fn placeholders_take_the_latest_result() {
    let results = vec![
        json!({"session_id": "term_old"}),
        json!({"data": {"session_id": "term_new"}}),
    ];
    let args = json!({"action": "read", "session_id": "{{session_id}}", "n": ["{{missing}}"]});
    let out = resolve(&args, &results);
    assert_eq!(out["session_id"], "term_new");
    assert_eq!(out["n"][0], "{{missing}}");
}
