//! Schemas and representative outputs of the host's own small tools (`update_plan`,
//! `get_tool_execution` and the diagnostic `test_*` tools), snapshotted as the model sees them.

use crate::common::host::TestHost;
use mpa_core::capability::Recall;
use mpa_core::{Agent, Capabilities};
use mpa_protocol::Actor;
use serde_json::{Value, json};

async fn agent() -> (tempfile::TempDir, Agent, Actor) {
    let h = TestHost::offline().user("spec").build().await;
    (h.dir, h.agent, h.actor)
}

#[tokio::test]
async fn small_tool_specs_snapshot() {
    let (_d, agent, _a) = agent().await;
    let tools = &agent.services().tools;
    for name in [
        "update_plan",
        "read_tool_result",
        "search_tools",
        "get_tool_execution",
        "test_echo",
        "test_sleep",
        "test_result",
        "test_panic",
        "task",
        "subagent_task",
    ] {
        insta::assert_json_snapshot!(format!("{name}_spec"), tools.get(name).unwrap().spec);
    }
}

#[tokio::test]
async fn small_tool_outputs_snapshot() {
    let (_d, agent, actor) = agent().await;
    let mut outputs = Vec::new();
    for (name, args) in [
        (
            "update_plan",
            json!({"objective": "Find the film", "steps": [
                {"step": "Search", "status": "completed", "evidence": "3 results"},
                {"step": "Subscribe", "status": "in_progress"}]}),
        ),
        (
            "update_plan",
            json!({"objective": "Find the film", "steps": [{"step": "Search", "status": "completed"}]}),
        ),
        ("get_tool_execution", json!({"invocation_id": "nope"})),
        ("read_tool_result", json!({"result_id": "nope"})),
        ("search_tools", json!({"search": "下载", "limit": 3})),
        ("test_echo", json!({"text": "hi"})),
        (
            "test_result",
            json!({"content": {"task_id": "t1", "status": "queued"}}),
        ),
        ("test_panic", json!({"secret": "s3cr3t"})),
    ] {
        let (out, outcome) = agent.run_tool(&actor, "s", name, args).await.unwrap();
        let content: Value = serde_json::from_str(&out.content).unwrap();
        outputs.push(json!({"tool": name, "outcome": outcome, "content": content}));
    }
    insta::assert_json_snapshot!("small_tool_outputs", outputs);
}

/// `session_search`: the generated schema, and one output per mode through the real call path.
#[tokio::test]
async fn session_search_spec_and_outputs_snapshot() {
    let h = TestHost::offline()
        .user("spec")
        .diagnostic_tools(false)
        .caps(|d| {
            Capabilities::default().with(Recall::new(mpa_history::History::new(
                mpa_history::HistoryConfig::new(d),
            )))
        })
        .build()
        .await;
    let (agent, actor) = (&h.agent, &h.actor);
    let history = agent.services().caps.history().cloned().unwrap();
    let meta = |id: &str| mpa_history::SessionMeta {
        session_id: id.into(),
        source: "web".into(),
        title: Some(format!("Title of {id}")),
        ..Default::default()
    };
    let msg = |uid: &str, role, text: &str, at: i64| mpa_history::CapturedMessage {
        message_uid: uid.into(),
        role,
        content: text.into(),
        tool_name: None,
        tool_call_id: None,
        tool_calls: None,
        ts: chrono::DateTime::from_timestamp(at, 0),
        provenance: mpa_history::Provenance::Observed,
    };
    use mpa_protocol::Role::{Assistant, User};
    history
        .append(
            &mpa_redact::UserKey::for_user(&actor.user_id),
            meta("past"),
            vec![
                msg("p1", User, "How do I fix docker networking?", 1_000),
                msg(
                    "p2",
                    Assistant,
                    "Restart the bridge: docker network prune.",
                    1_001,
                ),
                msg("p3", User, "That fixed it.", 1_002),
            ],
        )
        .await
        .unwrap();
    insta::assert_json_snapshot!(
        "session_search_spec",
        agent.services().tools.get("session_search").unwrap().spec
    );
    let mut outputs = Vec::new();
    for args in [
        json!({"query": "docker networking"}),
        json!({"query": "docker", "detail": "index"}),
        json!({"session_id": "past", "query": "bridge"}),
        json!({"session_id": "past"}),
        json!({"session_id": "past", "around_message_id": 2, "window": 1}),
        json!({}),
        json!({"session_id": "nope"}),
        json!({"query": "x", "limit": 11}),
        json!({"query": "x", "user": "someone-else"}),
    ] {
        let (out, outcome) = agent
            .run_tool(actor, "current", "session_search", args.clone())
            .await
            .unwrap();
        let content: Value = serde_json::from_str(&out.content).unwrap();
        outputs.push(json!({"args": args, "outcome": outcome, "content": content}));
    }
    insta::assert_json_snapshot!("session_search_outputs", outputs);
}
