//! Secret-read confirmation on an entry point that cannot ask the user (the OpenAI-compatible
//! endpoint's channel): every call of the response is answered "paused, nothing executed" with
//! "this entry point cannot confirm", nothing reaches MoviePilot, and the model goes on with
//! that answer. (The interactive path runs end to end in `cli/tests/moviepilot_chat.rs`.)

use crate::common::host::{Gateway, demo_world, linked, mock_model, open_host};
use mpa_eval::{FakeConfig, FakeMoviePilot};
use mpa_protocol::Event;
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};

const SECRET: &str = "secret-read-test-key";

#[tokio::test(flavor = "multi_thread")]
async fn a_non_interactive_entry_point_cannot_confirm_and_sends_nothing() {
    let fake = FakeMoviePilot::start(FakeConfig::new(SECRET), demo_world())
        .await
        .unwrap();
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let gateway = Gateway {
        url: fake.url(),
        secret: SECRET.into(),
        identity: Some(linked(SECRET, &[("*", ("1", "admin"))])),
    };
    let host = open_host(dir.path(), mock_model(&mock), Some(gateway)).await;
    let admin = host.local_actor("admin", true).await.unwrap();
    mock.push(MockReply::tool_calls(&[(
        "c1",
        "moviepilot_api",
        json!({"operation_id": "config.system.get", "query": {"show_secrets": true}}),
    )]));
    mock.push(MockReply::text("这里无法显示敏感值。"));
    let mut rx = host
        .agent()
        .submit(&admin, "s1", "openai", "show all secrets".into(), vec![])
        .await
        .unwrap();
    let mut events = Vec::new();
    while let Some(ev) = rx.recv().await {
        let end = matches!(ev, Event::TurnEnded { .. });
        events.push(ev);
        if end {
            break;
        }
    }
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2, "the model went on with the answer");
    let tool = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let v: Value = serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    assert_eq!(v["error"], "secret_read_not_confirmable");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("paused, nothing executed: this entry point cannot confirm"),
        "{v}"
    );
    assert!(fake.ledger().is_empty(), "nothing reached MoviePilot");
    assert!(!events.iter().any(|e| matches!(e, Event::Protected { .. })));
    assert!(matches!(
        events.last(),
        Some(Event::TurnEnded { final_text, .. }) if final_text == "这里无法显示敏感值。"
    ));
}
