//! Tool-loop guardrails end to end (issue 27; spec learning-guardrails.md §5): the mock model
//! replays each loop, and each test names the call (`c<step>`) where the warning, the block and
//! the halt appear, and — from the tool's own run counter — that a blocked call ran nothing.
//! `test` (like the web page) warns only; `telegram` (a message channel nobody watches) stops.

use crate::common::host::{TestHost, Turn, learning_caps};
use async_trait::async_trait;
use mpa_core::capability::Recall;
use mpa_core::tools::guardrails::LoopClass;
use mpa_core::tools::{ToolContext, ToolMeta, ToolOutput, json_tool};
use mpa_protocol::{EffectClass, Event, Outcome, Role, ToolSpec, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const STOPS: &str = "telegram";
const WARNS: &str = "test";

type Answer = fn(&Value, usize) -> ToolOutput;

/// A test tool answering by a function of its arguments and its run number; counts its runs.
struct Scripted {
    name: &'static str,
    meta: ToolMeta,
    runs: Arc<AtomicUsize>,
    answer: Answer,
    delay: Duration,
}

#[async_trait]
impl mpa_core::tools::JsonTool for Scripted {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.into(),
            description: format!("test tool {}", self.name),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        self.meta
    }
    async fn call(&self, _ctx: ToolContext, args: Value) -> ToolOutput {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let n = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        (self.answer)(&args, n)
    }
}

struct Counted {
    runs: Arc<AtomicUsize>,
}

impl Counted {
    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

fn tool(
    name: &'static str,
    meta: ToolMeta,
    answer: Answer,
) -> (Arc<dyn mpa_core::tools::Tool>, Counted) {
    slow_tool(name, meta, answer, Duration::ZERO)
}

fn slow_tool(
    name: &'static str,
    meta: ToolMeta,
    answer: Answer,
    delay: Duration,
) -> (Arc<dyn mpa_core::tools::Tool>, Counted) {
    let runs = Arc::new(AtomicUsize::new(0));
    let t = json_tool(Scripted {
        name,
        meta,
        runs: Arc::clone(&runs),
        answer,
        delay,
    });
    (t, Counted { runs })
}

fn not_found(_: &Value, _: usize) -> ToolOutput {
    ToolOutput::failure("not_found", "no item with that id")
}

fn same_rows(_: &Value, _: usize) -> ToolOutput {
    ToolOutput::json(
        &json!({"success": true, "rows": ["Dune"]}),
        Outcome::Succeeded,
    )
}

fn saved(_: &Value, _: usize) -> ToolOutput {
    ToolOutput::json(&json!({"success": true, "saved": true}), Outcome::Succeeded)
}

fn new_rows(_: &Value, n: usize) -> ToolOutput {
    ToolOutput::json(&json!({"success": true, "rows": n}), Outcome::Succeeded)
}

fn write() -> ToolMeta {
    ToolMeta::new(EffectClass::ReversibleWrite)
}

async fn host(mock: &MockModelServer, tools: Vec<Arc<dyn mpa_core::tools::Tool>>) -> TestHost {
    let mut b = TestHost::builder(mock, "gpt-4o").diagnostic_tools(false);
    for t in tools {
        b = b.tool(t);
    }
    b.build().await
}

/// One model response per step: `c1`, `c2`, … calling `name` with the arguments of each step.
fn script(mock: &MockModelServer, name: &str, args: &[Value]) {
    for (i, a) in args.iter().enumerate() {
        mock.push(MockReply::tool_calls(&[(
            &format!("c{}", i + 1),
            name,
            a.clone(),
        )]));
    }
}

/// The result text the model read for each call, by call id, in order.
async fn results(host: &TestHost, session: &str) -> Vec<(String, String)> {
    host.messages(session)
        .await
        .into_iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.clone().unwrap_or_default(), m.text()))
        .collect()
}

/// The calls whose result carries `marker`.
async fn marked(host: &TestHost, session: &str, marker: &str) -> Vec<String> {
    results(host, session)
        .await
        .into_iter()
        .filter(|(_, text)| text.contains(marker))
        .map(|(id, _)| id)
        .collect()
}

fn ids(range: std::ops::RangeInclusive<usize>) -> Vec<String> {
    range.map(|i| format!("c{i}")).collect()
}

fn assert_halted(turn: &Turn, code: &str) {
    assert_eq!(turn.status, TurnStatus::Blocked, "{:?}", turn.events);
    assert_eq!(turn.halt.as_ref().map(|h| h.code.as_str()), Some(code));
    assert!(
        turn.final_text.starts_with("本轮未完成："),
        "{}",
        turn.final_text
    );
    assert!(turn.final_text.contains("This turn is not finished"));
    // The host's message is streamed to the user like an answer.
    assert!(
        turn.events
            .iter()
            .any(|e| matches!(e, Event::Delta { content } if *content == turn.final_text))
    );
}

/// The same failing call at odd steps, other reads between them (so no streak of identical
/// calls forms: five of those halt sooner, see the streak test).
fn failing_at_odd_steps(mock: &MockModelServer, steps: usize) {
    for i in 1..=steps {
        let (name, args) = if i % 2 == 1 {
            ("lookup", json!({"id": 7}))
        } else {
            ("rows", json!({"q": i}))
        };
        mock.push(MockReply::tool_calls(&[(&format!("c{i}"), name, args)]));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_failing_call_warns_from_the_second_and_is_blocked_after_the_fifth() {
    let mock = MockModelServer::start().await;
    let (lookup, counted) = tool("lookup", ToolMeta::read(), not_found);
    let (rows, _) = tool("rows", ToolMeta::read(), same_rows);
    let h = host(&mock, vec![lookup, rows]).await;
    failing_at_odd_steps(&mock, 11);
    let turn = h.turn_on(STOPS, "exact", "find item 7").await;
    assert_halted(&turn, "repeated_exact_failure_block");
    assert_eq!(counted.runs(), 5, "the sixth call dispatched nothing");
    assert_eq!(mock.requests().len(), 11, "no model call after the halt");
    assert_eq!(
        marked(
            &h,
            "exact",
            "[Tool loop warning: repeated_exact_failure_warning"
        )
        .await,
        ["c3", "c5", "c7", "c9"]
    );
    let all = results(&h, "exact").await;
    assert!(all[2].1.contains("count=2;") && all[8].1.contains("count=5;"));
    let blocked: Value = serde_json::from_str(&all[10].1).unwrap();
    assert_eq!(blocked["error"], "repeated_exact_failure_block");
    assert!(
        blocked["message"]
            .as_str()
            .unwrap()
            .starts_with("not executed: ")
    );
    assert_eq!(blocked["guardrail"]["count"], 5);
    assert!(blocked["guardrail"]["signature"]["args_hash"].is_string());
    let stored = h.messages("exact").await;
    let c11 = stored
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("c11"))
        .unwrap();
    assert_eq!(c11.outcome, Some(Outcome::Failed));

    // Where someone watches (the web page), the same loop only warns.
    let mock = MockModelServer::start().await;
    let (lookup, counted) = tool("lookup", ToolMeta::read(), not_found);
    let (rows, _) = tool("rows", ToolMeta::read(), same_rows);
    let h = host(&mock, vec![lookup, rows]).await;
    failing_at_odd_steps(&mock, 13);
    mock.push(MockReply::text("item 7 does not exist"));
    let turn = h.turn_on(WARNS, "exact", "find item 7").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(counted.runs(), 7);
    assert_eq!(
        marked(&h, "exact", "repeated_exact_failure_warning").await,
        ["c3", "c5", "c7", "c9", "c11", "c13"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_tool_failing_with_other_arguments_warns_from_the_third_and_halts_at_the_eighth() {
    let mock = MockModelServer::start().await;
    let (lookup, counted) = tool("lookup", ToolMeta::read(), not_found);
    let h = host(&mock, vec![lookup]).await;
    let args: Vec<Value> = (1..=8).map(|i| json!({"id": i})).collect();
    script(&mock, "lookup", &args);
    let turn = h.turn_on(STOPS, "same", "find any item").await;
    assert_halted(&turn, "same_tool_failure_halt");
    assert_eq!(counted.runs(), 8);
    assert_eq!(
        marked(&h, "same", "[Tool loop warning: same_tool_failure_warning").await,
        ids(3..=7)
    );
    assert_eq!(
        marked(
            &h,
            "same",
            "[Tool loop hard stop: same_tool_failure_halt; count=8;"
        )
        .await,
        ids(8..=8)
    );

    // A terminal's distinct failures are diagnosis: warned about, never halted.
    let mock = MockModelServer::start().await;
    let (shell, counted) = tool(
        "shell",
        ToolMeta::new(EffectClass::ArbitraryExecution).loop_class(LoopClass::TERMINAL),
        not_found,
    );
    let h = host(&mock, vec![shell]).await;
    let args: Vec<Value> = (1..=9).map(|i| json!({"action": "run", "n": i})).collect();
    script(&mock, "shell", &args);
    mock.push(MockReply::text("the command keeps failing"));
    let turn = h.turn_on(STOPS, "tolerant", "run it").await;
    assert_eq!(turn.status, TurnStatus::Completed, "{:?}", turn.halt);
    assert_eq!(counted.runs(), 9);
    let warned = marked(&h, "tolerant", "same_tool_failure_warning").await;
    assert_eq!(warned, ids(3..=9));
    let all = results(&h, "tolerant").await;
    assert!(all[2].1.contains("pwd && ls -la"), "{}", all[2].1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_read_result_warns_from_the_second_and_is_blocked_after_the_fifth() {
    let mock = MockModelServer::start().await;
    let (rows, counted) = tool("rows", ToolMeta::read(), same_rows);
    let h = host(&mock, vec![rows]).await;
    // The same read (odd steps) between other reads, so no streak or cycle forms.
    let args: Vec<Value> = (1..=11)
        .map(|i| {
            if i % 2 == 1 {
                json!({"q": "dune"})
            } else {
                json!({"q": format!("other {i}")})
            }
        })
        .collect();
    script(&mock, "rows", &args);
    let turn = h.turn_on(STOPS, "reads", "list dune").await;
    assert_halted(&turn, "idempotent_no_progress_block");
    assert_eq!(counted.runs(), 10, "the sixth identical read ran nothing");
    assert_eq!(
        marked(
            &h,
            "reads",
            "[Tool loop warning: idempotent_no_progress_warning"
        )
        .await,
        ["c3", "c5", "c7", "c9"]
    );
    let all = results(&h, "reads").await;
    assert!(all[2].1.contains("count=2;") && all[8].1.contains("count=5;"));
    assert!(all[10].1.contains("idempotent_no_progress_block"));
    assert!(marked(&h, "reads", "[Host note").await.is_empty());

    // A read whose result changes is progress, however often it runs.
    let mock = MockModelServer::start().await;
    let (rows, counted) = tool("rows", ToolMeta::read(), new_rows);
    let h = host(&mock, vec![rows]).await;
    script(&mock, "rows", &vec![json!({"q": "dune"}); 7]);
    mock.push(MockReply::text("seven pages"));
    let turn = h.turn_on(STOPS, "changing", "list dune").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(counted.runs(), 7);
    assert!(marked(&h, "changing", "[Tool loop").await.is_empty());
    assert!(marked(&h, "changing", "[Host note").await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn identical_consecutive_calls_get_a_note_from_the_third_and_halt_at_the_fifth() {
    let mock = MockModelServer::start().await;
    let (save, counted) = tool("save", write(), saved);
    let h = host(&mock, vec![save]).await;
    script(&mock, "save", &vec![json!({"k": 1}); 5]);
    let turn = h.turn_on(STOPS, "streak", "save it").await;
    assert_halted(&turn, "identical_call_streak_halt");
    assert_eq!(counted.runs(), 5);
    let notes = marked(&h, "streak", "consecutive identical call to save").await;
    assert_eq!(notes, ids(3..=5));
    let all = results(&h, "streak").await;
    assert!(
        all[2]
            .1
            .contains("this is the 3rd consecutive identical call")
    );
    assert!(
        all[4]
            .1
            .contains("[Tool loop hard stop: identical_call_streak_halt; count=5;")
    );

    let mock = MockModelServer::start().await;
    let (save, counted) = tool("save", write(), saved);
    let h = host(&mock, vec![save]).await;
    script(&mock, "save", &vec![json!({"k": 1}); 6]);
    mock.push(MockReply::text("saved"));
    let turn = h.turn_on(WARNS, "streak", "save it").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(counted.runs(), 6);
    assert_eq!(
        marked(&h, "streak", "consecutive identical call").await,
        ids(3..=6)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cycle_of_two_calls_is_noted_after_three_laps_and_halts_after_five() {
    let mock = MockModelServer::start().await;
    let (ping, pings) = tool("ping", write(), saved);
    let (pong, pongs) = tool("pong", write(), saved);
    let h = host(&mock, vec![ping, pong]).await;
    for i in 1..=10 {
        let name = if i % 2 == 1 { "ping" } else { "pong" };
        mock.push(MockReply::tool_calls(&[(
            &format!("c{i}"),
            name,
            json!({}),
        )]));
    }
    let turn = h.turn_on(STOPS, "cycle", "ping pong").await;
    assert_halted(&turn, "identical_cycle_halt");
    assert_eq!((pings.runs(), pongs.runs()), (5, 5));
    assert_eq!(
        marked(&h, "cycle", "repeated the same cycle of 2 tool calls").await,
        ids(6..=10)
    );
    let all = results(&h, "cycle").await;
    assert!(all[5].1.contains("the last 3 rounds"), "{}", all[5].1);
    assert!(
        all[9]
            .1
            .contains("[Tool loop hard stop: identical_cycle_halt; count=5;")
    );

    // A cycle of three, watched: noted after three laps, never stopped.
    let mock = MockModelServer::start().await;
    let tools = ["a", "b", "c"].map(|n| tool(n, write(), saved));
    let h = host(&mock, tools.iter().map(|(t, _)| Arc::clone(t)).collect()).await;
    for i in 1..=9 {
        let name = ["a", "b", "c"][(i - 1) % 3];
        mock.push(MockReply::tool_calls(&[(
            &format!("c{i}"),
            name,
            json!({}),
        )]));
    }
    mock.push(MockReply::text("done"));
    let turn = h.turn_on(WARNS, "three", "go round").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(
        marked(&h, "three", "cycle of 3 tool calls").await,
        ids(9..=9)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_successful_write_starts_the_failure_count_over() {
    let mock = MockModelServer::start().await;
    let (lookup, _) = tool("lookup", ToolMeta::read(), not_found);
    let (save, _) = tool("save", write(), saved);
    let h = host(&mock, vec![lookup, save]).await;
    let steps = [
        ("lookup", json!({"id": 7})),
        ("lookup", json!({"id": 7})),
        ("save", json!({"id": 7})),
        ("lookup", json!({"id": 7})),
        ("lookup", json!({"id": 7})),
    ];
    for (i, (name, args)) in steps.iter().enumerate() {
        mock.push(MockReply::tool_calls(&[(
            &format!("c{}", i + 1),
            name,
            args.clone(),
        )]));
    }
    mock.push(MockReply::text("created and found"));
    h.turn_on(WARNS, "reset", "create item 7").await;
    // c2 warns; the write at c3 is a new experiment: c4 counts 1 again, c5 counts 2.
    assert_eq!(
        marked(&h, "reset", "repeated_exact_failure_warning").await,
        ["c2", "c5"]
    );
    assert!(results(&h, "reset").await[4].1.contains("count=2;"));
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_results_are_counted_in_the_order_the_model_emitted_them() {
    let mock = MockModelServer::start().await;
    // `slow` finishes after `fast` in every batch; the model emitted it first.
    let (slow, _) = slow_tool("slow", write(), saved, Duration::from_millis(50));
    let (fast, _) = tool("fast", write(), saved);
    let h = host(&mock, vec![slow, fast]).await;
    for lap in 0..3 {
        mock.push(MockReply::tool_calls(&[
            (&format!("s{lap}"), "slow", json!({})),
            (&format!("f{lap}"), "fast", json!({})),
        ]));
    }
    mock.push(MockReply::text("done"));
    assert_eq!(
        h.turn_on(WARNS, "par", "both").await.status,
        TurnStatus::Completed
    );
    // The sixth call in emission order closes the third lap: `fast` of the third batch.
    assert_eq!(marked(&h, "par", "repeated the same cycle").await, ["f2"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn polling_a_running_terminal_thirty_times_is_not_flagged() {
    let mock = MockModelServer::start().await;
    let h = TestHost::builder(&mock, "gpt-4o")
        .admin()
        .caps(learning_caps)
        .build()
        .await;
    mock.push(MockReply::tool_calls(&[(
        "start",
        "execute_command",
        json!({"action": "start", "command": "sleep 60", "use_pty": false, "yield_time_ms": 0}),
    )]));
    // The session id is the first the scope hands out; read it back before polling.
    mock.push(MockReply::text("started"));
    h.turn_on(STOPS, "poll", "start a long job").await;
    let started: Value = serde_json::from_str(&results(&h, "poll").await[0].1).unwrap();
    let sid = started["session_id"].as_str().unwrap().to_string();
    for i in 1..=30 {
        mock.push(MockReply::tool_calls(&[(
            &format!("w{i}"),
            "execute_command",
            json!({"action": "wait", "session_id": sid, "timeout_ms": 10}),
        )]));
    }
    // Not every action of the tool is exempt: the same command run three times is noted.
    for i in 1..=3 {
        mock.push(MockReply::tool_calls(&[(
            &format!("r{i}"),
            "execute_command",
            json!({"action": "run", "command": "echo same"}),
        )]));
    }
    mock.push(MockReply::tool_calls(&[(
        "kill",
        "execute_command",
        json!({"action": "kill", "session_id": sid}),
    )]));
    mock.push(MockReply::text("still running; stopped it"));
    let turn = h.turn_on(STOPS, "poll", "wait for it").await;
    assert_eq!(turn.status, TurnStatus::Completed, "{:?}", turn.halt);
    let all = results(&h, "poll").await;
    let waits: Vec<&(String, String)> = all.iter().filter(|(id, _)| id.starts_with('w')).collect();
    assert_eq!(waits.len(), 30);
    for (id, text) in &waits {
        assert!(
            !text.contains("[Tool loop") && !text.contains("[Host note"),
            "{id}: {text}"
        );
    }
    assert_eq!(
        marked(&h, "poll", "consecutive identical call to execute_command").await,
        ["r3"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn thirty_identical_session_searches_are_flagged() {
    let mock = MockModelServer::start().await;
    let h = TestHost::builder(&mock, "gpt-4o")
        .caps(|d| {
            mpa_core::Capabilities::default().with(Recall::new(mpa_history::History::new(
                mpa_history::HistoryConfig::new(d.join("history")),
            )))
        })
        .build()
        .await;
    let args = json!({"query": "三体 下载"});
    script(&mock, "session_search", &vec![args; 30]);
    mock.push(MockReply::text("nothing found"));
    let turn = h.turn_on(WARNS, "search", "did I download 三体?").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    let all = results(&h, "search").await;
    assert_eq!(all.len(), 30);
    assert_eq!(
        marked(&h, "search", "idempotent_no_progress_warning").await,
        ids(2..=30)
    );
    assert_eq!(
        marked(&h, "search", "consecutive identical call to session_search").await,
        ids(3..=30)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn web_searches_are_budgeted_per_turn_before_a_batch_runs() {
    let mock = MockModelServer::start().await;
    // A tool registered under the web-search name is budgeted by that name alone.
    let (search, searches) = tool("search_web", ToolMeta::read(), new_rows);
    let h = host(&mock, vec![search]).await;
    for batch in 0..4 {
        let calls: Vec<(String, &str, Value)> = (0..20)
            .map(|i| {
                (
                    format!("b{batch}-{i}"),
                    "search_web",
                    json!({"query": format!("q {batch} {i}")}),
                )
            })
            .collect();
        let calls: Vec<(&str, &str, Value)> = calls
            .iter()
            .map(|(id, n, a)| (id.as_str(), *n, a.clone()))
            .collect();
        mock.push(MockReply::tool_calls(&calls));
    }
    mock.push(MockReply::text("enough searching"));
    let turn = h.turn_on(WARNS, "budget", "search a lot").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    assert!(
        turn.halt.is_none(),
        "a spent budget refuses, it does not stop the turn"
    );
    // 40 searches were made when the third batch started: it ran whole and crossed 50.
    assert_eq!(searches.runs(), 60);
    let refused = marked(&h, "budget", "loop_web_search_cap").await;
    assert_eq!(refused.len(), 20);
    assert!(refused.iter().all(|id| id.starts_with("b3-")));
    let all = results(&h, "budget").await;
    let first_refused = all.iter().find(|(id, _)| id == "b3-0").unwrap();
    assert!(
        first_refused
            .1
            .contains("not executed: already made 60 web searches")
    );

    // Subagents: once 50 launched, launching is refused, a status poll still runs.
    let mock = MockModelServer::start().await;
    let (agents, launched) = tool("subagent_task", ToolMeta::read(), new_rows);
    let h = host(&mock, vec![agents]).await;
    let tasks: Vec<Value> = (0..50).map(|i| json!({"goal": i})).collect();
    mock.push(MockReply::tool_calls(&[(
        "launch",
        "subagent_task",
        json!({"tasks": tasks}),
    )]));
    mock.push(MockReply::tool_calls(&[
        ("more", "subagent_task", json!({"goal": "one more"})),
        ("status", "subagent_task", json!({"action": "status"})),
    ]));
    mock.push(MockReply::text("fifty running"));
    h.turn_on(WARNS, "agents", "split the work").await;
    assert_eq!(launched.runs(), 2, "the launch of 50 and the status poll");
    assert_eq!(marked(&h, "agents", "loop_subagent_cap").await, ["more"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_next_turn_starts_counting_afresh() {
    let mock = MockModelServer::start().await;
    let (lookup, _) = tool("lookup", ToolMeta::read(), not_found);
    let h = host(&mock, vec![lookup]).await;
    // Five identical failures in a row: the fifth halts (the streak of identical calls).
    script(&mock, "lookup", &vec![json!({"id": 7}); 5]);
    let turn = h.turn_on(STOPS, "fresh", "find 7").await;
    assert_halted(&turn, "identical_call_streak_halt");
    mock.push(MockReply::tool_calls(&[(
        "again",
        "lookup",
        json!({"id": 7}),
    )]));
    mock.push(MockReply::text("still missing"));
    let turn = h.turn_on(STOPS, "fresh", "try once more").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    let all = results(&h, "fresh").await;
    let again = &all.iter().find(|(id, _)| id == "again").unwrap().1;
    assert!(!again.contains("[Tool loop"), "{again}");
}
