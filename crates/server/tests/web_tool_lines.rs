//! The web page's tool lines show the outcome word in the page's language, and an unknown write
//! looks different from a success: `tests/browser/tool_lines.mjs` renders them from the real
//! `app.js` in Node with a minimal DOM (no browser needed), as does the history of a compacted
//! chat (every earlier line, then the marker where the model's context was summarised), and a
//! turn's host stop state (blocked, waiting, unknown, partial) as a small label. The
//! Chromium test in `crates/cli/tests/serve_e2e.rs` checks the same lines on the live page.

#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs `tests/browser/tool_lines.mjs` against the real `app.js`; `None` when node is absent
/// (skipped with a notice; a failure under `MPA_REQUIRE_ALL_TESTS=1`).
fn page_report() -> Option<Value> {
    let node_runs = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !mpa_test_support::external_program("node", node_runs) {
        return None;
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("node")
        .arg(manifest.join("tests/browser/tool_lines.mjs"))
        .env("MPA_WEB_DIR", manifest.join("web"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "no report: {stdout} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert_eq!(report["ok"], true, "{report:#}");
    assert!(out.status.success());
    Some(report)
}

#[test]
fn tool_lines_show_the_outcome_word_in_english_and_chinese_and_unknown_is_not_a_success() {
    let Some(report) = page_report() else {
        return;
    };
    let line = |k: &str| report["lines"][k].clone();
    assert_eq!(line("en/unknown")["icon"], "?");
    assert_eq!(line("en/succeeded")["icon"], "✓");
    assert!(
        line("zh/unknown")["word"]
            .as_str()
            .unwrap()
            .starts_with("结果未知")
    );
    assert_eq!(line("zh/succeeded")["word"], "成功");
    assert_eq!(
        line("en/unknown")["className"],
        "tool error outcome-unknown"
    );
}

#[test]
fn a_compacted_chat_shows_every_earlier_line_and_a_marker_where_the_model_got_a_summary() {
    let Some(report) = page_report() else {
        return;
    };
    for lang in ["en", "zh"] {
        let rows = report["compacted"][lang].as_array().unwrap();
        let classes: Vec<&str> = rows
            .iter()
            .map(|r| r["className"].as_str().unwrap())
            .collect();
        assert_eq!(
            classes,
            [
                "msg user",
                "msg assistant",
                "tool done outcome-succeeded",
                "context-marker",
                "msg user",
                "msg assistant"
            ],
            "{lang}"
        );
        assert!(rows[3]["text"].as_str().unwrap().contains("pages 1-4 read"));
    }
}

#[test]
fn host_stop_states_are_small_labels_in_english_and_chinese_not_verdicts() {
    let Some(report) = page_report() else {
        return;
    };
    for lang in ["en", "zh"] {
        let rows = report["turnStatus"][lang].as_array().unwrap();
        let labelled: Vec<&str> = rows
            .iter()
            .filter_map(|r| r["labels"][0]["status"].as_str())
            .collect();
        assert_eq!(labelled, ["unknown", "blocked"], "{lang}");
    }
}
