//! An honest turn status on every surface (issue 27): a turn whose only write ended `unknown`
//! says `unknown` in the SSE `done` frame, the session detail (with its display line), the
//! session list and the OpenAI endpoint.

use crate::common::{Env, Frames, types};
use mpa_test_support::MockReply;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

/// A command the tool timeout cuts off: it may or may not have done its work.
fn cut_off_command(id: &str) -> MockReply {
    MockReply::tool_calls(&[(
        id,
        "execute_command",
        json!({"action": "run", "command": "sleep 5", "timeout": 60}),
    )])
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_whose_only_write_ended_unknown_is_unknown_everywhere() {
    let env = Env::start_agent(|c| c.tool_timeout = Some(Duration::from_secs(1))).await;
    let token = env.user("root", "password", true).await;
    env.mock.push(cut_off_command("run"));
    env.mock.push(MockReply::text("I ran the cleanup."));
    let frames = Frames::new(
        env.stream(&token, json!({"text": "clean up", "session_id": "s-unk"}))
            .await,
    )
    .all()
    .await;
    assert_eq!(
        types(&frames),
        ["start", "tool:running", "tool:error", "delta", "done"]
    );
    assert_eq!(frames[2]["outcome"], "unknown");
    assert_eq!(frames.last().unwrap()["status"], "unknown");

    let detail = env.wait_idle(&token, "s-unk").await;
    assert_eq!(detail["turn_status"], "unknown");
    let shown = detail["display_messages"].as_array().unwrap();
    assert_eq!(shown.last().unwrap()["turn_status"], "unknown");
    let (s, list) = env.get(&token, "/api/v1/agent/sessions").await;
    assert_eq!(s, StatusCode::OK);
    let row = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["session_id"] == "s-unk")
        .unwrap()
        .clone();
    assert_eq!(row["turn_status"], "unknown");

    // The OpenAI endpoint ends with its own finish reason and says the host's status beside it.
    env.mock.push(cut_off_command("run2"));
    env.mock.push(MockReply::text("Done."));
    let r = env
        .http
        .post(env.url("/v1/chat/completions"))
        .bearer_auth(&token)
        .json(&json!({"user": "conv-unk", "messages": [{"role": "user", "content": "clean up"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["turn_status"], "unknown");
    env.shutdown().await;
}
