//! Session actors: idle reclamation reloads from the snapshot; shutdown refuses queued work; a
//! capped tool result reaches the evidence store in full.

use crate::common::host::TestHost;
use mpa_core::capability::Recall;
use mpa_core::{Agent, Capabilities};
use mpa_protocol::{Actor, Event, TurnStatus};
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
    caps: impl FnOnce(&Path) -> Capabilities + 'static,
) -> (tempfile::TempDir, Agent, Actor) {
    let h = TestHost::builder(mock, "gpt-4o")
        .model(|m| m.max_retries = mpa_model::ModelConfig::default().max_retries)
        .user("kim")
        .config(move |c| c.session_idle = idle)
        .caps(caps)
        .build()
        .await;
    (h.dir, h.agent, h.actor)
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
    let (_dir, agent, actor) = agent_with(&mock, Duration::from_secs(600), |d| {
        Capabilities::default().with(Recall::new(mpa_history::History::new(
            mpa_history::HistoryConfig::new(d.join("history")),
        )))
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
    let hub = agent.services().caps.history().cloned().unwrap();
    let found = mpa_core::history::search_json(
        &hub,
        &mpa_redact::UserKey::for_user(&actor.user_id),
        None,
        json!({"query": "zebraquartz", "role_filter": "tool"}),
    )
    .await;
    assert!(found.to_string().contains("cap1"), "{found}");
}

#[tokio::test(flavor = "multi_thread")]
async fn closed_session_handles_are_dropped_when_the_actor_ends() {
    let mock = MockModelServer::start().await;
    let (_dir, agent, actor) = agent(&mock, Duration::from_millis(100)).await;
    mock.push(MockReply::text("hi"));
    let rx = agent
        .submit(&actor, "gone", "test", "hello".into(), vec![])
        .await
        .unwrap();
    assert_eq!(finish(rx).await.0, TurnStatus::Completed);
    let live = agent.live("gone").unwrap();
    assert_eq!(agent.live_sessions(), 1);
    tokio::time::timeout(Duration::from_secs(30), live.finished())
        .await
        .expect("reclaimed after idling");
    // Nobody looked the session up since: the agent forgot the ended actor on its own.
    assert_eq!(agent.live_sessions(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn close_is_never_dropped_when_the_queue_is_full() {
    let mock = MockModelServer::start().await;
    let h = TestHost::builder(&mock, "gpt-4o")
        .user("kim")
        .config(|c| c.queue_capacity = 1)
        .build()
        .await;
    let (agent, actor) = (&h.agent, &h.actor);
    mock.push(MockReply::text("first").stall_after(1));
    mock.push(MockReply::text("second"));
    let first = agent
        .submit(actor, "full", "test", "one".into(), vec![])
        .await
        .unwrap();
    assert!(mock.wait_for_requests(1, Duration::from_secs(10)).await);
    let second = agent
        .submit(actor, "full", "test", "two".into(), vec![])
        .await
        .unwrap();
    let refused = agent
        .submit(actor, "full", "test", "three".into(), vec![])
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "agent_manager_queue_full");
    // The queue is full, yet the close is not lost: the queued turn is answered (the stop
    // discards it, spec runtime.md §2.7), then the actor ends.
    let handle = agent.live("full").unwrap();
    handle.send(actor, mpa_protocol::Op::Close).unwrap();
    handle.stop();
    assert_eq!(finish(first).await.0, TurnStatus::Stopped);
    let (status, events) = finish(second).await;
    assert_eq!(status, TurnStatus::Stopped);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Error { code, .. } if code == "discarded_by_stop"))
    );
    tokio::time::timeout(Duration::from_secs(30), handle.finished())
        .await
        .expect("the actor ended after its queued turn");
    assert!(agent.live("full").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_saved_state_is_reported_and_the_chat_still_opens() {
    let mock = MockModelServer::start().await;
    let h = TestHost::builder(&mock, "gpt-4o").build().await;
    let now = chrono::Utc::now();
    h.store
        .save_chat(mpa_store::Chat {
            session_id: "hurt".into(),
            user_id: h.actor.user_id.clone(),
            channel: "test".into(),
            title: "hurt".into(),
            agent_messages: vec![
                mpa_protocol::Message::user("earlier question"),
                mpa_protocol::Message::assistant("earlier answer", vec![]),
            ],
            display_messages: json!([]),
            message_count: 2,
            session_state: json!({"system_prompt": "FROZEN PROMPT", "usage": "not usage",
                "review": {"turns": "many"}}),
            turn_status: None,
            created_at: now,
            updated_at: now,
        })
        .await
        .unwrap();
    mock.push(MockReply::text("still here"));
    let turn = h.turn("hurt", "go on").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    let lost: Vec<(&mpa_protocol::ErrorKind, &String, &String)> = turn
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Error {
                kind,
                code,
                message,
            } => Some((kind, code, message)),
            _ => None,
        })
        .collect();
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(*lost[0].0, mpa_protocol::ErrorKind::StateLost);
    assert_eq!(lost[0].1, "session_state_unreadable");
    assert!(lost[0].2.contains("usage totals"), "{}", lost[0].2);
    assert!(lost[0].2.contains("background-review counters"));
    assert!(!lost[0].2.contains("system prompt"), "the prompt was kept");
    // What could be read was kept: the frozen prompt and the conversation.
    let req = &mock.requests()[0];
    assert_eq!(req["messages"][0]["content"], "FROZEN PROMPT");
    assert_eq!(req["messages"][1]["content"], "earlier question");
    // Said once: the next turn runs on the repaired state.
    mock.push(MockReply::text("fine"));
    let again = h.turn("hurt", "and now").await;
    assert!(
        !again
            .events
            .iter()
            .any(|e| matches!(e, Event::Error { .. }))
    );
    let chat = h.agent.chat_for(&h.actor, "hurt").await.unwrap();
    assert!(chat.session_state["usage"].is_object());
}
