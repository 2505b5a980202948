//! Final-request compaction (issue 17, spec runtime.md §12.2–§12.3), driven over the real wire
//! by a scripted model: a long conversation with large tool results at a 16 K window.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::{TestHost, run_turn};
use async_trait::async_trait;
use mpa_core::capability::Recall;
use mpa_core::tools::{JsonTool, ToolContext, ToolMeta, ToolOutput};
use mpa_core::{Agent, Capabilities};
use mpa_protocol::{Actor, Event, RequestBudget, ToolSpec, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const CONSTRAINT: &str = "CONSTRAINT: only subscription.list with count 20; never delete anything";
const OBJECTIVE: &str = "OBJ-LONG-TASK find the target subscription";
const FACT: &str = "bluewhale4242";

/// A page of subscriptions: ~70 000 characters, so every result goes over the cap.
struct ListSubscriptions;

#[async_trait]
impl JsonTool for ListSubscriptions {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_subscriptions".into(),
            description: "one page of subscriptions".into(),
            parameters: json!({"type": "object", "properties": {"page": {"type": "integer"}}}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn call(&self, _ctx: ToolContext, args: Value) -> ToolOutput {
        let page = args["page"].as_u64().unwrap_or(0);
        let rows: String = (0..800)
            .map(|i| format!("{{\"id\": {}, \"title\": \"filler subscription {i:04} ........................................\"}}\n", page * 1000 + i))
            .collect();
        ToolOutput::classified(rows, false)
    }
}

struct Env {
    _dir: tempfile::TempDir,
    agent: Agent,
    actor: Actor,
}

async fn env(mock: &MockModelServer, window_k: u64) -> Env {
    env_with(mock, "house-model-x", window_k).await
}

async fn env_with(mock: &MockModelServer, model: &str, window_k: u64) -> Env {
    let h = TestHost::builder(mock, model)
        .config(move |c| c.max_context_tokens_k = window_k)
        .caps(|d| {
            Capabilities::default().with(Recall::new(mpa_history::History::new(
                mpa_history::HistoryConfig::new(d.join("history")),
            )))
        })
        .diagnostic_tools(false)
        .tool(mpa_core::tools::json_tool(ListSubscriptions))
        .build()
        .await;
    Env {
        _dir: h.dir,
        agent: h.agent,
        actor: h.actor,
    }
}

impl Env {
    async fn turn(&self, session: &str, text: &str) -> (TurnStatus, Vec<Event>) {
        let t = run_turn(&self.agent, &self.actor, session, text).await;
        (t.status, t.events)
    }
}

fn is_summariser(req: &Value) -> bool {
    req.get("tools").is_none()
}

fn turn_of(text: &str) -> u64 {
    text.strip_prefix("turn ")
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The scripted model: a user message gets a `list_subscriptions` call (plus `update_plan` in
/// turn 0), a tool result gets a short answer, a summariser request gets a summary.
fn script(summaries: Arc<AtomicUsize>) -> impl Fn(&Value) -> MockReply + Send + Sync {
    let calls = AtomicUsize::new(0);
    move |req: &Value| {
        if is_summariser(req) {
            summaries.fetch_add(1, Ordering::SeqCst);
            return MockReply::text(
                "Task: find the target subscription; pages of 20 only; nothing deleted. Pages read so far are listed in the plan.",
            );
        }
        let msgs = req["messages"].as_array().unwrap();
        let last = msgs.last().unwrap();
        let n = calls.fetch_add(1, Ordering::SeqCst);
        if last["role"] == "tool" {
            return MockReply::text(&format!("done {n}"));
        }
        let turn = turn_of(last["content"].as_str().unwrap_or(""));
        let id = format!("call{n}");
        let list = (id.as_str(), "list_subscriptions", json!({"page": turn}));
        if turn == 0 {
            let plan = json!({"objective": OBJECTIVE, "steps": [
                {"step": "read every page", "status": "in_progress"}]});
            let pid = format!("plan{n}");
            return MockReply::tool_calls(&[(pid.as_str(), "update_plan", plan), list]);
        }
        MockReply::tool_calls(&[list])
    }
}

fn budgets(events: &[Event]) -> Vec<RequestBudget> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Budget { budget } => Some((**budget).clone()),
            _ => None,
        })
        .collect()
}

/// Every tool call of the request has its result right after it, and every result its call.
fn assert_pairs(req: &Value) {
    let msgs = req["messages"].as_array().unwrap();
    let mut open: Vec<String> = Vec::new();
    for m in msgs {
        match m["role"].as_str().unwrap() {
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap().to_string();
                assert!(open.contains(&id), "result without its call: {id}");
                open.retain(|x| x != &id);
            }
            role => {
                assert!(
                    open.is_empty(),
                    "calls without results before a {role} message"
                );
                if let Some(calls) = m["tool_calls"].as_array() {
                    open.extend(calls.iter().map(|c| c["id"].as_str().unwrap().to_string()));
                }
            }
        }
    }
}

fn user_text(turn: usize) -> String {
    match turn {
        0 => format!("turn 0: {CONSTRAINT}. Read the subscriptions page by page."),
        5 => format!("turn 5: remember the code word {FACT} for later"),
        n => format!("turn {n}: next page please"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_turns_at_a_16k_window() {
    let turns: usize = std::env::var("MPA_COMPACTION_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mock = MockModelServer::start().await;
    let summaries = Arc::new(AtomicUsize::new(0));
    mock.set_responder(script(Arc::clone(&summaries)));
    let env = env(&mock, 16).await;
    let mut table = Vec::new();
    for t in 0..turns {
        let (status, events) = env.turn("long", &user_text(t)).await;
        assert_eq!(status, TurnStatus::Completed, "turn {t}: {events:?}");
        let b = budgets(&events);
        assert_eq!(b.len(), 2, "turn {t}");
        for x in &b {
            assert_eq!(x.context_window_tokens, 16_000);
            assert!(
                x.estimated_input_tokens <= 16_000,
                "turn {t}: {} over the window",
                x.estimated_input_tokens
            );
        }
        table.push((
            t,
            b[0].estimated_input_tokens,
            b[1].estimated_input_tokens,
            b.iter().any(|x| x.compaction.is_some()),
        ));
        for req in mock.requests() {
            if is_summariser(&req) {
                continue;
            }
            assert_pairs(&req);
            let body = req.to_string();
            assert!(
                body.contains(CONSTRAINT),
                "turn {t}: the task's constraints are gone"
            );
            if t > 0 {
                assert!(body.contains(OBJECTIVE), "turn {t}: the plan is gone");
            }
        }
        mock.clear_requests();
    }
    assert!(summaries.load(Ordering::SeqCst) > 0, "compaction ran");
    if let Ok(path) = std::env::var("MPA_COMPACTION_TABLE") {
        let mut out = String::from(
            "| turn | first request (est. tokens) | second request | compacted |\n|---|---|---|---|\n",
        );
        for (t, a, b, c) in &table {
            if *t < 12 || t % 25 == 0 || *t + 1 == turns {
                out.push_str(&format!(
                    "| {t} | {a} | {b} | {} |\n",
                    if *c { "yes" } else { "" }
                ));
            }
        }
        let all: Vec<u64> = table.iter().flat_map(|r| [r.1, r.2]).collect();
        let compactions = table.iter().filter(|r| r.3).count();
        out.push_str(&format!(
            "\n{} requests: min {}, mean {}, max {} estimated tokens (window 16000, trigger 13600); \
             {} turns compacted, {} summariser calls.\n",
            all.len(),
            all.iter().min().unwrap(),
            all.iter().sum::<u64>() / all.len() as u64,
            all.iter().max().unwrap(),
            compactions,
            summaries.load(Ordering::SeqCst)
        ));
        std::fs::write(path, out).unwrap();
    }
    // Flat, not linear: the last turns cost no more than the early peak.
    let peak_early = table.iter().take(10).map(|r| r.2).max().unwrap();
    let late = table.iter().rev().take(10).map(|r| r.2).max().unwrap();
    assert!(
        late <= 16_000 && late <= peak_early.max(13_600),
        "{late} vs {peak_early}"
    );

    // The live context was compacted: the fact of turn 5 is not in it any more...
    let chat = env.agent.chat_for(&env.actor, "long").await.unwrap();
    let live = serde_json::to_string(&chat.agent_messages).unwrap();
    assert!(!live.contains(FACT));
    assert!(live.contains(CONSTRAINT));
    assert!(
        chat.agent_messages.len() < 40,
        "{}",
        chat.agent_messages.len()
    );
    // ...but session_search finds it in the evidence store, where every message is kept.
    let hub = env.agent.services().caps.history().cloned().unwrap();
    let found = mpa_core::history::search_json(
        &hub,
        &mpa_redact::UserKey::for_user(&env.actor.user_id),
        Some("long".into()),
        json!({"session_id": "long", "query": FACT}),
    )
    .await;
    assert!(found.to_string().contains(FACT), "{found}");
    let status = hub
        .status(&mpa_redact::UserKey::for_user(&env.actor.user_id))
        .await
        .unwrap();
    let v = serde_json::to_value(&status).unwrap();
    // 4 messages a turn (request, call, result, answer) plus the plan result of turn 0.
    assert_eq!(v["messages"], (4 * turns + 1) as i64, "{v}");
    assert!(
        v["compacted_messages"].as_i64().unwrap() > (3 * turns as i64),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_models_compact_on_their_real_token_count() {
    // The catalogue's windows (LLM_MAX_CONTEXT_TOKENS is ignored for known models).
    for (model, counter, window) in [
        ("gpt-3.5-turbo", "cl100k_base", 16_385u64),
        ("gpt-4o-mini", "o200k_base", 128_000),
    ] {
        let mock = MockModelServer::start().await;
        let summaries = Arc::new(AtomicUsize::new(0));
        mock.set_responder(script(Arc::clone(&summaries)));
        let env = env_with(&mock, model, 16).await;
        let mut compacted_at = None;
        for t in 0..60 {
            let (status, events) = env.turn("real", &user_text(t)).await;
            assert_eq!(
                status,
                TurnStatus::Completed,
                "{model} turn {t}: {events:?}"
            );
            for b in budgets(&events) {
                assert_eq!(b.estimator, counter, "{model}");
                assert_eq!(b.context_window_tokens, window, "{model}");
                // Exact counts: the budget is the sum of its parts, no ×1.5 on top.
                assert_eq!(
                    b.estimated_input_tokens,
                    b.message_tokens + b.system_tokens + b.tool_tokens + b.multimodal_tokens,
                    "{model}"
                );
                assert!(
                    b.estimated_input_tokens <= window,
                    "{model} turn {t}: {b:?}"
                );
                if let Some(c) = &b.compaction {
                    assert_eq!(c["status"], "compacted", "{model}: {c}");
                    let before = c["estimated_input_tokens_before"].as_u64().unwrap();
                    let after = c["estimated_input_tokens_after"].as_u64().unwrap();
                    // The trigger is 85 % of the window as the tokenizer counts it, and the
                    // rebuilt request comes down to the 60 % target.
                    assert!(before * 100 >= window * 85, "{model}: {c}");
                    assert!(after * 100 <= window * 60, "{model}: {c}");
                    // The report and the budget agree.
                    assert_eq!(after, b.estimated_input_tokens, "{model}: {c}");
                    compacted_at.get_or_insert(t);
                }
            }
            for req in mock.requests() {
                if !is_summariser(&req) {
                    assert_pairs(&req);
                    assert!(req.to_string().contains(CONSTRAINT), "{model} turn {t}");
                }
            }
            mock.clear_requests();
            if compacted_at.is_some_and(|c| t >= c + 3) {
                break;
            }
        }
        assert!(compacted_at.is_some(), "{model}: never compacted");
        assert!(summaries.load(Ordering::SeqCst) > 0, "{model}");
        let chat = env.agent.chat_for(&env.actor, "real").await.unwrap();
        assert_eq!(chat.session_state["usage"]["estimator"], counter, "{model}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_call_after_compaction_commits_nothing() {
    let mock = MockModelServer::start().await;
    let summaries = Arc::new(AtomicUsize::new(0));
    let fail_next_main = Arc::new(AtomicBool::new(false));
    let armed = Arc::new(AtomicBool::new(false));
    let inner = script(Arc::clone(&summaries));
    let (f, a) = (Arc::clone(&fail_next_main), Arc::clone(&armed));
    mock.set_responder(move |req| {
        if is_summariser(req) && a.load(Ordering::SeqCst) {
            f.store(true, Ordering::SeqCst);
        } else if !is_summariser(req) && f.swap(false, Ordering::SeqCst) {
            a.store(false, Ordering::SeqCst);
            return MockReply::status(500, r#"{"error":{"message":"boom"}}"#);
        }
        inner(req)
    });
    let env = env(&mock, 16).await;
    // Grow the history until one more turn would compact.
    let mut t = 0;
    loop {
        let before = summaries.load(Ordering::SeqCst);
        env.turn("f", &user_text(t)).await;
        t += 1;
        if summaries.load(Ordering::SeqCst) > before {
            break;
        }
    }
    for _ in 0..3 {
        env.turn("f", &user_text(t)).await;
        t += 1;
    }
    let before = env
        .agent
        .chat_for(&env.actor, "f")
        .await
        .unwrap()
        .agent_messages;
    mock.clear_requests();
    armed.store(true, Ordering::SeqCst);
    // Run turns until a compaction happens; its main call fails.
    let (status, events) = loop {
        let (status, events) = env.turn("f", &user_text(t)).await;
        t += 1;
        if status == TurnStatus::Failed {
            break (status, events);
        }
    };
    assert_eq!(status, TurnStatus::Failed);
    assert!(budgets(&events).iter().any(|b| b.compaction.is_some()));
    // Nothing was committed: the history is the old one plus this turn's request (and its
    // failure notice), with no new summary.
    let after = env
        .agent
        .chat_for(&env.actor, "f")
        .await
        .unwrap()
        .agent_messages;
    let summaries_in = |m: &[mpa_protocol::Message]| {
        m.iter()
            .filter(|x| x.metadata.get("lc_source").is_some())
            .count()
    };
    assert_eq!(summaries_in(&after), summaries_in(&before));
    assert!(
        after.len() > before.len(),
        "{} <= {}",
        after.len(),
        before.len()
    );
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "the old history is untouched"
    );
    let failed_before = budgets(&events)
        .iter()
        .find_map(|b| b.compaction.clone())
        .unwrap()["estimated_input_tokens_before"]
        .as_u64()
        .unwrap();
    // The next turn starts from that old history again (and compacts it, this time committed).
    let (status, events) = env.turn("f", &user_text(t)).await;
    assert_eq!(status, TurnStatus::Completed);
    let next = budgets(&events)
        .iter()
        .find_map(|b| b.compaction.clone())
        .expect("compacts again");
    assert_eq!(next["status"], "compacted");
    assert!(next["estimated_input_tokens_before"].as_u64().unwrap() >= failed_before);
    let chat = env
        .agent
        .chat_for(&env.actor, "f")
        .await
        .unwrap()
        .agent_messages;
    // Committed this time: one summary (the earlier one folded into it), a shorter history.
    assert_eq!(summaries_in(&chat), 1);
    assert!(chat.len() < after.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_summariser_keeps_the_original_context_and_says_so() {
    let mock = MockModelServer::start().await;
    mock.set_responder(|req: &Value| {
        if is_summariser(req) {
            return MockReply::status(500, r#"{"error":{"message":"summariser down"}}"#);
        }
        let msgs = req["messages"].as_array().unwrap();
        if msgs.last().unwrap()["role"] == "tool" {
            return MockReply::text("done");
        }
        // Six pages at once: the next request is over the window in one step.
        let calls: Vec<(String, Value)> = (0..12)
            .map(|i| (format!("c{i}"), json!({"page": i})))
            .collect();
        let refs: Vec<(&str, &str, Value)> = calls
            .iter()
            .map(|(id, a)| (id.as_str(), "list_subscriptions", a.clone()))
            .collect();
        MockReply::tool_calls(&refs)
    });
    let env = env(&mock, 16).await;
    let (status, events) = env.turn("sf", "turn 0: read six pages").await;
    assert_eq!(status, TurnStatus::Failed);
    let err = events
        .iter()
        .find_map(|e| match e {
            Event::Error { code, message, .. } => Some((code.clone(), message.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(err.0, "context_compaction_failed");
    assert!(
        err.1
            .starts_with("context compression failed, original context kept, retry later"),
        "{}",
        err.1
    );
    // The over-window request was never sent, and the history is whole.
    let main: Vec<Value> = mock
        .requests()
        .into_iter()
        .filter(|r| !is_summariser(r))
        .collect();
    assert_eq!(main.len(), 1);
    let chat = env.agent.chat_for(&env.actor, "sf").await.unwrap();
    assert_eq!(
        chat.agent_messages
            .iter()
            .filter(|m| m.role == mpa_protocol::Role::Tool)
            .count(),
        12
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_max_context_tokens_decides_when_to_compact() {
    for (window_k, expect_compaction) in [(16, true), (128, false)] {
        let mock = MockModelServer::start().await;
        let summaries = Arc::new(AtomicUsize::new(0));
        mock.set_responder(script(Arc::clone(&summaries)));
        let env = env(&mock, window_k).await;
        for t in 0..8 {
            let (status, _) = env.turn("w", &user_text(t)).await;
            assert_eq!(status, TurnStatus::Completed);
        }
        assert_eq!(
            summaries.load(Ordering::SeqCst) > 0,
            expect_compaction,
            "LLM_MAX_CONTEXT_TOKENS={window_k}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_context_length_error_compacts_and_retries_once() {
    // A 128 K window: the host's own estimate never asks for a compaction, but the server's
    // real window is smaller and says so.
    let mock = MockModelServer::start().await;
    let summaries = Arc::new(AtomicUsize::new(0));
    let overflow = Arc::new(AtomicBool::new(false));
    let inner = script(Arc::clone(&summaries));
    let armed = Arc::clone(&overflow);
    mock.set_responder(move |req: &Value| {
        if !is_summariser(req) && armed.swap(false, Ordering::SeqCst) {
            return MockReply::status(
                400,
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
            );
        }
        inner(req)
    });
    let e1 = env(&mock, 128).await;
    for turn in 0..12 {
        let (status, _) = e1.turn("of", &user_text(turn)).await;
        assert_eq!(status, TurnStatus::Completed);
    }
    assert_eq!(summaries.load(Ordering::SeqCst), 0);
    let before = mock.request_count();
    overflow.store(true, Ordering::SeqCst);
    let (status, events) = e1.turn("of", &user_text(12)).await;
    assert_eq!(status, TurnStatus::Completed, "{events:?}");
    assert_eq!(summaries.load(Ordering::SeqCst), 1);
    let requests = mock.requests();
    let turn_requests = &requests[before..];
    // The refused request, the summariser, the retried request (smaller), the tool round.
    let refused = &turn_requests[0];
    assert!(!is_summariser(refused));
    assert!(is_summariser(&turn_requests[1]));
    let retried = &turn_requests[2];
    assert!(
        retried["messages"].as_array().unwrap().len()
            < refused["messages"].as_array().unwrap().len()
    );
    assert_pairs(retried);
    assert!(
        !events.iter().any(|e| matches!(e, Event::Error { .. })),
        "{events:?}"
    );

    // With nothing to compact, the refused request is not sent again: the turn fails and says
    // what the user can do.
    let mock2 = MockModelServer::start().await;
    mock2.push(MockReply::status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
    ));
    mock2.set_default(MockReply::status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
    ));
    let env2 = env(&mock2, 128).await;
    let (status, events) = env2.turn("of2", "turn 0: hello").await;
    assert_eq!(status, TurnStatus::Failed);
    let code = events.iter().find_map(|e| match e {
        Event::Error { code, .. } => Some(code.clone()),
        _ => None,
    });
    assert_eq!(code.as_deref(), Some("model_context_exceeded"));
    assert_eq!(mock2.request_count(), 1);
}

/// Regression (issue 24, item 8): a compaction in a chat's first turn made its title "[Summary
/// of the earlier conversation…" — the title was taken from the first user-role message, and
/// after the compaction that is the host's summary. Titles come only from what the user wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_never_becomes_the_chat_title() {
    let mock = MockModelServer::start().await;
    let calls = AtomicUsize::new(0);
    mock.set_responder(move |req: &Value| {
        if is_summariser(req) {
            return MockReply::text("Task: read pages of 20; nothing deleted.");
        }
        let msgs = req["messages"].as_array().unwrap();
        let n = calls.fetch_add(1, Ordering::SeqCst);
        if msgs.last().unwrap()["role"] == "user" && n > 0 || n >= 16 {
            return MockReply::text("all pages read");
        }
        let id = format!("page{n}");
        MockReply::tool_calls(&[(id.as_str(), "list_subscriptions", json!({"page": n}))])
    });
    let env = env(&mock, 16).await;
    let (status, events) = env.turn("first", "订阅列表 please read every page").await;
    assert_eq!(status, TurnStatus::Completed, "{events:?}");
    assert!(
        events.iter().any(|e| matches!(e, Event::Compacted { .. })),
        "the first turn compacted"
    );
    let chat = env.agent.chat_for(&env.actor, "first").await.unwrap();
    assert_eq!(chat.title, "订阅列表 please read every page");
    // Later turns keep it.
    let (status, _) = env.turn("first", "and again").await;
    assert_eq!(status, TurnStatus::Completed);
    let chat = env.agent.chat_for(&env.actor, "first").await.unwrap();
    assert_eq!(chat.title, "订阅列表 please read every page");
}
