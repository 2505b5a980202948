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
