//! Session actors: idle reclamation reloads from the snapshot; shutdown refuses queued work; a
//! capped tool result reaches the evidence store in full.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_core::{Agent, AgentConfig, Capabilities, RegistryOptions, default_registry};
use mpa_protocol::{Actor, Event, TurnStatus};
use mpa_store::Store;
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

async fn agent(mock: &MockModelServer, idle: Duration) -> (tempfile::TempDir, Agent, Actor) {
    agent_with(mock, idle, |_| Capabilities::default()).await
}

/// An agent whose capabilities are built inside its data directory; diagnostic tools are on.
async fn agent_with(
    mock: &MockModelServer,
    idle: Duration,
    caps: impl FnOnce(&Path) -> Capabilities,
) -> (tempfile::TempDir, Agent, Actor) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let user = store.ensure_local_user("kim").await.unwrap();
    let actor = Actor {
        user_id: user.id,
        user_name: user.name,
        is_admin: false,
    };
    let mut cfg = AgentConfig::new(mpa_model::ModelConfig {
        base_url: mock.base_url.clone(),
        model: "gpt-4o".into(),
        ..Default::default()
    });
    cfg.session_idle = idle;
    let caps = caps(dir.path());
    let opts = RegistryOptions {
        diagnostic_tools: true,
    };
    let tools = default_registry(&opts, &caps);
    (dir, Agent::new(cfg, store, tools, caps).unwrap(), actor)
}

async fn finish(mut rx: tokio::sync::mpsc::UnboundedReceiver<Event>) -> (TurnStatus, Vec<Event>) {
    let mut seen = Vec::new();
    while let Some(ev) = rx.recv().await {
        if let Event::TurnEnded { status, .. } = ev {
            return (status, seen);
        }
        seen.push(ev);
    }
    panic!("no TurnEnded");
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_sessions_are_reclaimed_and_reloaded_from_their_snapshot() {
    let mock = MockModelServer::start().await;
    let (_dir, agent, actor) = agent(&mock, Duration::from_millis(200)).await;
    mock.push(MockReply::text("first answer"));
    let rx = agent
        .submit(&actor, "idle1", "test", "hello".into(), vec![])
        .await
        .unwrap();
    assert_eq!(finish(rx).await.0, TurnStatus::Completed);
    let live = agent.live("idle1").expect("live after its turn");
    // The idle actor ends on its own; wait for that end instead of sleeping past the timeout.
    tokio::time::timeout(Duration::from_secs(30), live.finished())
        .await
        .expect("reclaimed after idling");
    assert!(agent.live("idle1").is_none(), "reclaimed after idling");
    mock.push(MockReply::text("second answer"));
    let rx = agent
        .submit(&actor, "idle1", "test", "again".into(), vec![])
        .await
        .unwrap();
    assert_eq!(finish(rx).await.0, TurnStatus::Completed);
    let reqs = mock.requests();
    let msgs = reqs[1]["messages"].as_array().unwrap();
    // system + hello + first answer + again: the reloaded session kept its transcript.
    assert_eq!(msgs.len(), 4);
    assert_eq!(msgs[2]["content"], "first answer");
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_stops_the_turn_and_answers_queued_turns_without_running_them() {
    let mock = MockModelServer::start().await;
    let (_dir, agent, actor) = agent(&mock, Duration::from_secs(600)).await;
    mock.push(MockReply::text("never finishes").stall_after(1));
    let first = agent
        .submit(&actor, "sd", "test", "one".into(), vec![])
        .await
        .unwrap();
    let queued = agent
        .submit(&actor, "sd", "test", "two".into(), vec![])
        .await
        .unwrap();
    assert!(mock.wait_for_requests(1, Duration::from_secs(10)).await);
    agent.shutdown().await;
    assert_eq!(finish(first).await.0, TurnStatus::Stopped);
    let (status, events) = finish(queued).await;
    assert_eq!(status, TurnStatus::Stopped);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Error { code, .. } if code == "agent_manager_unavailable"))
    );
    assert_eq!(
        mock.requests().len(),
        1,
        "the queued turn never reached the model"
    );
    let chat = agent.chat_for(&actor, "sd").await.unwrap();
    assert_eq!(chat.agent_messages[0].text(), "one");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_capped_tool_result_is_captured_in_full_as_evidence() {
    let mock = MockModelServer::start().await;
    let (_dir, agent, actor) = agent_with(&mock, Duration::from_secs(600), |d| Capabilities {
        history: Some(mpa_history::History::new(mpa_history::HistoryConfig::new(
            d.join("history"),
        ))),
        ..Capabilities::default()
    })
    .await;
    let big = format!("{}zebraquartz", "filler ".repeat(12_000));
    mock.push(MockReply::tool_calls(&[(
        "e1",
        "test_echo",
        json!({ "text": big }),
    )]));
    mock.push(MockReply::text("done"));
    let rx = agent
        .submit(&actor, "cap1", "test", "echo it".into(), vec![])
        .await
        .unwrap();
    assert_eq!(finish(rx).await.0, TurnStatus::Completed);
    // The model saw only the capped preview...
    let reqs = mock.requests();
    let msgs = reqs[1]["messages"].as_array().unwrap();
    let tool = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    let shown = tool["content"].as_str().unwrap();
    assert!(shown.contains("tool_result_truncated"), "{shown:.200}");
    assert!(!shown.contains("zebraquartz"));
    // ...while the evidence holds the whole result.
    let hub = agent.services().caps.history.clone().unwrap();
    let found = mpa_core::history::search_json(
        &hub,
        &mpa_redact::UserKey::for_user(&actor.user_id),
        None,
        json!({"query": "zebraquartz", "role_filter": "tool"}),
    )
    .await;
    assert!(found.to_string().contains("cap1"), "{found}");
}
