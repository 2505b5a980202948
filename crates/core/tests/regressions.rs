//! Regression tests for the bugs found on review before wave 2 (issue 11, item 7), each named
//! after its finding. They drive the real session actors against the mock model server.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's panic is its failure report"
)]

use crate::common::host::{TestHost, learning_caps, run_turn};
use mpa_core::Agent;
use mpa_protocol::{Actor, Message, TurnStatus};
use mpa_store::{Chat, Store};
use mpa_test_support::{MockModelServer, MockReply, last_user_text};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

struct Env {
    _dir: tempfile::TempDir,
    data: PathBuf,
    agent: Agent,
    actor: Actor,
    store: Store,
}

struct Opts {
    idle: Duration,
    memory_interval: u32,
    skill_interval: u32,
}

impl Opts {
    fn idle(idle: Duration) -> Self {
        Opts {
            idle,
            memory_interval: 0,
            skill_interval: 0,
        }
    }
}

async fn env(mock: &MockModelServer, o: Opts) -> Env {
    // An administrator, so terminals are available.
    let h = TestHost::builder(mock, "gpt-4o")
        .user("kim")
        .admin()
        .data_subdir("data")
        .config(move |c| {
            c.session_idle = o.idle;
            c.memory_review_interval = o.memory_interval;
            c.skill_review_interval = o.skill_interval;
        })
        .caps(learning_caps)
        .build()
        .await;
    Env {
        _dir: h.dir,
        data: h.data,
        agent: h.agent,
        actor: h.actor,
        store: h.store,
    }
}

impl Env {
    async fn turn(&self, session: &str, text: &str) -> TurnStatus {
        run_turn(&self.agent, &self.actor, session, text)
            .await
            .status
    }

    /// Waits until the session's actor has been reclaimed for idleness (no sleeps against a
    /// timeout: the actor's own end is awaited).
    async fn reclaimed(&self, session: &str) {
        let h = self.agent.live(session).expect("a live session");
        assert!(h.wait_idle(Duration::from_secs(30)).await);
        tokio::time::timeout(Duration::from_secs(30), h.finished())
            .await
            .expect("the idle actor ends");
        assert!(self.agent.live(session).is_none());
    }

    async fn idle(&self, session: &str) {
        let h = self.agent.live(session).unwrap();
        assert!(h.wait_idle(Duration::from_secs(30)).await);
    }
}

fn system(req: &Value) -> &str {
    req["messages"][0]["content"].as_str().unwrap()
}

const REVIEW_MARK: &str = "only call memory and skill";

#[tokio::test(flavor = "multi_thread")]
async fn the_frozen_memory_snapshot_survives_an_idle_reload() {
    let mock = MockModelServer::start().await;
    let e = env(
        &mock,
        Opts {
            idle: Duration::from_millis(300),
            memory_interval: 0,
            skill_interval: 0,
        },
    )
    .await;
    mock.push(MockReply::tool_calls(&[(
        "m1",
        "memory",
        json!({"action": "add", "target": "user", "content": "prefers anime in Japanese with Chinese subtitles"}),
    )]));
    mock.push(MockReply::text("Noted."));
    assert_eq!(
        e.turn("s", "remember my taste").await,
        TurnStatus::Completed
    );
    let reqs = mock.requests();
    assert!(
        !system(&reqs[0]).contains("prefers anime"),
        "written after the snapshot"
    );
    e.reclaimed("s").await;
    mock.push(MockReply::text("Hello again."));
    assert_eq!(e.turn("s", "hi").await, TurnStatus::Completed);
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    // The same chat keeps the snapshot it started with; the new entry shows in a new session.
    assert!(!system(&reqs[2]).contains("prefers anime"));
    assert_eq!(system(&reqs[2]), system(&reqs[0]));
    mock.push(MockReply::text("New chat."));
    assert_eq!(e.turn("other", "hi").await, TurnStatus::Completed);
    assert!(system(&mock.requests()[3]).contains("prefers anime"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_system_prompt_is_byte_identical_for_the_life_of_a_session() {
    let mock = MockModelServer::start().await;
    let e = env(
        &mock,
        Opts {
            idle: Duration::from_millis(300),
            memory_interval: 0,
            skill_interval: 0,
        },
    )
    .await;
    mock.push(MockReply::tool_calls(&[(
        "p1",
        "update_plan",
        json!({"objective": "Check the queue", "steps": [
            {"step": "Read the queue", "status": "in_progress"}]}),
    )]));
    mock.push(MockReply::text("Working on it."));
    assert_eq!(e.turn("s", "check the queue").await, TurnStatus::Completed);
    e.reclaimed("s").await;
    mock.push(MockReply::text("Still working."));
    assert_eq!(e.turn("s", "and now?").await, TurnStatus::Completed);
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    let first = system(&reqs[0]);
    for r in &reqs {
        assert_eq!(system(r), first, "one prefix for every model call");
    }
    // Date, not time: nothing in it changes within a day.
    let clock = regex_lite_time(first);
    assert!(
        clock.is_none(),
        "a time of day in the system prompt: {clock:?}"
    );
    // The plan changed between the calls, so it travels at the end of the request.
    let tail = reqs[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(tail.contains("<current_task_plan>") && tail.contains("Check the queue"));
}

/// Finds an `HH:MM` time of day.
fn regex_lite_time(s: &str) -> Option<String> {
    let b = s.as_bytes();
    (0..b.len().saturating_sub(4)).find_map(|i| {
        let w = &b[i..i + 5];
        (w[0].is_ascii_digit()
            && w[1].is_ascii_digit()
            && w[2] == b':'
            && w[3].is_ascii_digit()
            && w[4].is_ascii_digit())
        .then(|| String::from_utf8_lossy(w).into_owned())
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn the_background_review_starts_from_the_turns_own_prompt_bytes() {
    let mock = MockModelServer::start().await;
    let e = env(
        &mock,
        Opts {
            idle: Duration::from_secs(600),
            memory_interval: 1,
            skill_interval: 0,
        },
    )
    .await;
    mock.push(MockReply::text("Hi."));
    mock.push(MockReply::text("Nothing to save."));
    assert_eq!(e.turn("s", "hello").await, TurnStatus::Completed);
    e.idle("s").await;
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    assert!(last_user_text(&reqs[1]).contains(REVIEW_MARK));
    assert_eq!(system(&reqs[1]), system(&reqs[0]));
}

#[tokio::test(flavor = "multi_thread")]
async fn stopped_and_failed_turns_keep_their_skill_review_count() {
    let mock = MockModelServer::start().await;
    let e = env(
        &mock,
        Opts {
            idle: Duration::from_secs(600),
            memory_interval: 0,
            skill_interval: 2,
        },
    )
    .await;
    // Two tool-using iterations, then the model fails: the turn fails, its work still counts.
    mock.push(MockReply::tool_calls(&[(
        "a",
        "test_echo",
        json!({"text": "1"}),
    )]));
    mock.push(MockReply::tool_calls(&[(
        "b",
        "test_echo",
        json!({"text": "2"}),
    )]));
    mock.push(MockReply::status(
        400,
        r#"{"error":{"message":"bad request"}}"#,
    ));
    assert_eq!(e.turn("s", "do work").await, TurnStatus::Failed);
    e.idle("s").await;
    assert_eq!(mock.requests().len(), 3, "no review after a failed turn");
    // The next completed turn is due: the review runs.
    mock.push(MockReply::text("Done."));
    mock.push(MockReply::text("Nothing to save."));
    assert_eq!(e.turn("s", "finish").await, TurnStatus::Completed);
    e.idle("s").await;
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 5, "the review ran after the completed turn");
    assert!(last_user_text(&reqs[4]).contains(REVIEW_MARK));
}

#[tokio::test(flavor = "multi_thread")]
async fn host_commands_do_not_count_as_user_turns_when_the_memory_counter_is_restored() {
    let mock = MockModelServer::start().await;
    let e = env(
        &mock,
        Opts {
            idle: Duration::from_secs(600),
            memory_interval: 2,
            skill_interval: 0,
        },
    )
    .await;
    // A chat saved before counters were persisted: one real turn and one host command.
    let mut reply = Message::assistant("No pending memory proposals.", vec![]);
    reply.metadata.insert("host_command".into(), json!(true));
    let messages = vec![
        Message::user("hello"),
        Message::assistant("Hi!", vec![]),
        Message::user("/memory pending"),
        reply,
    ];
    e.store
        .save_chat(Chat {
            session_id: "old".into(),
            user_id: e.actor.user_id.clone(),
            channel: "test".into(),
            title: "hello".into(),
            message_count: messages.len() as i64,
            agent_messages: messages,
            display_messages: json!([]),
            session_state: json!({}),
            turn_status: None,
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        })
        .await
        .unwrap();
    // This is the second real user turn: with an interval of 2 the memory review is due.
    mock.push(MockReply::text("Sure."));
    mock.push(MockReply::text("Nothing to save."));
    assert_eq!(e.turn("old", "what's new?").await, TurnStatus::Completed);
    e.idle("old").await;
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2, "the memory review ran");
    assert!(last_user_text(&reqs[1]).contains(REVIEW_MARK));
    let _ = &e.data;
}

fn running_sessions(req: &Value, call_id: &str) -> i64 {
    let msgs = req["messages"].as_array().unwrap();
    let result = msgs.iter().find(|m| m["tool_call_id"] == call_id).unwrap()["content"]
        .as_str()
        .unwrap();
    let v: Value = serde_json::from_str(result).unwrap();
    v["running"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_background_terminal_survives_an_idle_reload_and_dies_with_the_chat() {
    let mock = MockModelServer::start().await;
    let e = env(&mock, Opts::idle(Duration::from_millis(300))).await;
    mock.push(MockReply::tool_calls(&[(
        "t1",
        "execute_command",
        json!({"action": "start", "command": "sleep 120"}),
    )]));
    mock.push(MockReply::text("Started."));
    assert_eq!(
        e.turn("term", "start a long job").await,
        TurnStatus::Completed
    );
    e.reclaimed("term").await;
    // The conversation comes back: its terminal is still there.
    mock.push(MockReply::tool_calls(&[(
        "t2",
        "execute_command",
        json!({"action": "list"}),
    )]));
    mock.push(MockReply::text("Still running."));
    assert_eq!(
        e.turn("term", "is it running?").await,
        TurnStatus::Completed
    );
    let reqs = mock.requests();
    assert_eq!(running_sessions(&reqs[3], "t2"), 1, "the terminal survived");
    // Deleting the chat ends it.
    e.agent.delete_session(&e.actor, "term").await.unwrap();
    mock.push(MockReply::tool_calls(&[(
        "t3",
        "execute_command",
        json!({"action": "list"}),
    )]));
    mock.push(MockReply::text("Nothing."));
    assert_eq!(
        e.turn("term", "anything left?").await,
        TurnStatus::Completed
    );
    let reqs = mock.requests();
    assert_eq!(running_sessions(&reqs[5], "t3"), 0, "closed with the chat");
}

/// Spec runtime.md §2.7: a stop ends the turn and discards what waits, but a terminal the turn
/// already started stays the user's (listed and running in the next turn).
#[tokio::test(flavor = "multi_thread")]
async fn a_stop_keeps_the_terminal_the_turn_already_started() {
    let mock = MockModelServer::start().await;
    let e = env(&mock, Opts::idle(Duration::from_secs(600))).await;
    mock.push(MockReply::tool_calls(&[(
        "t1",
        "execute_command",
        json!({"action": "start", "command": "sleep 120"}),
    )]));
    // The answer after the terminal started never finishes: the user stops it.
    mock.push(MockReply::text("Watching the job").stall_after(1));
    let mut rx = e
        .agent
        .submit(
            &e.actor,
            "stopped",
            "test",
            "start a long job".into(),
            vec![],
        )
        .await
        .unwrap();
    assert!(mock.wait_for_requests(2, Duration::from_secs(30)).await);
    assert!(e.agent.stop("stopped"));
    let mut status = None;
    while let Some(ev) = rx.recv().await {
        if let mpa_protocol::Event::TurnEnded { status: s, .. } = ev {
            status = Some(s);
        }
    }
    assert_eq!(status, Some(TurnStatus::Stopped));
    e.idle("stopped").await;
    mock.push(MockReply::tool_calls(&[(
        "t2",
        "execute_command",
        json!({"action": "list"}),
    )]));
    mock.push(MockReply::text("Still running."));
    assert_eq!(
        e.turn("stopped", "is it running?").await,
        TurnStatus::Completed
    );
    let reqs = mock.requests();
    let list = reqs.len() - 1;
    assert_eq!(
        running_sessions(&reqs[list], "t2"),
        1,
        "the terminal survived the stop"
    );
}

/// The CLI's stop test once saw `test_sleep` recorded `failed` after SIGINT: the stop cancelled
/// the call's token, the tool answered its own "cancelled" failure, and the tool stage took that
/// result in before it saw the stop itself (the two wake-ups race on a loaded machine). A call
/// that ends failed after its cancellation is answered as interrupted: `unknown`, never `failed`.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_fails_because_the_user_stopped_it_is_unknown_not_failed() {
    use mpa_core::tools::ToolContext;
    use mpa_core::tools::gate::Gates;
    use mpa_core::tools::invoke::{Invoker, invoke};
    use mpa_core::tools::policy::Origin;
    use mpa_protocol::{Outcome, ToolCall, UserId};

    let options = mpa_core::RegistryOptions {
        diagnostic_tools: true,
    };
    let registry = mpa_core::default_registry(&options, mpa_core::Capabilities::default())
        .unwrap()
        .into();
    let gates = Gates::standard();
    let inv = Invoker {
        tools: &registry,
        gates: &gates,
        timeout: None,
        ledger: None,
        max_result_chars: mpa_core::result_cap::DEFAULT_TOOL_RESULT_MAX_CHARS,
    };
    let actor = Actor {
        user_id: UserId("u-stop".into()),
        user_name: "stop".into(),
        is_admin: false,
    };
    let call = ToolCall {
        id: "call_slow".into(),
        name: "test_sleep".into(),
        arguments: json!({"ms": 60_000}).to_string(),
    };
    // The stop reached the call's token: the sleep sees it at once and answers its failure.
    let ctx = ToolContext::detached(actor, "stopped", "call_slow");
    ctx.cancel.cancel();
    let out = invoke(inv, ctx, Origin::Turn, &call, 1).await.output;
    assert_eq!(out.outcome, Outcome::Unknown, "{}", out.content);
    assert!(
        out.content.contains("result unknown: interrupted"),
        "{}",
        out.content
    );
}
