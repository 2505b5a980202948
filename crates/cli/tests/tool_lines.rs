//! `mpagent chat` text output: every tool line names its outcome in the user's language (from
//! the locale), and an unknown write reads differently from a success.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's panic is its failure report"
)]

use mpa_test_support::{MockModelServer, MockReply};
use serde_json::json;
use std::time::Duration;

use crate::common;

/// One turn with four tool results: succeeded, failed, pending and unknown.
async fn chat_lines(lang: &str) -> Vec<String> {
    let mock = MockModelServer::start().await;
    mock.push(MockReply::tool_calls(&[
        ("c_ok", "test_result", json!({"content": "all good"})),
        (
            "c_fail",
            "test_result",
            json!({"content": "it broke", "is_error": true}),
        ),
        (
            "c_pending",
            "test_result",
            json!({"content": {"task_id": "t1", "status": "queued", "message": "queued for later"}}),
        ),
        (
            "c_unknown",
            "test_result",
            json!({"content": {"execution_outcome": "unknown", "message": "receipt lost"}}),
        ),
    ]));
    mock.push(MockReply::text("Finished."));
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = common::mpagent(dir.path(), &mock);
    cmd.env("LANG", lang).args(["chat", "run the four tools"]);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("mpagent chat hung")
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('['))
        .filter(|l| !l.ends_with("running") && !l.ends_with("进行中"))
        .map(str::to_string)
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_lines_name_the_outcome_in_english() {
    let lines = chat_lines("en_US.UTF-8").await;
    assert_eq!(
        sorted(lines),
        sorted(vec![
            "[tool] ✓ test_result succeeded: all good".to_string(),
            "[tool] ✗ test_result failed: it broke".to_string(),
            "[tool] … test_result pending (submitted, not finished yet): queued for later".to_string(),
            "[tool] ? test_result UNKNOWN (may or may not have happened; verify before retrying): receipt lost"
                .to_string(),
        ])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_lines_name_the_outcome_in_chinese_under_a_zh_locale() {
    let lines = chat_lines("zh_CN.UTF-8").await;
    assert_eq!(
        sorted(lines),
        sorted(vec![
            "[工具] ✓ test_result 成功：all good".to_string(),
            "[工具] ✗ test_result 失败：it broke".to_string(),
            "[工具] … test_result 已提交（尚未完成）：queued for later".to_string(),
            "[工具] ? test_result 结果未知（可能已生效，重试前请先核实）：receipt lost".to_string(),
        ])
    );
}

/// `update_plan` prints the plan as a compact block (objective, one line per step with its
/// status and evidence) in the user's language.
#[tokio::test(flavor = "multi_thread")]
async fn a_plan_update_prints_a_compact_plan_block() {
    for (lang, header, done, doing) in [
        (
            "en_US.UTF-8",
            "[plan] Find the missing episode (step states as the model reports them)",
            "  ✓ Search the sites (done) — 2 results",
            "  ▸ Start the download (in progress)",
        ),
        (
            "zh_CN.UTF-8",
            "[计划] Find the missing episode（步骤状态为模型自述）",
            "  ✓ Search the sites (已完成) — 2 results",
            "  ▸ Start the download (进行中)",
        ),
    ] {
        let mock = MockModelServer::start().await;
        mock.push(MockReply::tool_calls(&[(
            "p1",
            "update_plan",
            json!({"objective": "Find the missing episode", "steps": [
                {"step": "Search the sites", "status": "completed", "evidence": "2 results"},
                {"step": "Start the download", "status": "in_progress"}
            ]}),
        )]));
        mock.push(MockReply::text("Working on it."));
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = common::mpagent(dir.path(), &mock);
        cmd.env("LANG", lang).args(["chat", "get S01E03"]);
        let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
            .await
            .expect("mpagent chat hung")
            .unwrap();
        assert!(out.status.success());
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        let at = lines
            .iter()
            .position(|l| *l == header)
            .unwrap_or_else(|| panic!("no plan header in {stdout}"));
        assert_eq!(lines[at + 1..at + 3], [done, doing], "{stdout}");
    }
}
