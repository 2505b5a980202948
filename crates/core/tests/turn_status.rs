//! How a turn ends, honestly (issue 27): continuation nudges for answers that only announce work
//! (spec learning-guardrails.md §6), `waiting` / `unknown` when the turn's writes say so, the
//! status kept with the chat and its list row, repeated long results shown as references, and no
//! learning review after a halted turn.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::{Gateway, TestHost, demo_world, learning_caps, linked, open_host};
use async_trait::async_trait;
use mpa_core::Capabilities;
use mpa_core::capability::Recall;
use mpa_core::tools::{ToolContext, ToolMeta, ToolOutput, json_tool};
use mpa_core::turn::nudge::CONTINUE_NUDGE;
use mpa_eval::{FakeConfig, FakeMoviePilot};
use mpa_protocol::{EffectClass, Event, Outcome, Role, ToolSpec, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A write whose outcomes come from a script, one per run (`succeeded` once it runs out).
struct Write(Arc<Mutex<VecDeque<Outcome>>>);

impl Write {
    fn scripted(outcomes: &[Outcome]) -> (Self, Arc<Mutex<VecDeque<Outcome>>>) {
        let q = Arc::new(Mutex::new(outcomes.iter().copied().collect()));
        (Write(Arc::clone(&q)), q)
    }
}

#[async_trait]
impl mpa_core::tools::JsonTool for Write {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "apply".into(),
            description: "applies a change".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::new(EffectClass::ReversibleWrite)
    }
    async fn call(&self, _ctx: ToolContext, args: Value) -> ToolOutput {
        let outcome = self
            .0
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Outcome::Succeeded);
        ToolOutput::json(&json!({"applied": args["change"]}), outcome)
    }
}

/// A read returning a long report (`size` characters of `fill`).
struct Report;

#[async_trait]
impl mpa_core::tools::JsonTool for Report {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "report".into(),
            description: "a long report".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn call(&self, _ctx: ToolContext, args: Value) -> ToolOutput {
        let fill = args["fill"].as_str().unwrap_or("x");
        let size = args["size"].as_u64().unwrap_or(2_000) as usize;
        ToolOutput::json(
            &json!({"success": true, "report": fill.repeat(size)}),
            Outcome::Succeeded,
        )
    }
}

fn last_message(req: &Value) -> Value {
    req["messages"].as_array().unwrap().last().unwrap().clone()
}

fn tool_content(req: &Value, call_id: &str) -> String {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {call_id}"))
        .to_string()
}

fn error_codes(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Error { code, .. } => Some(code.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_announcement_without_a_tool_call_gets_one_nudge_and_the_model_continues() {
    let mock = MockModelServer::start().await;
    let h = TestHost::builder(&mock, "gpt-4o").build().await;
    mock.push(MockReply::text("接下来我会查看下载状态。"));
    mock.push(MockReply::tool_calls(&[(
        "e1",
        "test_echo",
        json!({"text": "downloads: 2 done"}),
    )]));
    mock.push(MockReply::text("两个下载都已完成。"));
    let turn = h.turn("nudge", "下载怎么样了？").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(turn.final_text, "两个下载都已完成。");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    // The second request carries the announcement, then the host's prompt (outbound only).
    let msgs = reqs[1]["messages"].as_array().unwrap();
    assert_eq!(msgs[msgs.len() - 2]["content"], "接下来我会查看下载状态。");
    assert_eq!(
        last_message(&reqs[1]),
        json!({"role": "user", "content": CONTINUE_NUDGE})
    );
    // Only that request: after the tool call the model reads its result.
    assert_eq!(last_message(&reqs[2])["role"], "tool");
    let stored = h.messages("nudge").await;
    let users: Vec<String> = stored
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.text())
        .collect();
    assert_eq!(
        users,
        ["下载怎么样了？"],
        "the prompt is never a user message"
    );
    let chat = h.agent.chat_for(&h.actor, "nudge").await.unwrap();
    assert_eq!(chat.turn_status, Some(TurnStatus::Completed));
}

#[tokio::test(flavor = "multi_thread")]
async fn three_announcements_in_a_row_get_two_nudges_and_the_turn_is_partial() {
    let mock = MockModelServer::start().await;
    let h = TestHost::builder(&mock, "gpt-4o").build().await;
    mock.push(MockReply::text("I'll now check the downloads."));
    mock.push(MockReply::text("接下来我会查看下载状态。"));
    mock.push(MockReply::text("Now I will look at the queue:"));
    let turn = h.turn("partial", "how are my downloads?").await;
    assert_eq!(turn.status, TurnStatus::Partial);
    assert_eq!(error_codes(&turn.events), ["continuation_exhausted"]);
    // The user reads that the turn is unfinished, next to what the model said last.
    assert!(turn.events.iter().any(|e| matches!(
        e,
        Event::Error { message, .. } if message.starts_with("本轮未完成：模型仍只描述下一步")
    )));
    assert_eq!(turn.final_text, "Now I will look at the queue:");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3, "two nudges, no third");
    assert_eq!(last_message(&reqs[1])["content"], CONTINUE_NUDGE);
    assert_eq!(last_message(&reqs[2])["content"], CONTINUE_NUDGE);
    let chat = h.agent.chat_for(&h.actor, "partial").await.unwrap();
    assert_eq!(chat.turn_status, Some(TurnStatus::Partial));
    let users = chat
        .agent_messages
        .iter()
        .filter(|m| m.role == Role::User)
        .count();
    assert_eq!(
        users, 1,
        "the prompts are never user messages (nor learning turns)"
    );
    let last = chat.agent_messages.last().unwrap();
    assert_eq!(last.metadata["moviepilot_turn_status"], "partial");

    // Short real answers are final answers.
    for answer in ["42", "config.yaml", "是"] {
        mock.push(MockReply::text(answer));
        let before = mock.requests().len();
        let turn = h.turn("short", "?").await;
        assert_eq!(turn.status, TurnStatus::Completed, "{answer}");
        assert_eq!(mock.requests().len(), before + 1, "{answer}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_write_makes_the_turn_unknown_until_it_succeeds() {
    use Outcome::{Failed, Succeeded, Unknown};
    let mock = MockModelServer::start().await;
    let (write, _) = Write::scripted(&[Unknown, Unknown, Failed, Unknown, Succeeded]);
    let h = TestHost::builder(&mock, "gpt-4o")
        .tool(json_tool(write))
        .build()
        .await;
    let rename = json!({"change": "rename"});
    mock.push(MockReply::tool_calls(&[("w1", "apply", rename.clone())]));
    mock.push(MockReply::text("renamed"));
    let turn = h.turn("w", "rename it").await;
    assert_eq!(turn.status, TurnStatus::Unknown);
    let chat = h.agent.chat_for(&h.actor, "w").await.unwrap();
    assert_eq!(chat.turn_status, Some(TurnStatus::Unknown));
    let listed = h.agent.list_sessions(&h.actor, false, 1, 10).await.unwrap();
    assert_eq!(listed[0].turn_status, Some(TurnStatus::Unknown));
    assert_eq!(
        chat.agent_messages.last().unwrap().metadata["moviepilot_turn_status"],
        "unknown"
    );
    // A failed retry proves nothing about the attempt before it...
    mock.push(MockReply::tool_calls(&[("w2", "apply", rename.clone())]));
    mock.push(MockReply::tool_calls(&[("w3", "apply", rename.clone())]));
    mock.push(MockReply::text("it failed this time"));
    assert_eq!(h.turn("w", "again").await.status, TurnStatus::Unknown);
    // ...the same write succeeding does.
    mock.push(MockReply::tool_calls(&[("w4", "apply", rename.clone())]));
    mock.push(MockReply::tool_calls(&[("w5", "apply", rename)]));
    mock.push(MockReply::text("renamed now"));
    assert_eq!(h.turn("w", "once more").await.status, TurnStatus::Completed);
    let chat = h.agent.chat_for(&h.actor, "w").await.unwrap();
    assert_eq!(chat.turn_status, Some(TurnStatus::Completed));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_halted_turn_keeps_an_unknown_write_unknown_and_starts_no_review() {
    let mock = MockModelServer::start().await;
    let h = TestHost::builder(&mock, "gpt-4o")
        .admin()
        .diagnostic_tools(false)
        .caps(learning_caps)
        .config(|c| {
            c.memory_review_interval = 1;
            c.skill_review_interval = 0;
        })
        .tool(json_tool(Write::scripted(&[Outcome::Unknown]).0))
        .build()
        .await;
    mock.push(MockReply::tool_calls(&[(
        "w1",
        "apply",
        json!({"change": "a"}),
    )]));
    for i in 2..=6 {
        mock.push(MockReply::tool_calls(&[(
            &format!("w{i}"),
            "apply",
            json!({"change": "b"}),
        )]));
    }
    let turn = h.turn_on("telegram", "halt", "apply b").await;
    assert_eq!(
        turn.halt.as_ref().map(|h| h.code.as_str()),
        Some("identical_call_streak_halt")
    );
    assert_eq!(
        turn.status,
        TurnStatus::Unknown,
        "not blocked: a write is open"
    );
    let live = h.agent.live("halt").unwrap();
    assert!(live.wait_idle(Duration::from_secs(10)).await);
    assert_eq!(mock.requests().len(), 6, "no review after a halted turn");

    // The same setup reviews after an answered turn (the review's own model call).
    mock.push(MockReply::text("done"));
    mock.push(MockReply::text("Nothing to save."));
    assert_eq!(
        h.turn_on("telegram", "halt", "thanks").await.status,
        TurnStatus::Completed
    );
    assert!(live.wait_idle(Duration::from_secs(10)).await);
    assert_eq!(mock.requests().len(), 8, "the review ran this time");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pending_scheduler_run_leaves_the_turn_waiting() {
    const SECRET: &str = "test-secret";
    let fake = FakeMoviePilot::start(FakeConfig::new(SECRET), demo_world())
        .await
        .unwrap();
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let model = mpa_model::ModelConfig {
        base_url: mock.base_url.clone(),
        model: "gpt-4o".into(),
        max_retries: 0,
        ..Default::default()
    };
    let gateway = Gateway {
        url: fake.url(),
        secret: SECRET.into(),
        identity: Some(linked(SECRET, &[("admin", ("1", "admin"))])),
    };
    let host = open_host(dir.path(), model, Some(gateway)).await;
    let admin = host.local_actor("admin", true).await.unwrap();
    mock.push(MockReply::tool_calls(&[(
        "run",
        "moviepilot_api",
        json!({"operation_id": "scheduler.run", "query": {"jobid": "subscribe_search"}}),
    )]));
    mock.push(MockReply::text("订阅搜索已开始运行。"));
    let mut rx = host
        .agent()
        .submit(&admin, "job", "web", "运行订阅搜索".into(), vec![])
        .await
        .unwrap();
    let mut status = None;
    while let Some(ev) = rx.recv().await {
        if let Event::TurnEnded { status: s, .. } = ev {
            status = Some(s);
            break;
        }
    }
    assert_eq!(status, Some(TurnStatus::Waiting));
    let chat = host.agent().chat_for(&admin, "job").await.unwrap();
    let run = chat
        .agent_messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("run"))
        .unwrap();
    assert_eq!(run.outcome, Some(Outcome::Pending));
    assert_eq!(chat.turn_status, Some(TurnStatus::Waiting));
    let listed = host
        .agent()
        .list_sessions(&admin, false, 1, 10)
        .await
        .unwrap();
    assert_eq!(listed[0].turn_status, Some(TurnStatus::Waiting));
}

fn evidence_tool_rows(data: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![data.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "state.db") {
                let c = rusqlite::Connection::open(&p).unwrap();
                let mut q = c
                    .prepare("SELECT content FROM messages WHERE role = 'tool' ORDER BY id")
                    .unwrap();
                let rows = q.query_map([], |r| r.get::<_, String>(0)).unwrap();
                found.extend(rows.map(Result::unwrap));
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_long_result_twice_is_a_reference_the_second_time() {
    let mock = MockModelServer::start().await;
    let h = TestHost::builder(&mock, "gpt-4o")
        .caps(|d| {
            Capabilities::default().with(Recall::new(mpa_history::History::new(
                mpa_history::HistoryConfig::new(d.join("history")),
            )))
        })
        .tool(json_tool(Report))
        .build()
        .await;
    let steps = [
        ("r1", json!({"fill": "ab"})),
        // Other arguments, the same text: still the same result.
        ("r2", json!({"fill": "ab", "page": 1})),
        ("r3", json!({"fill": "cd"})),
    ];
    for (id, args) in &steps {
        mock.push(MockReply::tool_calls(&[(*id, "report", args.clone())]));
    }
    mock.push(MockReply::text("same report twice, then another"));
    assert_eq!(h.turn("refs", "report").await.status, TurnStatus::Completed);
    let reqs = mock.requests();
    let first = tool_content(&reqs[1], "r1");
    assert!(first.contains(&"ab".repeat(2_000)));
    let second: Value = serde_json::from_str(&tool_content(&reqs[2], "r2")).unwrap();
    assert_eq!(
        second["same_as"],
        json!({"tool_call_id": "r1", "tool": "report"})
    );
    assert_eq!(second["execution_outcome"], "succeeded");
    assert!(!tool_content(&reqs[2], "r2").contains(&"ab".repeat(100)));
    // A changed result is shown in full.
    assert!(tool_content(&reqs[3], "r3").contains(&"cd".repeat(2_000)));
    // The evidence holds both identical results in full.
    let evidence = evidence_tool_rows(&h.data);
    let full = evidence
        .iter()
        .filter(|c| c.contains(&"ab".repeat(2_000)))
        .count();
    assert_eq!(full, 2, "{} rows", evidence.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_oversized_result_refers_to_its_own_stored_copy() {
    let mock = MockModelServer::start().await;
    // A 16K window (a model the catalogue does not know) caps results at 4,000 characters.
    let h = TestHost::builder(&mock, "house-model-x")
        .config(|c| c.max_context_tokens_k = 16)
        .tool(json_tool(Report))
        .build()
        .await;
    let big = json!({"fill": "z", "size": 9_000});
    mock.push(MockReply::tool_calls(&[("b1", "report", big.clone())]));
    mock.push(MockReply::tool_calls(&[("b2", "report", big)]));
    mock.push(MockReply::text("done"));
    assert_eq!(h.turn("big", "report").await.status, TurnStatus::Completed);
    let reqs = mock.requests();
    let first = tool_content(&reqs[1], "b1");
    assert!(first.contains("tool_result_truncated"), "{first:.300}");
    let second: Value = serde_json::from_str(&tool_content(&reqs[2], "b2")).unwrap();
    assert_eq!(second["same_as"]["tool_call_id"], "b1");
    let id = second["result_id"].as_str().unwrap();
    assert!(
        !first.contains(id),
        "the reference names this result's own copy"
    );
    // That copy reads back in full.
    mock.push(MockReply::tool_calls(&[(
        "read",
        "read_tool_result",
        json!({"result_id": id, "offset": 0, "limit": 100}),
    )]));
    mock.push(MockReply::text("read"));
    h.turn("big", "read it").await;
    let read = tool_content(&mock.requests()[4], "read");
    assert!(read.contains(&"z".repeat(50)), "{read:.300}");
}
