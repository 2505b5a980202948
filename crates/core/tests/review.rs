//! Background learning review driven by the mock model: the whitelist refuses everything but the
//! learning tools, the background guard protects user-owned skills, and a new user turn cancels a
//! running review.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::{TestHost, learning_caps};
use mpa_core::{Agent, ReviewState};
use mpa_protocol::{Actor, Event, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Env {
    _dir: tempfile::TempDir,
    data: PathBuf,
    agent: Agent,
    actor: Actor,
}

async fn env(mock: &MockModelServer, memory_interval: u32) -> Env {
    let h = TestHost::builder(mock, "gpt-4o")
        .model(|m| m.max_retries = mpa_model::ModelConfig::default().max_retries)
        .user("root")
        .admin()
        .data_subdir("data")
        .diagnostic_tools(false)
        .caps(learning_caps)
        .config(move |c| {
            c.memory_review_interval = memory_interval;
            c.skill_review_interval = 0;
        })
        .build()
        .await;
    Env {
        _dir: h.dir,
        data: h.data,
        agent: h.agent,
        actor: h.actor,
    }
}

async fn turn(e: &Env, session: &str, text: &str) -> TurnStatus {
    let s = e.agent.session(&e.actor, session, "test").await.unwrap();
    let mut rx = s.submit(e.actor.clone(), text.into(), vec![]).unwrap();
    while let Some(ev) = rx.recv().await {
        if let Event::TurnEnded { status, .. } = ev {
            return status;
        }
    }
    panic!("turn ended without TurnEnded");
}

fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(
                    p.strip_prefix(dir).unwrap().display().to_string(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

const SKILL: &str = "---\nname: mine\ndescription: How this household names its shows\n---\n# mine\n\n## Steps\n1. check the library\n2. verify the result\n";

#[tokio::test(flavor = "multi_thread")]
async fn review_refuses_commands_and_user_skill_deletion_and_leaves_files_identical() {
    let mock = MockModelServer::start().await;
    let e = env(&mock, 1).await;
    let marker = e.data.join("marker-from-review");
    // Turn: the model creates a skill in the foreground (so it belongs to the user), then answers.
    mock.push(MockReply::tool_calls(&[(
        "c1",
        "skill_manage",
        json!({"operations": [{"action": "create", "name": "mine", "content": SKILL}]}),
    )]));
    mock.push(MockReply::text("Created the skill."));
    // Review: tries a command and deleting the user's skill, then gives up.
    mock.push(
        MockReply::tool_calls(&[
            (
                "r1",
                "execute_command",
                json!({"action": "run", "command": format!("touch {}", marker.display())}),
            ),
            (
                "r2",
                "skill_manage",
                json!({"operations": [{"action": "delete", "name": "mine", "absorbed_into": "umbrella"}]}),
            ),
        ])
        .chunk_delay(Duration::from_millis(200)),
    );
    mock.push(MockReply::text("Nothing to save."));

    assert_eq!(turn(&e, "s1", "make a skill").await, TurnStatus::Completed);
    assert!(mock.wait_for_requests(3, Duration::from_secs(30)).await);
    let skills_dir = e
        .data
        .join("agent/runtime/learning/users")
        .join(mpa_redact::UserKey::for_user(&e.actor.user_id).as_str());
    let before = tree(&skills_dir);
    assert!(before.keys().any(|k| k.ends_with("SKILL.md")), "{before:?}");
    let s = e.agent.live("s1").unwrap();
    assert!(s.wait_idle(Duration::from_secs(30)).await);

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 4);
    // The review replays the same system prompt and tool specs.
    assert_eq!(reqs[2]["messages"][0], reqs[1]["messages"][0]);
    assert_eq!(reqs[2]["tools"], reqs[1]["tools"]);
    let last_user = reqs[2]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last_user["content"]
            .as_str()
            .unwrap()
            .contains("only call memory and skill")
    );
    let msgs = reqs[3]["messages"].as_array().unwrap();
    let result = |id: &str| -> String {
        msgs.iter().find(|m| m["tool_call_id"] == id).unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        result("r1").contains("cannot execute this tool here"),
        "{}",
        result("r1")
    );
    let r2: Value = serde_json::from_str(&result("r2")).unwrap();
    assert_eq!(r2["success"], false, "{r2}");
    assert!(!marker.exists(), "the command never ran");
    assert_eq!(tree(&skills_dir), before, "user files byte-identical");
    // Nothing of the review reached the chat snapshot.
    let chat = e.agent.chat_for(&e.actor, "s1").await.unwrap();
    assert_eq!(chat.agent_messages.len(), 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn no_review_before_the_interval_and_a_new_turn_cancels_a_running_review() {
    let mock = MockModelServer::start().await;
    let e = env(&mock, 2).await;
    mock.push(MockReply::text("one"));
    assert_eq!(turn(&e, "s2", "first").await, TurnStatus::Completed);
    let s = e.agent.live("s2").unwrap();
    assert!(s.wait_idle(Duration::from_secs(10)).await);
    assert_eq!(mock.requests().len(), 1, "no review after turn 1 of 2");

    mock.push(MockReply::text("two"));
    // The review stalls forever until cancelled.
    mock.push(MockReply::text("thinking about memory").stall_after(1));
    assert_eq!(turn(&e, "s2", "second").await, TurnStatus::Completed);
    assert!(mock.wait_for_requests(3, Duration::from_secs(30)).await);
    mock.push(MockReply::text("three"));
    // The next user turn cancels the review and runs.
    assert_eq!(turn(&e, "s2", "third").await, TurnStatus::Completed);
    // The review really stopped: its model call was cut, and it ended within the 2 s bound
    // (a review ignoring its cancellation is aborted instead, and says so).
    assert_eq!(s.review_state(), ReviewState::Cancelled);
    assert!(mock.wait_for_hangups(1, Duration::from_secs(10)).await);
    assert_eq!(mock.hangups(), 1);
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 4);
    let last = reqs[3]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"], "third");
}

async fn stop_after_first_request(e: &Env, mock: &MockModelServer, session: &str) -> TurnStatus {
    let s = e.agent.session(&e.actor, session, "test").await.unwrap();
    let mut rx = s.submit(e.actor.clone(), "go".into(), vec![]).unwrap();
    assert!(mock.wait_for_requests(1, Duration::from_secs(10)).await);
    s.stop();
    while let Some(ev) = rx.recv().await {
        if let Event::TurnEnded { status, .. } = ev {
            return status;
        }
    }
    panic!("no TurnEnded");
}

#[tokio::test(flavor = "multi_thread")]
async fn stopped_and_failed_turns_never_start_a_review() {
    let mock = MockModelServer::start().await;
    let e = env(&mock, 1).await;
    mock.push(MockReply::text("slow").stall_after(1));
    assert_eq!(
        stop_after_first_request(&e, &mock, "st").await,
        TurnStatus::Stopped
    );
    let s = e.agent.live("st").unwrap();
    assert!(s.wait_idle(Duration::from_secs(10)).await);
    assert_eq!(mock.requests().len(), 1, "no review after a stopped turn");

    mock.push(MockReply::status(
        400,
        r#"{"error": {"message": "bad request"}}"#,
    ));
    assert_eq!(turn(&e, "st", "again").await, TurnStatus::Failed);
    assert!(s.wait_idle(Duration::from_secs(10)).await);
    assert_eq!(mock.requests().len(), 2, "no review after a failed turn");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_review_makes_at_most_16_model_calls() {
    let mock = MockModelServer::start().await;
    let e = env(&mock, 1).await;
    mock.push(MockReply::text("hi"));
    // The review never stops on its own: every answer lists skills again, of another category
    // each time (the same call again would be a loop the guardrails stop sooner).
    mock.set_responder(|req| {
        let n = req["messages"].as_array().map_or(0, Vec::len);
        MockReply::tool_calls(&[("l", "skills_list", json!({"category": format!("c{n}")}))])
            .usage(10, 5)
    });
    assert_eq!(turn(&e, "cap", "hello").await, TurnStatus::Completed);
    let s = e.agent.live("cap").unwrap();
    assert!(s.wait_idle(Duration::from_secs(60)).await);
    assert_eq!(mock.requests().len(), 1 + 16);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_review_stops_once_its_input_budget_is_spent() {
    let mock = MockModelServer::start().await;
    let e = env(&mock, 1).await;
    mock.push(MockReply::text("hi"));
    // gpt-4o's window is 128k, so the budget is 96k input tokens; one request reports 100k.
    mock.set_default(MockReply::tool_calls(&[("l", "skills_list", json!({}))]).usage(100_000, 5));
    assert_eq!(turn(&e, "budget", "hello").await, TurnStatus::Completed);
    let s = e.agent.live("budget").unwrap();
    assert!(s.wait_idle(Duration::from_secs(30)).await);
    assert_eq!(mock.requests().len(), 1 + 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn review_usage_was_only_logged_now_it_joins_the_sessions_saved_usage() {
    let mock = MockModelServer::start().await;
    let e = env(&mock, 1).await;
    mock.push(MockReply::text("hi").usage(100, 10));
    // The review: one look at the skills, then nothing to save.
    mock.push(MockReply::tool_calls(&[("l", "skills_list", json!({}))]).usage(200, 20));
    mock.push(MockReply::text("Nothing to save.").usage(300, 30));
    assert_eq!(turn(&e, "cost", "hello").await, TurnStatus::Completed);
    let s = e.agent.live("cost").unwrap();
    assert!(s.wait_idle(Duration::from_secs(30)).await);
    assert_eq!(s.review_state(), ReviewState::Finished);
    assert_eq!(mock.requests().len(), 3);

    let chat = e.agent.chat_for(&e.actor, "cost").await.unwrap();
    let usage = &chat.session_state["usage"];
    assert_eq!(usage["total_input_tokens"], 600, "{usage}");
    assert_eq!(usage["total_output_tokens"], 60, "{usage}");
    assert_eq!(usage["total_tokens"], 660, "{usage}");
    assert_eq!(usage["model_call_count"], 3, "{usage}");
    assert_eq!(usage["review_model_call_count"], 2, "{usage}");
    assert_eq!(usage["review_total_tokens"], 550, "{usage}");
    // The last request is still the conversation's own.
    assert_eq!(usage["last_input_tokens"], 100, "{usage}");

    // The next turn keeps counting from there.
    mock.push(MockReply::text("again").usage(1000, 1));
    mock.push(MockReply::text("Nothing to save.").usage(1, 1));
    assert_eq!(turn(&e, "cost", "more").await, TurnStatus::Completed);
    assert!(s.wait_idle(Duration::from_secs(30)).await);
    let chat = e.agent.chat_for(&e.actor, "cost").await.unwrap();
    let usage = &chat.session_state["usage"];
    assert_eq!(usage["total_input_tokens"], 1601, "{usage}");
    assert_eq!(usage["model_call_count"], 5, "{usage}");
}

/// A tool that waits until the test opens it, so "while the turn runs" is a fact.
struct Gate(std::sync::Arc<tokio::sync::Semaphore>);

#[async_trait::async_trait]
impl mpa_core::tools::JsonTool for Gate {
    fn spec(&self) -> mpa_protocol::ToolSpec {
        mpa_protocol::ToolSpec {
            name: "wait_gate".into(),
            description: "Waits until the gate opens.".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> mpa_core::tools::ToolMeta {
        mpa_core::tools::ToolMeta::read()
    }
    async fn call(
        &self,
        _ctx: mpa_core::tools::ToolContext,
        _args: Value,
    ) -> mpa_core::tools::ToolOutput {
        if let Ok(p) = self.0.acquire().await {
            p.forget();
        }
        mpa_core::tools::ToolOutput::json(
            &json!({"success": true}),
            mpa_protocol::Outcome::Succeeded,
        )
    }
}

/// Spec runtime.md §2: a steering message is a user turn for the review counters. With the
/// memory review due every second user turn, one turn plus one steering message starts it.
#[tokio::test(flavor = "multi_thread")]
async fn a_steering_message_counts_as_a_user_turn_for_the_review() {
    let mock = MockModelServer::start().await;
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let h = TestHost::builder(&mock, "gpt-4o")
        .user("root")
        .admin()
        .data_subdir("data")
        .diagnostic_tools(false)
        .caps(learning_caps)
        .config(|c| {
            c.memory_review_interval = 2;
            c.skill_review_interval = 0;
        })
        .tool(mpa_core::tools::json_tool(Gate(std::sync::Arc::clone(
            &gate,
        ))))
        .build()
        .await;
    mock.push(MockReply::tool_calls(&[("g", "wait_gate", json!({}))]));
    mock.push(MockReply::text("Only 4K, noted."));
    mock.push(MockReply::text("Nothing to save."));
    let s = h.agent.session(&h.actor, "steered", "test").await.unwrap();
    let mut rx = s
        .submit(h.actor.clone(), "find releases".into(), vec![])
        .unwrap();
    while let Some(ev) = rx.recv().await {
        if matches!(ev, Event::ToolStarted { .. }) {
            break;
        }
    }
    let steered = s.steer(&h.actor, "only 4K".into(), vec![]).unwrap();
    assert!(
        matches!(steered, mpa_core::Steered::Queued { .. }),
        "{steered:?}"
    );
    gate.add_permits(1);
    let mut status = None;
    while let Some(ev) = rx.recv().await {
        if let Event::TurnEnded { status: st, .. } = ev {
            status = Some(st);
        }
    }
    assert_eq!(status, Some(TurnStatus::Completed));
    assert!(s.wait_idle(Duration::from_secs(30)).await);
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3, "the turn's two requests and the review's");
    let last_user = reqs[2]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last_user["content"]
            .as_str()
            .unwrap()
            .contains("deserves a place in stable memory"),
        "{last_user}"
    );
}
