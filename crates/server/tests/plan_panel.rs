//! The plan on the web stream and in the session detail (issue 29 item 2): `update_plan` reaches
//! the page as a `plan` frame with objective, steps, status and evidence, and a reload restores
//! it from the session detail; the `done` frame carries the turn's token usage.

use crate::common::{Env, Frames};
use mpa_test_support::MockReply;
use serde_json::json;

fn plan_args() -> serde_json::Value {
    json!({
        "objective": "Find the missing episode",
        "steps": [
            {"step": "Search the sites", "status": "completed", "evidence": "2 results"},
            {"step": "Start the download", "status": "in_progress"}
        ]
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_updated_reaches_the_stream_and_the_session_detail() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    env.mock
        .push(MockReply::tool_calls(&[("p1", "update_plan", plan_args())]).usage(100, 7));
    env.mock
        .push(MockReply::text("Working on it.").usage(120, 5));
    let frames = Frames::new(
        env.stream(
            &token,
            json!({"text": "get S01E03", "session_id": "plan-1"}),
        )
        .await,
    )
    .all()
    .await;
    let plan = frames
        .iter()
        .find(|f| f["type"] == "plan")
        .unwrap_or_else(|| panic!("no plan frame: {frames:?}"));
    assert_eq!(plan["plan"]["objective"], "Find the missing episode");
    assert_eq!(plan["plan"]["steps"][0]["status"], "completed");
    assert_eq!(plan["plan"]["steps"][0]["evidence"], "2 results");
    assert_eq!(plan["plan"]["steps"][1]["step"], "Start the download");
    let done = frames.last().unwrap();
    assert_eq!(done["type"], "done");
    assert_eq!(done["usage"]["input_tokens"], 220, "{done}");
    assert_eq!(done["usage"]["output_tokens"], 12, "{done}");

    let detail = env.wait_idle(&token, "plan-1").await;
    assert_eq!(detail["plan"], plan["plan"], "{detail}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_without_a_plan_has_a_null_plan() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    env.mock.push(MockReply::text("Hi."));
    Frames::new(
        env.stream(&token, json!({"text": "hello", "session_id": "plan-0"}))
            .await,
    )
    .all()
    .await;
    let detail = env.wait_idle(&token, "plan-0").await;
    assert!(detail["plan"].is_null(), "{detail}");
    env.shutdown().await;
}

/// Tool lines people can read (issue 29 item 3): the stream's tool frames and the saved display
/// lines carry the same host-made detail — the arguments, a result preview and a one-line
/// summary in English and Chinese — so a reload shows the line the stream did.
#[tokio::test(flavor = "multi_thread")]
async fn tool_frames_and_saved_lines_carry_arguments_preview_and_a_summary_in_both_languages() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    env.mock
        .push(MockReply::tool_calls(&[("p1", "update_plan", plan_args())]));
    env.mock.push(MockReply::text("Working on it."));
    let frames = Frames::new(
        env.stream(&token, json!({"text": "plan it", "session_id": "line-1"}))
            .await,
    )
    .all()
    .await;
    let tool = |status: &str| {
        frames
            .iter()
            .find(|f| f["type"] == "tool" && f["status"] == status)
            .unwrap_or_else(|| panic!("no {status} tool frame: {frames:?}"))
            .clone()
    };
    let running = tool("running");
    assert_eq!(
        running["arguments"]["objective"], "Find the missing episode",
        "{running}"
    );
    assert!(running.get("preview").is_none(), "{running}");
    let done = tool("done");
    assert_eq!(done["arguments"], running["arguments"]);
    assert!(!done["preview"].as_str().unwrap().is_empty(), "{done}");
    let en = done["summary_i18n"]["en"].as_str().unwrap();
    assert!(!en.is_empty(), "{done}");
    assert!(done["summary_i18n"]["zh"].is_string(), "{done}");

    let detail = env.wait_idle(&token, "line-1").await;
    let saved = detail["display_messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("no tool line: {detail}"))
        .clone();
    assert_eq!(saved["arguments"], done["arguments"], "{saved}");
    assert_eq!(saved["preview"], done["preview"], "{saved}");
    assert_eq!(saved["summary_i18n"], done["summary_i18n"], "{saved}");
    env.shutdown().await;
}
