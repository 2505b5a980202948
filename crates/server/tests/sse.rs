//! The chat event stream: deltas coalesce, a nested agent's events stay off the user's stream, heartbeats and hang-ups.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use bytes::Bytes;
use mpa_core::web::i18n::Locale;
use mpa_protocol::TurnStatus;
use mpa_protocol::{Event, Outcome};
use mpa_server::sse::*;
use serde_json::Value;
use std::time::Duration;
use tokio::sync::mpsc;

fn parse(b: &Bytes) -> Value {
    let s = std::str::from_utf8(b).unwrap();
    serde_json::from_str(s.strip_prefix("data: ").unwrap().trim_end()).unwrap()
}

/// Ends the turn, waits for the pump and returns every frame it wrote.
async fn complete(
    etx: mpsc::UnboundedSender<Event>,
    task: tokio::task::JoinHandle<()>,
    orx: &mut mpsc::Receiver<Bytes>,
) -> Vec<Value> {
    etx.send(Event::TurnEnded {
        status: TurnStatus::Completed,
        final_text: String::new(),
        halt: None,
    })
    .unwrap();
    task.await.unwrap();
    let mut got = Vec::new();
    while let Ok(b) = orx.try_recv() {
        got.push(parse(&b));
    }
    got
}

#[tokio::test]
async fn deltas_coalesce_tools_flush_and_done_ends() {
    let (etx, erx) = mpsc::unbounded_channel();
    let (otx, mut orx) = mpsc::channel(64);
    let task = tokio::spawn(pump(
        erx,
        otx,
        Duration::from_secs(15),
        "s".into(),
        Locale::En,
    ));
    etx.send(Event::TurnStarted {
        session_id: "s".into(),
        assistant_message_id: "m".into(),
    })
    .unwrap();
    for w in ["Hel", "lo", " there"] {
        etx.send(Event::Delta { content: w.into() }).unwrap();
    }
    etx.send(Event::ToolStarted {
        tool_id: "c1".into(),
        name: "test_echo".into(),
        message: "echo".into(),
        detail: Value::Null,
    })
    .unwrap();
    etx.send(Event::ToolFinished {
        tool_id: "c1".into(),
        name: "test_echo".into(),
        outcome: Outcome::Unknown,
        message: "timed out".into(),
        detail: Value::Null,
    })
    .unwrap();
    etx.send(Event::Delta {
        content: "x".repeat(300),
    })
    .unwrap();
    let mut got = complete(etx, task, &mut orx).await;
    let mut types: Vec<String> = got
        .iter()
        .map(|v| v["type"].as_str().unwrap().to_owned())
        .collect();
    // The first delta leaves at once; the two queued right behind it share one frame.
    assert_eq!(types.iter().filter(|t| **t == "delta").count(), 3);
    let text: String = got[1..3]
        .iter()
        .map(|v| v["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        (got[1]["content"].as_str(), text.as_str()),
        (Some("Hel"), "Hello there")
    );
    got.remove(2);
    types.remove(2);
    assert_eq!(types, ["start", "delta", "tool", "tool", "delta", "done"]);
    assert_eq!(got[2]["status"], "running");
    assert_eq!(got[3]["status"], "error");
    assert_eq!(got[3]["assistant_message_id"], "m");
    assert_eq!(got[5]["status"], "completed");
}

#[tokio::test]
async fn a_nested_agents_events_stay_off_the_users_stream() {
    let (etx, erx) = mpsc::unbounded_channel();
    let (otx, mut orx) = mpsc::channel(64);
    let task = tokio::spawn(pump(
        erx,
        otx,
        Duration::from_secs(15),
        "s".into(),
        Locale::En,
    ));
    let nested = |event: Event| Event::Nested {
        agent_id: "subagent-1".into(),
        origin: mpa_protocol::AgentOrigin::Subagent,
        event: Box::new(event),
    };
    etx.send(nested(Event::ToolStarted {
        tool_id: "e1".into(),
        name: "test_echo".into(),
        message: "echo".into(),
        detail: Value::Null,
    }))
    .unwrap();
    etx.send(nested(Event::Delta {
        content: "child text".into(),
    }))
    .unwrap();
    etx.send(nested(Event::Error {
        kind: mpa_protocol::ErrorKind::Model,
        code: "model_timeout".into(),
        message: "the child's model timed out".into(),
    }))
    .unwrap();
    etx.send(Event::Delta {
        content: "parent text".into(),
    })
    .unwrap();
    let got = complete(etx, task, &mut orx).await;
    let types: Vec<&str> = got.iter().map(|v| v["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["delta", "done"], "{got:?}");
    assert_eq!(got[0]["content"], "parent text");
}

#[tokio::test]
async fn silence_brings_a_heartbeat_and_a_hangup_stops_reading() {
    let (etx, erx) = mpsc::unbounded_channel::<Event>();
    let (otx, mut orx) = mpsc::channel(64);
    let task = tokio::spawn(pump(
        erx,
        otx,
        Duration::from_millis(20),
        "s".into(),
        Locale::En,
    ));
    assert_eq!(parse(&orx.recv().await.unwrap())["type"], "heartbeat");
    drop(orx);
    task.await.unwrap();
    // The turn side can still send: nothing breaks when nobody listens.
    let _ = etx.send(Event::Delta {
        content: "late".into(),
    });
}
