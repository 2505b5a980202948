#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]
//! `execute_command` through the one call path (`tools::invoke::invoke`): the spec the model
//! sees, the reply JSON of each kind of action (snapshots), argument errors in the tool's error
//! shape, the admin-only rule, and the conversation's scope being found again on every call.
//! The process behaviour behind it is tested in `mpa-exec`'s own tests.

use mpa_core::capability::Terminals;
use mpa_core::tools::execute_command::ExecuteCommand;
use mpa_core::tools::gate::Gates;
use mpa_core::tools::invoke::{Invoker, invoke};
use mpa_core::tools::policy::Origin;
use mpa_core::tools::registry::Tools;
use mpa_core::tools::{ToolContext, TypedTool};
use mpa_core::{Capabilities, RegistryOptions, default_registry};
use mpa_exec::{ExecConfig, Processes};
use mpa_protocol::{Actor, EffectClass, Outcome, ToolCall, UserId};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

struct Env {
    dir: tempfile::TempDir,
    processes: Processes,
    registry: Tools,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let processes = Processes::new(ExecConfig::new(
        dir.path().to_path_buf(),
        dir.path().join("spill"),
    ));
    let caps = Capabilities::default().with(Terminals::new(processes.clone()));
    let registry = default_registry(&RegistryOptions::default(), caps)
        .unwrap()
        .into();
    Env {
        dir,
        processes,
        registry,
    }
}

fn actor(id: &str, is_admin: bool) -> Actor {
    Actor {
        user_id: UserId(id.into()),
        user_name: id.into(),
        is_admin,
    }
}

/// A fresh context each call, as a reloaded actor (or `mpagent tool`) would build it.
fn context(actor: &Actor, session_id: &str) -> ToolContext {
    let mut ctx = ToolContext::detached(actor.clone(), session_id, "call_1");
    ctx.request_id = "request_1".into();
    ctx
}

async fn call_as(env: &Env, actor: &Actor, session: &str, args: Value) -> (Value, Outcome) {
    let gates = Gates::standard();
    let inv = Invoker {
        tools: &env.registry,
        gates: &gates,
        timeout: Some(Duration::from_secs(120)),
        ledger: None,
        max_result_chars: mpa_core::result_cap::DEFAULT_TOOL_RESULT_MAX_CHARS,
    };
    let call = ToolCall {
        id: "call_1".into(),
        name: "execute_command".into(),
        arguments: args.to_string(),
    };
    let done = invoke(inv, context(actor, session), Origin::Turn, &call, 1).await;
    let value = serde_json::from_str(&done.output.content).unwrap();
    (value, done.output.outcome)
}

async fn call(env: &Env, args: Value) -> (Value, Outcome) {
    call_as(env, &actor("root", true), "chat", args).await
}

/// Values that differ between runs.
macro_rules! snapshot {
    ($name:expr, $value:expr) => {
        insta::assert_json_snapshot!(
            $name,
            mpa_test_support::mask(
                $value,
                &[
                    (".pid", "[pid]"),
                    (".session_id", "[session_id]"),
                    (".cwd", "[cwd]"),
                    (".shell", "[shell]"),
                ]
            )
        )
    };
}

#[test]
fn the_spec_the_model_sees() {
    let env = env();
    let tool = env.registry.get("execute_command").unwrap();
    insta::assert_json_snapshot!("execute_command_spec", tool.spec);
    let actions = tool.spec.parameters["properties"]["action"]["enum"]
        .as_array()
        .unwrap();
    assert_eq!(actions.len(), 9);
    assert!(tool.spec.description.contains("since_seq"));
    assert_eq!(
        tool.spec.parameters["required"],
        Value::Null,
        "nothing is required"
    );
    assert_eq!(tool.meta.effect, EffectClass::ArbitraryExecution);
    assert!(tool.meta.requires_admin && tool.meta.self_capped && !tool.meta.internal);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_replies() {
    let env = env();
    let (v, outcome) = call(&env, json!({"action": "run", "command": "echo hello"})).await;
    assert_eq!(outcome, Outcome::Succeeded);
    snapshot!("run_succeeded", &v);
    let (v, outcome) = call(
        &env,
        json!({"action": "run", "command": "echo partial; exit 3", "shell": "sh"}),
    )
    .await;
    assert_eq!(
        outcome,
        Outcome::Failed,
        "a non-zero exit fails even with output"
    );
    assert_eq!(
        (v["exit_code"].as_i64(), v["success"].as_bool()),
        (Some(3), Some(false))
    );
    // An out-of-range timeout is clamped and said so.
    let (v, _) = call(
        &env,
        json!({"action": "run", "command": "echo hi", "timeout": 1000}),
    )
    .await;
    assert_eq!(v["timeout"], 300);
    assert_eq!(
        v["message"],
        "command exited with code 0; timeout 1000 s exceeds the maximum; 300 s was used"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_wait_and_list_replies() {
    let env = env();
    let (v, outcome) = call(
        &env,
        json!({"action": "start", "command": "printf hi; sleep 1", "use_pty": false, "yield_time_ms": 5000}),
    )
    .await;
    assert_eq!(outcome, Outcome::Pending, "running is pending, not success");
    let id = v["session_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("term_") && id.len() == 17, "{id}");
    snapshot!("start_running", &v);
    let (v, outcome) = call(&env, json!({"action": "list"})).await;
    assert_eq!(outcome, Outcome::Succeeded);
    insta::assert_json_snapshot!(
        "list",
        mpa_test_support::mask(
            &v,
            &[
                (".sessions[].pid", "[pid]"),
                (".sessions[].session_id", "[session_id]")
            ]
        )
    );
    let wait = json!({"action": "wait", "session_id": id, "timeout_ms": 10000});
    let (mut v, mut outcome) = call(&env, wait.clone()).await;
    while v["wait_reason"] != "completed" {
        (v, outcome) = call(&env, wait.clone()).await;
    }
    assert_eq!(outcome, Outcome::Succeeded);
    snapshot!("wait_completed", &v);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argument_errors_reply_in_the_tools_error_shape() {
    let env = env();
    let (v, outcome) = call(&env, json!({"action": "run", "command": "  "})).await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(
        v,
        json!({"error": "invalid argument: command is required and must not be blank", "status": "error",
               "action": "run", "success": false, "execution_outcome": "failed", "code": "invalid_arguments"})
    );
    let (v, _) = call(&env, json!({"action": "read", "since_seq": "3"})).await;
    snapshot!("invalid_arguments", &v);
    for (bad, action) in [
        (json!({"action": "start", "command": "  "}), "start"),
        (json!({"action": "run"}), "run"),
        (json!({"action": "read", "since_seq": -1}), "read"),
        (json!({"action": "write", "close_stdin": "true"}), "write"),
        (
            json!({"action": "start", "command": "x", "since_offset": 4}),
            "start",
        ),
        (
            json!({"action": "start", "command": "x", "env": {"A": [1]}}),
            "start",
        ),
        (
            json!({"action": "run", "command": "x", "env": {"A=B": "1"}}),
            "run",
        ),
        (json!({"action": "explode"}), "unknown"),
        (json!({"command": 7}), "start"),
    ] {
        let (v, outcome) = call(&env, bad.clone()).await;
        assert_eq!(outcome, Outcome::Failed, "{bad}");
        assert_eq!(
            (
                v["code"].as_str(),
                v["action"].as_str(),
                v["status"].as_str()
            ),
            (Some("invalid_arguments"), Some(action), Some("error")),
            "{bad}: {v}"
        );
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .starts_with("invalid argument: "),
            "{v}"
        );
    }
    assert_eq!(
        env.processes
            .list(&env.processes.open_scope(mpa_exec::ScopeOwner {
                user_key: mpa_redact::UserKey::for_user(&actor("root", true).user_id),
                label: "session:chat".into(),
            }))
            .unwrap()
            .count,
        0,
        "nothing was started"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_errors_carry_their_codes() {
    let env = env();
    let (v, _) = call(
        &env,
        json!({"action": "start", "command": "echo 0123456789", "use_pty": false, "yield_time_ms": 5000}),
    )
    .await;
    let id = v["session_id"].as_str().unwrap().to_string();
    let (v, outcome) = call(
        &env,
        json!({"action": "read", "session_id": id, "since_seq": 99}),
    )
    .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(
        (v["code"].as_str(), v["execution_outcome"].as_str()),
        (Some("invalid_output_cursor"), Some("failed"))
    );
    let (v, _) = call(
        &env,
        json!({"action": "read", "session_id": id, "since_seq": 0, "max_bytes": 4}),
    )
    .await;
    snapshot!("read_limit_too_small", &v);
    assert_eq!(v["minimum_read_bytes"], 11);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_refuses_an_unknown_signal_before_touching_the_process() {
    let env = env();
    let (v, _) = call(
        &env,
        json!({"action": "start", "command": "sleep 1000", "use_pty": false, "yield_time_ms": 0}),
    )
    .await;
    let id = v["session_id"].as_str().unwrap().to_string();
    for bogus in [json!("bogus"), json!("STOP"), json!(19), json!([])] {
        let (v, outcome) = call(
            &env,
            json!({"action": "kill", "session_id": id, "signal_name": bogus}),
        )
        .await;
        assert_eq!(outcome, Outcome::Failed);
        assert_eq!(v["code"], "invalid_arguments", "{v}");
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .ends_with("is not supported; use one of SIGHUP, SIGINT, SIGQUIT, SIGABRT, SIGKILL, SIGUSR1, SIGUSR2, SIGALRM, SIGTERM"),
            "{v}"
        );
    }
    let (v, _) = call(
        &env,
        json!({"action": "kill", "session_id": id, "signal_name": "bogus"}),
    )
    .await;
    assert_eq!(
        v["error"],
        "invalid argument: signal_name \"bogus\" is not supported; use one of SIGHUP, SIGINT, SIGQUIT, SIGABRT, SIGKILL, SIGUSR1, SIGUSR2, SIGALRM, SIGTERM"
    );
    let (v, _) = call(&env, json!({"action": "status", "session_id": id})).await;
    assert_eq!(v["status"], "running");
    let (v, outcome) = call(
        &env,
        json!({"action": "kill", "session_id": id, "signal_name": 9}),
    )
    .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(
        (v["status"].as_str(), v["signal"].as_str()),
        (Some("killed"), Some("SIGKILL"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_is_reached_from_later_calls_of_its_conversation_only() {
    let env = env();
    let root = actor("root", true);
    let (v, _) = call_as(
        &env,
        &root,
        "chat-a",
        json!({"action": "start", "command": "echo hello; sleep 1000", "use_pty": false, "yield_time_ms": 0}),
    )
    .await;
    let id = v["session_id"].as_str().unwrap().to_string();
    // A later call builds a new context (a reloaded actor): the conversation's scope is found.
    let read = json!({"action": "wait", "session_id": id, "since_seq": 0, "since_offset": 0, "timeout_ms": 10000});
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (v, outcome) = call_as(&env, &root, "chat-a", read.clone()).await;
        assert_eq!(outcome, Outcome::Pending, "{v}");
        if v["output"] == "hello\n" {
            break;
        }
        assert!(Instant::now() < deadline, "{v}");
    }
    let ctx = context(&root, "chat-a");
    let tool = ExecuteCommand {
        processes: env.processes.clone(),
    };
    let out = tool
        .run(
            ctx.clone(),
            serde_json::from_value(json!({"action": "list"})).unwrap(),
        )
        .await;
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert!(
        ctx.session
            .with(|s: &mut mpa_core::tools::execute_command::TerminalScope| s.0.is_some()),
        "the scope is recorded for the host to close with the conversation"
    );
    // Another conversation, another admin, a missing id: one fixed answer.
    let denied = json!({
        "error": "terminal session not found or not accessible from this conversation",
        "status": "error", "action": "read", "success": false, "execution_outcome": "failed",
        "code": "terminal_access_denied"
    });
    for (who, session, target) in [
        (&root, "chat-b", id.as_str()),
        (&actor("other-admin", true), "chat-a", id.as_str()),
        (&root, "chat-a", "term_000000000000"),
    ] {
        let (v, outcome) = call_as(
            &env,
            who,
            session,
            json!({"action": "read", "session_id": target}),
        )
        .await;
        assert_eq!(outcome, Outcome::Failed);
        assert_eq!(v, denied);
    }
    env.processes.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_admins_are_refused_by_the_policy_and_by_the_tool_itself() {
    let env = env();
    let marker = env.dir.path().join("ran");
    let args = json!({"action": "run", "command": format!("touch {}", marker.display())});
    let eve = actor("eve", false);
    let (v, outcome) = call_as(&env, &eve, "chat", args.clone()).await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(
        v["error"], "permission_denied",
        "the policy answers first: {v}"
    );
    // Called directly (a second line of defence if a path ever skipped the policy).
    let tool = ExecuteCommand {
        processes: env.processes.clone(),
    };
    let out = tool
        .run(context(&eve, "chat"), serde_json::from_value(args).unwrap())
        .await;
    assert_eq!(out.outcome, Outcome::Failed);
    let v: Value = serde_json::from_str(&out.content).unwrap();
    snapshot!("permission_denied", &v);
    assert!(!marker.exists(), "nothing ran");
}
