//! The foundations later capabilities plug into (issue 23): tools that join and leave the
//! registry while sessions run, and agent loops nested under a tool through its agent handle.

#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::TestHost;
use crate::common::tool_names;
use async_trait::async_trait;
use mpa_core::tools::policy::Origin;
use mpa_core::tools::{JsonTool, ToolContext, ToolMeta, ToolOutput, ToolRegistry, json_tool};
use mpa_protocol::{AgentOrigin, EffectClass, Event, Message, Outcome, ToolSpec, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc};

fn tool_result(req: &Value, call_id: &str) -> String {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no result for {call_id}"))["content"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A tool known only by its JSON schema, as an external MCP server describes one. Each call
/// says it started and then waits to be released.
struct Lookup {
    started: mpsc::UnboundedSender<String>,
    release: Arc<Notify>,
}

#[async_trait]
impl JsonTool for Lookup {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ext_lookup".into(),
            description: "Looks a title up in the external catalogue".into(),
            parameters: json!({"type": "object", "properties": {"q": {"type": "string"}},
                "required": ["q"]}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn call(&self, _ctx: ToolContext, args: Value) -> ToolOutput {
        let q = args["q"].as_str().unwrap_or_default().to_string();
        let _ = self.started.send(q.clone());
        self.release.notified().await;
        ToolOutput::classified(json!({"answer": format!("found {q}")}).to_string(), false)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schema_only_tool_joins_and_leaves_while_a_session_is_open() {
    let mock = MockModelServer::start().await;
    let host = TestHost::builder(&mock, "house-model-x").build().await;
    mock.push(MockReply::text("hello"));
    assert_eq!(host.turn("mcp", "hi").await.status, TurnStatus::Completed);
    assert!(!tool_names(&mock.requests()[0]).contains("ext_lookup"));

    // An external server's tool joins the host while the session is open.
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let mut set = ToolRegistry::new();
    set.register(json_tool(Lookup {
        started: started_tx,
        release: Arc::clone(&release),
    }));
    let tools = &host.agent.services().tools;
    tools.add_set("mcp:catalogue", set).unwrap();
    // A set may not shadow a built-in tool.
    let mut shadow = ToolRegistry::new();
    shadow.register(json_tool(Lookup {
        started: mpsc::unbounded_channel().0,
        release: Arc::new(Notify::new()),
    }));
    assert_eq!(
        tools.add_set("mcp:other", shadow).unwrap_err().code(),
        "tool_name_taken"
    );

    mock.push(MockReply::tool_calls(&[(
        "l1",
        "ext_lookup",
        json!({"q": "dune"}),
    )]));
    mock.push(MockReply::tool_calls(&[(
        "l2",
        "ext_lookup",
        json!({"q": "again"}),
    )]));
    mock.push(MockReply::text("done"));
    let mut rx = host
        .agent
        .submit(&host.actor, "mcp", "test", "look it up".into(), vec![])
        .await
        .unwrap();
    // The first call is running; the server goes away meanwhile.
    let q = tokio::time::timeout(Duration::from_secs(30), started.recv())
        .await
        .unwrap();
    assert_eq!(q.as_deref(), Some("dune"));
    assert!(tools.remove_set("mcp:catalogue"));
    release.notify_one();
    let mut status = None;
    while let Some(ev) = rx.recv().await {
        if let Event::TurnEnded { status: s, .. } = ev {
            status = Some(s);
            break;
        }
    }
    assert_eq!(status, Some(TurnStatus::Completed));

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 4);
    // The next model call after it joined lists it, with its schema as the server gave it.
    assert!(tool_names(&reqs[1]).contains("ext_lookup"));
    let listed = reqs[1]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "ext_lookup")
        .unwrap();
    assert_eq!(listed["function"]["parameters"]["required"], json!(["q"]));
    // The call in flight when it left finished normally, through the host's classification.
    let first: Value = serde_json::from_str(&tool_result(&reqs[2], "l1")).unwrap();
    assert_eq!(first["answer"], "found dune");
    // After it left: no longer listed, and a call of it is an unknown tool.
    assert!(!tool_names(&reqs[2]).contains("ext_lookup"));
    let second: Value = serde_json::from_str(&tool_result(&reqs[3], "l2")).unwrap();
    assert_eq!(second["error"], "unknown_tool", "{second}");
    assert!(started.try_recv().is_err(), "the second call never ran");
    let stored = host.messages("mcp").await;
    let outcome = |id: &str| {
        stored
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some(id))
            .and_then(|m| m.outcome)
    };
    assert_eq!(outcome("l1"), Some(Outcome::Succeeded));
    assert_eq!(outcome("l2"), Some(Outcome::Failed));
}

const CHILD_SYSTEM: &str = "You are a read-only helper. Answer the task in one line.";

/// A test-only tool that hands its task to a nested agent loop (what a subagent tool does).
struct Delegate;

#[async_trait]
impl JsonTool for Delegate {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "delegate".into(),
            description: "Hands a task to a helper agent".into(),
            parameters: json!({"type": "object", "properties": {"task": {"type": "string"}}}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn call(&self, ctx: ToolContext, args: Value) -> ToolOutput {
        let Ok(tools) = ctx.agent.tools(&ctx) else {
            return ToolOutput::failure("host_gone", "the host is shutting down");
        };
        let specs = tools
            .specs_for(&ctx.actor)
            .into_iter()
            .filter(|s| s.name == "test_echo" || s.name == "note_write")
            .collect();
        let nested = mpa_core::handle::Nested {
            origin: Origin::Subagent,
            system: Message::system(CHILD_SYSTEM),
            messages: vec![Message::user(args["task"].as_str().unwrap_or_default())],
            specs,
            limits: mpa_core::turn::steps::Limits {
                max_model_calls: 4,
                input_token_budget: None,
            },
            max_parallel: 1,
            state: mpa_core::handle::NestedState::Fresh,
            session_id: None,
            evidence: None,
        };
        match ctx.agent.run_nested(&ctx, nested).await {
            Ok(run) => ToolOutput::json(
                &json!({"success": true, "agent_id": run.agent_id, "answer": run.end.final_text,
                    "status": run.end.status, "messages": run.messages.len()}),
                Outcome::Succeeded,
            ),
            Err(e) => ToolOutput::failure(e.code(), e.to_string()),
        }
    }
}

/// A write: a read-only origin is refused it.
struct NoteWrite;

#[async_trait]
impl JsonTool for NoteWrite {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "note_write".into(),
            description: "Writes a note".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::new(EffectClass::ReversibleWrite)
    }
    async fn call(&self, _ctx: ToolContext, _args: Value) -> ToolOutput {
        ToolOutput::classified("written".into(), false)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_nested_loop_runs_with_its_own_origin_and_transcript_and_stays_off_the_user_stream() {
    let mock = MockModelServer::start().await;
    let host = TestHost::builder(&mock, "house-model-x")
        .tool(json_tool(Delegate))
        .tool(json_tool(NoteWrite))
        .build()
        .await;
    mock.push(MockReply::tool_calls(&[(
        "d1",
        "delegate",
        json!({"task": "echo the word kestrel"}),
    )]));
    mock.push(MockReply::tool_calls(&[
        ("e1", "test_echo", json!({"text": "kestrel"})),
        ("w1", "note_write", json!({})),
    ]));
    mock.push(MockReply::text("child answer: kestrel"));
    mock.push(MockReply::text("parent done"));
    let turn = host.turn("nest", "please delegate the echo").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(turn.final_text, "parent done");

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 4);
    // The child's own transcript: its system message and task, nothing of the parent's.
    let child = reqs[1]["messages"].as_array().unwrap();
    assert_eq!(child.len(), 2);
    assert_eq!(child[0]["content"], CHILD_SYSTEM);
    assert!(!reqs[1].to_string().contains("please delegate"));
    assert_eq!(
        tool_names(&reqs[1]),
        BTreeSet::from(["note_write".to_string(), "test_echo".to_string()])
    );
    // Its own origin: a read-only subagent's write is refused, its read runs.
    assert!(tool_result(&reqs[2], "e1").contains("kestrel"));
    let refused: Value = serde_json::from_str(&tool_result(&reqs[2], "w1")).unwrap();
    assert_eq!(refused["error"], "subagent_read_only", "{refused}");
    let delegated: Value = serde_json::from_str(&tool_result(&reqs[3], "d1")).unwrap();
    assert_eq!(delegated["answer"], "child answer: kestrel");
    assert_eq!(delegated["messages"], 5);

    // Its events are tagged with its id and origin, and none reached the user's stream bare.
    let agent_id = delegated["agent_id"].as_str().unwrap();
    assert!(agent_id.starts_with("subagent-"), "{agent_id}");
    let (mut nested, mut user_text) = (Vec::new(), String::new());
    for ev in &turn.events {
        match ev {
            Event::Nested {
                agent_id: id,
                origin,
                event,
            } => {
                assert_eq!(id, agent_id);
                assert_eq!(*origin, AgentOrigin::Subagent);
                nested.push((**event).clone());
            }
            Event::ToolStarted { name, .. } => assert_eq!(name, "delegate"),
            Event::Delta { content } => user_text.push_str(content),
            _ => {}
        }
    }
    assert_eq!(user_text, "parent done");
    assert!(
        nested
            .iter()
            .any(|e| matches!(e, Event::ToolStarted { name, .. } if name == "test_echo"))
    );
    let child_text: String = nested
        .iter()
        .filter_map(|e| match e {
            Event::Delta { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(child_text, "child answer: kestrel");
    // The parent's transcript holds the delegation, not the child's steps.
    let stored = host.messages("nest").await;
    assert!(
        stored
            .iter()
            .all(|m| m.tool_call_id.as_deref() != Some("e1"))
    );
    assert!(
        stored
            .iter()
            .any(|m| m.tool_call_id.as_deref() == Some("d1"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn internal_tools_are_never_published() {
    let mock = MockModelServer::start().await;
    let host = TestHost::builder(&mock, "house-model-x").build().await;
    let view = host.agent.services().tools.view();
    let published: BTreeSet<String> = view
        .publishable_specs(&host.actor)
        .into_iter()
        .map(|s| s.name)
        .collect();
    let internal: Vec<String> = view
        .iter()
        .filter(|t| t.meta.internal)
        .map(|t| t.spec.name.clone())
        .collect();
    assert!(
        internal.contains(&"update_plan".to_string()),
        "{internal:?}"
    );
    assert!(
        internal.iter().all(|n| !published.contains(n)),
        "{published:?}"
    );
    assert!(published.contains("test_echo"));
}
