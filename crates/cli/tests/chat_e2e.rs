//! End-to-end: the real `mpagent` binary against the mock model server (real SSE on 127.0.0.1).
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's panic is its failure report"
)]

use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use crate::common;
use common::{API_KEY, Run, mpagent, run, send_signal};

fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad event line {l:?}: {e}")))
        .collect()
}

/// A compact, order-preserving rendering of the event stream (deltas merged).
fn compact(events: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let s = match e["type"].as_str().unwrap() {
            "turn_started" => "turn_started".to_string(),
            "delta" => {
                let c = e["content"].as_str().unwrap();
                if let Some(last) = out.last_mut()
                    && last.starts_with("delta:")
                {
                    last.push_str(c);
                    continue;
                }
                format!("delta:{c}")
            }
            "tool_started" => format!("tool_started:{}", e["tool_id"].as_str().unwrap()),
            "tool_finished" => format!(
                "tool_finished:{}:{}",
                e["tool_id"].as_str().unwrap(),
                e["outcome"].as_str().unwrap()
            ),
            "plan_updated" => "plan_updated".to_string(),
            "usage" | "budget" => continue,
            "error" => format!("error:{}", e["code"].as_str().unwrap()),
            "turn_ended" => format!("turn_ended:{}", e["status"].as_str().unwrap()),
            other => other.to_string(),
        };
        out.push(s);
    }
    out
}

fn chat_row(data: &Path, session: &str) -> Option<(String, Value, Value, i64)> {
    let c = rusqlite::Connection::open(data.join("agent.db")).unwrap();
    c.query_row(
        "SELECT user_id, agent_messages, display_messages, message_count FROM chats WHERE session_id = ?1",
        [session],
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                serde_json::from_str(&r.get::<_, String>(1)?).unwrap(),
                serde_json::from_str(&r.get::<_, String>(2)?).unwrap(),
                r.get::<_, i64>(3)?,
            ))
        },
    )
    .ok()
}

fn plan_args() -> Value {
    json!({
        "objective": "Check the two tools",
        "steps": [
            {"step": "Echo a value", "status": "in_progress"},
            {"step": "Sleep briefly", "status": "pending"}
        ]
    })
}

fn system_text(req: &Value) -> String {
    req["messages"][0]["content"].as_str().unwrap().to_string()
}

/// The text of the request's final message, where the current plan travels.
fn last_text(req: &Value) -> String {
    let m = req["messages"].as_array().unwrap();
    m.last().unwrap()["content"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_then_parallel_tools_then_answer_and_restart_restores_plan() {
    let mock = MockModelServer::start().await;
    mock.push(MockReply::tool_calls(&[(
        "call_plan",
        "update_plan",
        plan_args(),
    )]));
    mock.push(MockReply::tool_calls(&[
        ("call_a", "test_echo", json!({"text": "hello"})),
        ("call_b", "test_sleep", json!({"ms": 200})),
    ]));
    mock.push(MockReply::text("Both tools ran: echo and sleep."));
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = mpagent(dir.path(), &mock);
    cmd.args([
        "chat",
        "--user",
        "alice",
        "--session",
        "s1",
        "--output",
        "jsonl",
        "run both tools",
    ]);
    let r = run(cmd).await;
    assert_eq!(r.code, 0, "stderr: {}", r.stderr);
    assert!(!r.stderr.contains(API_KEY) && !r.stdout.contains(API_KEY));

    assert_eq!(
        compact(&events(&r.stdout)),
        vec![
            "turn_started",
            "tool_started:call_plan",
            "tool_finished:call_plan:succeeded",
            "plan_updated",
            "tool_started:call_a",
            "tool_started:call_b",
            "tool_finished:call_a:succeeded",
            "tool_finished:call_b:succeeded",
            "delta:Both tools ran: echo and sleep.",
            "turn_ended:completed",
        ]
    );

    // What the model received.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0]["model"], "gpt-4o");
    assert_eq!(reqs[0]["stream"], true);
    assert!(system_text(&reqs[0]).contains("<task_planning>"));
    assert!(!system_text(&reqs[0]).contains("<current_task_plan>"));
    let tool_names: Vec<&str> = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tool_names.contains(&"update_plan") && tool_names.contains(&"test_echo"));
    // Second request: plan block present at the end (the system prompt never changes within a
    // session, so provider prompt caches hit), the plan call answered with its id.
    assert_eq!(system_text(&reqs[1]), system_text(&reqs[0]));
    assert_eq!(system_text(&reqs[2]), system_text(&reqs[0]));
    let tail2 = last_text(&reqs[1]);
    assert!(tail2.contains("<current_task_plan>"), "{tail2}");
    assert!(tail2.contains("Check the two tools"));
    assert!(!last_text(&reqs[0]).contains("<current_task_plan>"));
    let m2 = reqs[1]["messages"].as_array().unwrap();
    assert_eq!(m2[1], json!({"role": "user", "content": "run both tools"}));
    assert_eq!(m2[2]["role"], "assistant");
    assert_eq!(m2[2]["tool_calls"][0]["id"], "call_plan");
    assert_eq!(m2[3]["role"], "tool");
    assert_eq!(m2[3]["tool_call_id"], "call_plan");
    assert!(
        m2[3]["content"]
            .as_str()
            .unwrap()
            .starts_with("{\"success\":true")
    );
    assert!(m2[3].get("outcome").is_none() && m2[3].get("metadata").is_none());
    // Third request: both results paired with their call ids, in call order.
    let m3 = reqs[2]["messages"].as_array().unwrap();
    let n = m3.len();
    assert_eq!(m3[n - 2]["tool_call_id"], "call_a");
    assert!(m3[n - 2]["content"].as_str().unwrap().contains("hello"));
    assert_eq!(m3[n - 1]["tool_call_id"], "call_b");
    assert_eq!(m3[n - 3]["tool_calls"].as_array().unwrap().len(), 2);

    // The chat snapshot in agent.db.
    let (_owner, agent, display, count) = chat_row(dir.path(), "s1").unwrap();
    let roles: Vec<&str> = agent
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        vec![
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "tool",
            "assistant"
        ]
    );
    assert_eq!(count, 7);
    let msgs = agent.as_array().unwrap();
    assert_eq!(msgs[2]["outcome"], "succeeded");
    assert_eq!(msgs[4]["outcome"], "succeeded");
    assert_eq!(msgs[6]["content"], "Both tools ran: echo and sleep.");
    assert_eq!(
        msgs[6]["metadata"]["moviepilot_task_plan"]["objective"],
        "Check the two tools"
    );
    let display = display.as_array().unwrap();
    assert_eq!(display.first().unwrap()["content"], "run both tools");
    assert_eq!(display.last().unwrap()["role"], "assistant");

    // Restart: a second process continues the session; its first request carries the plan.
    mock.push(MockReply::text("Still on it."));
    let mut cmd = mpagent(dir.path(), &mock);
    cmd.args([
        "chat",
        "--user",
        "alice",
        "--session",
        "s1",
        "how is it going?",
    ]);
    let r = run(cmd).await;
    assert_eq!(r.code, 0, "stderr: {}", r.stderr);
    assert_eq!(r.stdout.trim(), "Still on it.");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 4);
    assert_eq!(system_text(&reqs[3]), system_text(&reqs[0]));
    let tail = last_text(&reqs[3]);
    assert!(tail.contains("<current_task_plan>") && tail.contains("Check the two tools"));
    // The whole earlier conversation was sent again, ending with the new question.
    let m = reqs[3]["messages"].as_array().unwrap();
    assert_eq!(m.len(), 1 + 7 + 1);
    assert!(tail.starts_with("how is it going?\n\n<current_task_plan>"));

    // Another user cannot continue alice's session: it is "not found".
    let mut cmd = mpagent(dir.path(), &mock);
    cmd.args(["chat", "--user", "mallory", "--session", "s1", "show me"]);
    let r = run(cmd).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("session not found"), "{}", r.stderr);
    assert_eq!(mock.requests().len(), 4);
}

async fn wait_for_line(child: &mut Child, pred: impl Fn(&Value) -> bool) -> Vec<String> {
    let stdout = child.stdout.as_mut().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(90), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for output; seen: {seen:?}"))
            .unwrap()
            .expect("stdout closed early");
        let v: Value = serde_json::from_str(&line).unwrap();
        seen.push(line);
        if pred(&v) {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_mid_stream_keeps_what_was_received() {
    let mock = MockModelServer::start().await;
    mock.push(MockReply::text("partial answer that never finishes").stall_after(3));
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = mpagent(dir.path(), &mock);
    cmd.args([
        "chat",
        "--user",
        "bob",
        "--session",
        "st",
        "--output",
        "jsonl",
        "talk",
    ]);
    let mut child = cmd.spawn().unwrap();
    wait_for_line(&mut child, |v| v["type"] == "delta").await;
    send_signal(&child, libc::SIGINT);
    let out = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(mock.requests().len(), 1);
    let (_, agent, _, _) = chat_row(dir.path(), "st").unwrap();
    let msgs = agent.as_array().unwrap();
    assert_eq!(msgs[0]["content"], "talk");
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(msgs[1]["metadata"]["interrupted"], true);
    assert!(!msgs[1]["content"].as_str().unwrap().is_empty());
    assert_eq!(
        msgs.last().unwrap()["metadata"]["moviepilot_interruption"],
        true
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_mid_tool_dispatches_nothing_more_and_records_unknown() {
    let mock = MockModelServer::start().await;
    mock.push(MockReply::tool_calls(&[
        ("call_slow", "test_sleep", json!({"ms": 60000})),
        ("call_fast", "test_echo", json!({"text": "quick"})),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = mpagent(dir.path(), &mock);
    cmd.args([
        "chat",
        "--user",
        "bob",
        "--session",
        "sm",
        "--output",
        "jsonl",
        "go",
    ]);
    let mut child = cmd.spawn().unwrap();
    wait_for_line(&mut child, |v| {
        v["type"] == "tool_finished" && v["tool_id"] == "call_fast"
    })
    .await;
    send_signal(&child, libc::SIGINT);
    let out = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(130));
    let rest = String::from_utf8_lossy(&out.stdout);
    let tail = compact(&events(&rest));
    assert_eq!(
        tail,
        vec!["tool_finished:call_slow:unknown", "turn_ended:stopped"]
    );
    // No further model call after the stop.
    assert_eq!(mock.requests().len(), 1);
    let (_, agent, _, _) = chat_row(dir.path(), "sm").unwrap();
    let msgs = agent.as_array().unwrap();
    let tools: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 2, "exactly one result per call");
    assert_eq!(tools[0]["tool_call_id"], "call_slow");
    assert_eq!(tools[0]["outcome"], "unknown");
    assert!(
        tools[0]["content"]
            .as_str()
            .unwrap()
            .contains("result unknown: interrupted")
    );
    assert_eq!(tools[1]["tool_call_id"], "call_fast");
    assert_eq!(tools[1]["outcome"], "succeeded");
}

async fn tool(
    data: &Path,
    mock: &MockModelServer,
    extra_env: &[(&str, &str)],
    args: &[&str],
) -> Run {
    let mut cmd = mpagent(data, mock);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.arg("tool").args(args);
    run(cmd).await
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_outcomes_timeout_panic_failure_pending() {
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    let r = tool(
        d,
        &mock,
        &[("LLM_TOOL_TIMEOUT", "1")],
        &["test_sleep", "--args", r#"{"ms": 20000}"#],
    )
    .await;
    assert_eq!(r.code, 1);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["execution_outcome"], "unknown");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("may still be running")
    );
    assert!(r.stderr.contains("outcome: unknown"));

    let r = tool(
        d,
        &mock,
        &[],
        &["test_panic", "--args", r#"{"secret": "hunter2-pass"}"#],
    )
    .await;
    assert_eq!(r.code, 1);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["error"], "tool_failed");
    assert!(!r.stdout.contains("hunter2") && !r.stderr.contains("hunter2"));
    assert!(r.stderr.contains("outcome: failed"));

    let r = tool(
        d,
        &mock,
        &[],
        &[
            "test_result",
            "--args",
            r#"{"content": {"success": false, "error": "nope"}}"#,
        ],
    )
    .await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("outcome: failed"));

    let r = tool(
        d,
        &mock,
        &[],
        &[
            "test_result",
            "--args",
            r#"{"content": {"task_id": "t1", "status": "queued"}}"#,
        ],
    )
    .await;
    assert_eq!(r.code, 0);
    assert!(r.stderr.contains("outcome: pending"));

    let r = tool(d, &mock, &[], &["test_echo", "--args", r#"{"text": "hi"}"#]).await;
    assert_eq!(r.code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(r.stdout.trim()).unwrap()["echo"],
        "hi"
    );

    // Bad usage: unknown tool, arguments that are not a JSON object.
    let r = tool(d, &mock, &[], &["no_such_tool"]).await;
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("unknown tool"));
    let r = tool(d, &mock, &[], &["test_echo", "--args", "not json"]).await;
    assert_eq!(r.code, 2);
    // Arguments of the wrong shape are a tool failure with a specific message.
    let r = tool(d, &mock, &[], &["test_echo", "--args", r#"{"txt": 1}"#]).await;
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("missing field `text`"), "{}", r.stdout);
    assert!(mock.requests().is_empty(), "tools never call the model");
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_update_plan_exits_1_and_changes_nothing() {
    let mock = MockModelServer::start().await;
    mock.push(MockReply::tool_calls(&[("p1", "update_plan", plan_args())]));
    mock.push(MockReply::text("planned"));
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = mpagent(dir.path(), &mock);
    cmd.args(["chat", "--user", "carol", "--session", "sp", "plan it"]);
    assert_eq!(run(cmd).await.code, 0);
    let before = chat_row(dir.path(), "sp").unwrap();

    let bad = json!({"objective": "x", "steps": [{"step": "a", "status": "completed"}]});
    let r = tool(
        dir.path(),
        &mock,
        &[],
        &[
            "update_plan",
            "--user",
            "carol",
            "--session",
            "sp",
            "--args",
            &bad.to_string(),
        ],
    )
    .await;
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("evidence is required"), "{}", r.stdout);
    assert!(r.stdout.contains("previous plan is kept"));
    assert_eq!(chat_row(dir.path(), "sp").unwrap(), before);

    let extra =
        json!({"objective": "x", "steps": [{"step": "a", "status": "pending", "owner": "me"}]});
    let r = tool(
        dir.path(),
        &mock,
        &[],
        &["update_plan", "--args", &extra.to_string()],
    )
    .await;
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("unknown field `owner`"), "{}", r.stdout);
    // No chat was created by running tools.
    let c = rusqlite::Connection::open(dir.path().join("agent.db")).unwrap();
    let n: i64 = c
        .query_row("SELECT COUNT(*) FROM chats", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn model_errors_are_classified_and_never_leak_the_key() {
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();

    mock.push(MockReply::status(401, r#"{"error": {"message": "Incorrect API key provided: sk-test-SECRETKEY1234567890abcdef"}}"#));
    let mut cmd = mpagent(dir.path(), &mock);
    cmd.args(["chat", "--user", "dan", "hello"]);
    let r = run(cmd).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.to_lowercase().contains("auth"), "{}", r.stderr);
    assert!(!r.stderr.contains(API_KEY) && !r.stdout.contains(API_KEY));
    assert_eq!(mock.requests().len(), 1, "auth errors are not retried");

    // 429 with Retry-After is retried, then succeeds.
    mock.push(
        MockReply::status(429, r#"{"error": {"message": "slow down"}}"#).header("Retry-After", "1"),
    );
    mock.push(MockReply::text("after retry"));
    let mut cmd = mpagent(dir.path(), &mock);
    cmd.args(["chat", "--user", "dan", "hello again"]);
    let r = run(cmd).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "after retry");
    assert_eq!(mock.requests().len(), 3);

    // A stream dropped after the first byte is not retried; the turn ends with a clear error.
    mock.push(MockReply::text("this stream will break").drop_after(2));
    mock.push(MockReply::text("must not be requested"));
    let mut cmd = mpagent(dir.path(), &mock);
    cmd.args(["chat", "--user", "dan", "--session", "drop", "third"]);
    let r = run(cmd).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("error:"), "{}", r.stderr);
    assert_eq!(mock.requests().len(), 4);
    let (_, agent, _, _) = chat_row(dir.path(), "drop").unwrap();
    let last = agent.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["metadata"]["moviepilot_interruption"], true);
    assert!(!agent.to_string().contains(API_KEY));
}

#[tokio::test]
async fn help_documents_options_and_env_vars() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mpagent"))
        .args(["chat", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "LLM_BASE_URL",
        "LLM_MODEL",
        "LLM_API_KEY",
        "LLM_MAX_ITERATIONS",
        "LLM_TOOL_TIMEOUT",
        "MPA_DATA_DIR",
        "--session",
    ] {
        assert!(text.contains(needle), "chat --help lacks {needle}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_starts_with_default_signals_when_the_host_was_started_ignoring_them() {
    // A host started in the background of a script, under `nohup` or by a supervisor inherits
    // "ignore" for SIGINT, SIGQUIT or SIGHUP; a command it runs must not, or `interrupt`, a
    // closed terminal and job control would reach nothing.
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    // `run` (pipes) and `start` on a PTY (its output waited for within the yield time).
    let runs = [
        json!({"action": "run", "command": "grep SigIgn /proc/self/status"}),
        json!({"action": "start", "command": "grep SigIgn /proc/self/status",
               "use_pty": true, "yield_time_ms": 10000}),
    ];
    for args in runs {
        let mut c = mpagent(dir.path(), &mock);
        // SAFETY: the hook runs in the forked child before exec and calls only signal(2), which
        // is async-signal-safe; it allocates nothing.
        unsafe {
            c.pre_exec(|| {
                for signal in [libc::SIGINT, libc::SIGQUIT, libc::SIGHUP, libc::SIGTERM] {
                    libc::signal(signal, libc::SIG_IGN);
                }
                Ok(())
            });
        }
        c.arg("tool").args([
            "execute_command",
            "--user",
            "root",
            "--admin",
            "--args",
            &args.to_string(),
        ]);
        let r = run(c).await;
        assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
        let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
        let output = v["output"].as_str().unwrap();
        let ignored = output
            .split_once("SigIgn:")
            .and_then(|(_, rest)| u64::from_str_radix(rest.trim(), 16).ok())
            .unwrap_or_else(|| panic!("{args}: {output}"));
        // The standard signals 1..=31 (bit n-1); glibc keeps 32 and up to itself.
        assert_eq!(ignored & 0x7fff_ffff, 0, "{args}: {output}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn execute_command_is_admin_only_and_outcomes_are_honest() {
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ok = json!({"action": "run", "command": "echo hi-from-shell"}).to_string();
    let r = tool(
        d,
        &mock,
        &[],
        &["execute_command", "--user", "eve", "--args", &ok],
    )
    .await;
    assert_eq!(r.code, 1, "non-admins are refused: {}", r.stdout);
    assert!(!r.stdout.contains("hi-from-shell"));

    let r = tool(
        d,
        &mock,
        &[],
        &[
            "execute_command",
            "--user",
            "root",
            "--admin",
            "--args",
            &ok,
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["exit_code"], 0);
    assert!(v["output"].as_str().unwrap().contains("hi-from-shell"));

    // Through a turn: a non-zero exit is `failed`, never "it printed something".
    mock.push(MockReply::tool_calls(&[(
        "call_x",
        "execute_command",
        json!({"action": "run", "command": "echo partial; exit 3"}),
    )]));
    mock.push(MockReply::text("The command failed with exit code 3."));
    let mut cmd = mpagent(d, &mock);
    cmd.args([
        "chat",
        "--user",
        "root",
        "--admin",
        "--session",
        "ex",
        "--output",
        "jsonl",
        "run it",
    ]);
    let r = run(cmd).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(compact(&events(&r.stdout)).contains(&"tool_finished:call_x:failed".to_string()));
    let (_, agent, _, _) = chat_row(d, "ex").unwrap();
    let tool_msg = agent
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(tool_msg["outcome"], "failed");
    let body: Value = serde_json::from_str(tool_msg["content"].as_str().unwrap()).unwrap();
    assert_eq!(body["exit_code"], 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_written_in_one_session_is_in_the_next_sessions_prompt() {
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    mock.push(MockReply::tool_calls(&[(
        "m1",
        "memory",
        json!({"action": "add", "target": "user", "content": "Prefers 2160p remux releases"}),
    )]));
    mock.push(MockReply::text("Saved."));
    let mut cmd = mpagent(d, &mock);
    cmd.args([
        "chat",
        "--user",
        "fay",
        "--session",
        "mem1",
        "--output",
        "jsonl",
        "remember: I like 2160p remux",
    ]);
    let r = run(cmd).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        compact(&events(&r.stdout)).contains(&"tool_finished:m1:succeeded".to_string()),
        "{}",
        r.stdout
    );

    mock.push(MockReply::text("ok"));
    let mut cmd = mpagent(d, &mock);
    cmd.args(["chat", "--user", "fay", "--session", "mem2", "hello"]);
    assert_eq!(run(cmd).await.code, 0);
    let reqs = mock.requests();
    let sys = system_text(&reqs[2]);
    assert!(sys.contains("Prefers 2160p remux releases"), "{sys}");
    // Another user never sees it.
    mock.push(MockReply::text("ok"));
    let mut cmd = mpagent(d, &mock);
    cmd.args(["chat", "--user", "gus", "--session", "mem3", "hello"]);
    assert_eq!(run(cmd).await.code, 0);
    assert!(!system_text(&mock.requests()[3]).contains("2160p"));

    // Host commands are answered by the host, never by the model.
    let mut cmd = mpagent(d, &mock);
    cmd.args([
        "chat",
        "--user",
        "fay",
        "--session",
        "mem2",
        "/memory pending",
    ]);
    let r = run(cmd).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The host's own answer (no proposals were staged), and the model was never asked.
    assert_eq!(r.stdout.trim(), "No pending memory proposals.");
    assert_eq!(mock.requests().len(), 4);
    let (_, agent, _, _) = chat_row(d, "mem2").unwrap();
    let msgs = agent.as_array().unwrap();
    let n = msgs.len();
    assert_eq!(msgs[n - 2]["content"], "/memory pending");
    assert_eq!(msgs[n - 2]["metadata"]["host_command"], true);
    assert_eq!(msgs[n - 1]["content"], "No pending memory proposals.");
    assert_eq!(msgs[n - 1]["metadata"]["host_command"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn turns_are_captured_as_redacted_searchable_evidence() {
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    mock.push(MockReply::tool_calls(&[(
        "e1",
        "test_echo",
        json!({"text": "Interstellar 2014 found in the library"}),
    )]));
    mock.push(MockReply::text("Interstellar is already in your library."));
    let mut cmd = mpagent(d, &mock);
    cmd.args([
        "chat",
        "--user",
        "hana",
        "--session",
        "ev1",
        "is Interstellar there? my qbittorrent password=hunter2secret",
    ]);
    let r = run(cmd).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The recall rules are in the request when session_search is enabled.
    assert!(system_text(&mock.requests()[0]).contains("session_search"));

    let search = |args: Vec<&str>| {
        let mut cmd = mpagent(d, &mock);
        cmd.args(["history", "search", "--user"]).args(args);
        run(cmd)
    };
    let r = search(vec!["hana", "--query", "Interstellar"]).await;
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["success"], true, "{v}");
    assert!(r.stdout.contains("ev1"), "{}", r.stdout);
    // The secret was redacted at capture: searching for it finds nothing, reading never shows it.
    let r = search(vec!["hana", "--query", "hunter2secret"]).await;
    assert!(!r.stdout.contains("ev1"), "{}", r.stdout);
    let r = search(vec!["hana", "--session-id", "ev1"]).await;
    assert!(r.stdout.contains("library"), "{}", r.stdout);
    assert!(!r.stdout.contains("hunter2secret"), "{}", r.stdout);
    // Tool results are evidence too.
    let r = search(vec!["hana", "--query", "2014", "--role-filter", "tool"]).await;
    assert!(r.stdout.contains("ev1"), "{}", r.stdout);
    // Another user's search never sees it.
    let r = search(vec!["ivan", "--query", "Interstellar"]).await;
    assert!(!r.stdout.contains("ev1"), "{}", r.stdout);
    // The chat snapshot is redacted too.
    let (_, agent, _, _) = chat_row(d, "ev1").unwrap();
    assert!(!agent.to_string().contains("hunter2secret"));
}

/// Regression (issue 12, item 6): `MPA_ENABLE_TEST_TOOLS=1` was an error; boolean variables
/// accept 1/0, true/false, yes/no (and on/off), and anything else is refused with the accepted
/// values named.
#[tokio::test(flavor = "multi_thread")]
async fn boolean_env_vars_accept_1_0_true_false_yes_no() {
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let echo = ["test_echo", "--args", r#"{"text": "on"}"#];
    for on in ["1", "true", "yes", "YES", "on"] {
        let r = tool(dir.path(), &mock, &[("MPA_ENABLE_TEST_TOOLS", on)], &echo).await;
        assert_eq!(r.code, 0, "{on}: {}", r.stderr);
        assert!(
            r.stderr.contains("outcome: succeeded"),
            "{on}: {}",
            r.stderr
        );
    }
    for off in ["0", "false", "no", "off"] {
        let r = tool(dir.path(), &mock, &[("MPA_ENABLE_TEST_TOOLS", off)], &echo).await;
        assert_eq!(r.code, 2, "{off}");
        assert!(r.stderr.contains("unknown tool"), "{off}: {}", r.stderr);
    }
    let r = tool(
        dir.path(),
        &mock,
        &[
            ("MPA_ENABLE_TEST_TOOLS", "maybe"),
            ("DATA_CLEANUP_ENABLE", "1"),
        ],
        &echo,
    )
    .await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("maybe"), "{}", r.stderr);
    assert_eq!(mock.requests().len(), 0);
}

/// Every subcommand's `--help` mixed its own options into all 25 global ones; now its own come
/// first and the global ones follow once, under their group headings.
#[tokio::test]
async fn subcommand_help_listed_globals_among_its_own_options_now_they_come_after_grouped() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mpagent"))
        .args(["user", "add", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("user add --help lacks {needle}: {text}"))
    };
    let globals = at("Global options");
    for own in [
        "--admin",
        "--password-stdin",
        "--no-password",
        "--moviepilot-user",
    ] {
        assert!(
            at(own) < globals,
            "{own} is listed before the global options"
        );
    }
    for (heading, flag) in [
        ("Global options: model", "--llm-base-url"),
        ("Global options: MoviePilot", "--moviepilot-url"),
        ("Global options: host", "--data-dir"),
    ] {
        assert!(at(heading) < at(flag), "{flag} under {heading}");
        assert_eq!(text.matches(flag).count(), 1, "{flag} once");
    }
}

/// A data directory that cannot be created printed its OS error twice.
#[tokio::test]
async fn an_os_error_was_printed_twice_now_once() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mpagent"))
        .arg("--data-dir")
        .arg(file.join("data"))
        .args(["user", "list"])
        .env_remove("MPA_DATA_DIR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: cannot open the host"), "{err}");
    assert_eq!(err.matches("(os error 20)").count(), 1, "{err}");
}

/// The REPL sent `/help` to the model; its own commands are answered locally now, and an
/// unknown one is not sent either.
#[tokio::test(flavor = "multi_thread")]
async fn repl_slash_commands_went_to_the_model_now_they_are_answered_locally() {
    let mock = MockModelServer::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = mpagent(tmp.path(), &mock);
    cmd.arg("chat").stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"/help\n/frobnicate now\n/memory\n/session\n/exit\nnever sent\n")
            .await
            .unwrap();
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the REPL did not exit")
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("/exit, /quit"), "{stdout}");
    assert!(stdout.contains("unknown command /frobnicate"), "{stdout}");
    let session = stderr
        .lines()
        .find_map(|l| l.strip_prefix("session: "))
        .unwrap();
    assert!(stdout.contains(&format!("session: {session}")), "{stdout}");
    assert!(mock.requests().is_empty(), "the model was asked");
}
