//! Issue 30's lifecycle ends, seen from outside: a child's terminal grant is gone once the child
//! has ended (spec runtime.md §5.6), and deleting a chat while a child runs cancels the child,
//! ends the turn's events and leaves nothing written afterwards.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::mock_model;
use async_trait::async_trait;
use mpa_core::Host;
use mpa_core::capability::Terminals;
use mpa_core::tools::execute_command::SubtaskScope;
use mpa_core::tools::{JsonTool, ToolContext, ToolMeta, ToolOutput, json_tool};
use mpa_exec::{ExecError, OutputCursor, ScopeId, SessionAction, SessionRequest};
use mpa_protocol::{Actor, Event, ToolSpec, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Keeps the terminal scope the host bound to the calling child.
struct KeepScope(Arc<Mutex<Option<ScopeId>>>);

#[async_trait]
impl JsonTool for KeepScope {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "keep_scope".into(),
            description: "Test: notes the caller's terminal scope".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn call(&self, ctx: ToolContext, _args: Value) -> ToolOutput {
        *self.0.lock().unwrap() = ctx.session.with(|s: &mut SubtaskScope| s.0.clone());
        ToolOutput::classified(json!({"kept": true}).to_string(), false)
    }
}

/// A read that never answers on its own: it waits for its call to be cancelled, and records that
/// the call ended — whether it saw the cancellation itself or its task was aborted first (the
/// call path aborts a stopped turn's tool tasks; which of the two comes first depends on the
/// scheduler, and under load the abort won in CI).
struct Stall {
    started: Arc<tokio::sync::Notify>,
    cancelled: Arc<AtomicBool>,
}

/// Sets its flag when the call's future goes away, by return or by abort.
struct Ended(Arc<AtomicBool>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl JsonTool for Stall {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "stall".into(),
            description: "Test: waits until cancelled".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn call(&self, ctx: ToolContext, _args: Value) -> ToolOutput {
        let _ended = Ended(Arc::clone(&self.cancelled));
        self.started.notify_one();
        ctx.cancel.cancelled().await;
        ToolOutput::classified(json!({"stalled": "cancelled"}).to_string(), true)
    }
}

fn messages(req: &Value) -> &[Value] {
    req["messages"].as_array().unwrap()
}

fn is_child(req: &Value) -> bool {
    messages(req)[0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You are a read-only subagent"))
}

/// Model answers of this turn so far.
fn step(req: &Value) -> usize {
    messages(req)
        .iter()
        .rev()
        .take_while(|m| m["role"] != "user")
        .filter(|m| m["role"] == "assistant")
        .count()
}

fn result(req: &Value, call_id: &str) -> Value {
    let m = messages(req)
        .iter()
        .find(|m| m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no result for {call_id}"));
    serde_json::from_str(m["content"].as_str().unwrap()).unwrap_or(Value::Null)
}

async fn open(
    mock: &MockModelServer,
    dir: &std::path::Path,
    tools: Vec<Arc<dyn mpa_core::tools::Tool>>,
) -> (Host, Actor) {
    let cfg = mpa_core::HostConfig::new(
        dir.join("data"),
        mpa_core::AgentConfig::new(mock_model(mock)),
    );
    let host = Host::open_with(cfg, move |mut b| {
        for t in tools {
            b = b.tool(t);
        }
        b
    })
    .await
    .unwrap();
    let admin = host.local_actor("admin", true).await.unwrap();
    (host, admin)
}

async fn until_ended(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Event>) -> (TurnStatus, String) {
    while let Some(ev) = rx.recv().await {
        if let Event::TurnEnded {
            status, final_text, ..
        } = ev
        {
            return (status, final_text);
        }
    }
    panic!("no TurnEnded")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_childs_terminal_grant_is_gone_once_the_child_has_ended() {
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kept = Arc::new(Mutex::new(None));
    let (host, admin) = open(
        &mock,
        dir.path(),
        vec![json_tool(KeepScope(Arc::clone(&kept)))],
    )
    .await;
    mock.set_responder(move |req| {
        let session = |req: &Value| {
            messages(req)
                .iter()
                .filter_map(|m| m["content"].as_str())
                .find_map(|c| {
                    let at = c.find("term_")?;
                    Some(
                        c[at..]
                            .chars()
                            .take_while(|ch| ch.is_ascii_alphanumeric() || *ch == '_')
                            .collect::<String>(),
                    )
                })
                .unwrap()
        };
        if is_child(req) {
            let s = session(req);
            return match step(req) {
                0 => MockReply::tool_calls(&[
                    ("k1", "keep_scope", json!({})),
                    (
                        "c1",
                        "execute_command",
                        json!({"action": "wait", "session_id": s, "timeout_ms": 30000}),
                    ),
                ]),
                _ => MockReply::text(&format!(
                    "saw={}",
                    result(req, "c1").to_string().contains("MARK_READY")
                )),
            };
        }
        match step(req) {
            0 => MockReply::tool_calls(&[(
                "p0",
                "execute_command",
                json!({"action": "start", "command": "printf 'MARK_READY\\n'; read x", "use_pty": false}),
            )]),
            1 => {
                let s = result(req, "p0")["session_id"].as_str().unwrap().to_string();
                MockReply::tool_calls(&[(
                    "p1",
                    "task",
                    json!({"description": "read the marker",
                        "terminal_sessions": [{"session_id": s, "actions": ["read", "wait"]}]}),
                )])
            }
            _ => MockReply::text(&format!(
                "child: {}",
                result(req, "p1")["result"].as_str().unwrap_or("-")
            )),
        }
    });
    let mut rx = host
        .agent()
        .submit(&admin, "s-grant", "web", "share it".into(), vec![])
        .await
        .unwrap();
    let (status, text) = until_ended(&mut rx).await;
    assert_eq!(status, TurnStatus::Completed, "{text}");
    assert_eq!(text, "child: saw=true");

    // The child has ended: the scope it read through no longer reaches the parent's terminal…
    let child_scope = kept
        .lock()
        .unwrap()
        .clone()
        .expect("the child had a scope of its own");
    let session_id = result(&mock.requests()[1], "p0")["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let processes = host
        .agent()
        .services()
        .caps
        .get::<Terminals>()
        .unwrap()
        .processes()
        .clone();
    let request = |action| SessionRequest {
        session_id: session_id.clone(),
        cursor: OutputCursor::default(),
        max_bytes: 4096,
        action,
    };
    for action in [
        SessionAction::Read,
        SessionAction::Wait {
            timeout: Duration::from_millis(10),
        },
        SessionAction::Status,
    ] {
        let refused = processes
            .session_action(&child_scope, request(action))
            .await;
        assert!(
            matches!(refused, Err(ExecError::AccessDenied)),
            "{refused:?}"
        );
    }
    // …while the parent's process lives on and answers the parent.
    let (out, _) = host
        .agent()
        .run_tool(
            &admin,
            "s-grant",
            "execute_command",
            json!({"action": "status", "session_id": session_id}),
        )
        .await
        .unwrap();
    let status: Value = serde_json::from_str(&out.content).unwrap();
    assert_eq!(status["status"], "running", "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_the_chat_while_a_child_runs_cancels_it_and_writes_nothing_afterwards() {
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let started = Arc::new(tokio::sync::Notify::new());
    let cancelled = Arc::new(AtomicBool::new(false));
    let stall = Stall {
        started: Arc::clone(&started),
        cancelled: Arc::clone(&cancelled),
    };
    let (host, admin) = open(&mock, dir.path(), vec![json_tool(stall)]).await;
    mock.set_responder(move |req| {
        if is_child(req) {
            return match step(req) {
                0 => MockReply::tool_calls(&[("c1", "stall", json!({}))]),
                _ => MockReply::text("child finished"),
            };
        }
        let last_user = messages(req)
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_string();
        match (last_user.as_str(), step(req)) {
            ("hello", _) => MockReply::text("hi"),
            (_, 0) => MockReply::tool_calls(&[(
                "p1",
                "task",
                json!({"description": "look at something slow"}),
            )]),
            _ => MockReply::text("parent finished"),
        }
    });
    // A first turn stores the chat, so that there is something to delete.
    let mut first = host
        .agent()
        .submit(&admin, "s-del", "web", "hello".into(), vec![])
        .await
        .unwrap();
    assert_eq!(until_ended(&mut first).await.0, TurnStatus::Completed);
    let mut rx = host
        .agent()
        .submit(&admin, "s-del", "web", "start".into(), vec![])
        .await
        .unwrap();
    started.notified().await;
    let requests_before = mock.requests().len();
    host.agent().delete_session(&admin, "s-del").await.unwrap();

    // The child's stalled call was cancelled, and the parent's stream ends.
    let mut ended = None;
    let drained = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(ev) = rx.recv().await {
            if let Event::TurnEnded { status, .. } = ev {
                ended = Some(status);
            }
        }
    })
    .await;
    assert!(drained.is_ok(), "the turn's events never stopped");
    // The child runs in a task of its own: its call may end a moment after the parent's stream
    // has closed.
    assert!(
        mpa_test_support::eventually(Duration::from_secs(30), || cancelled.load(Ordering::SeqCst))
            .await,
        "the child's call was not cancelled"
    );
    assert_ne!(ended, Some(TurnStatus::Completed));
    // Nothing was asked of the model after the delete, and nothing was written back.
    assert_eq!(mock.requests().len(), requests_before);
    assert!(host.agent().chat_for(&admin, "s-del").await.is_err());
    let listed = host
        .agent()
        .list_sessions(&admin, true, 1, 100)
        .await
        .unwrap();
    assert!(listed.iter().all(|s| s.session_id != "s-del"));
}
