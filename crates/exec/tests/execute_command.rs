#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `execute_command` end to end with real processes, real pipes and real PTYs.

mod common;

use common::*;
use mpa_exec::{ExecHub, ExecLimits, GrantAction, TerminalGrant};
use serde_json::json;
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// run

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_success_reports_the_spec_fields() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "run", "command": "echo hello"}),
    )
    .await;
    assert_eq!(
        redact(v),
        json!({
            "action": "run", "success": true, "execution_outcome": "succeeded", "status": "exited",
            "exit_code": 0, "timed_out": false, "timeout": 60, "cwd": "[cwd]", "shell": "[shell]",
            "login": false, "stdin_closed": true, "output_truncated": false, "output_file": null,
            "output": "hello\n", "message": "command exited with code 0"
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_non_zero_exit_is_a_failure_even_with_output() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "run", "command": "echo partial; exit 3", "shell": "sh"}),
    )
    .await;
    assert_eq!(v["success"], false);
    assert_eq!(v["execution_outcome"], "failed");
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["status"], "exited");
    assert_eq!(v["output"], "partial\n");
    assert!(v["shell"].as_str().unwrap().ends_with("/sh"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_stdin_is_at_eof_and_env_is_non_interactive() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "run", "command": "cat; echo \"$TERM $PAGER $GIT_PAGER $NO_COLOR $FOO\"", "env": {"FOO": "bar", "SKIP": null}}),
    )
    .await;
    assert_eq!(v["output"], "dumb cat cat 1 bar\n", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_decodes_invalid_utf8_with_replacement_and_labels_stderr() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "run", "command": "printf 'a\\377b\\n'"}),
    )
    .await;
    assert_eq!(v["output"], "a\u{FFFD}b\n");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "run", "command": "echo oops >&2"}),
    )
    .await;
    assert_eq!(v["output"], "\n[错误输出]\noops\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_long_output_keeps_head_and_tail_and_spills_everything() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "run", "command": "seq 1 100000"}),
    )
    .await;
    assert_eq!(v["success"], true);
    assert_eq!(v["output_truncated"], true);
    let output = v["output"].as_str().unwrap();
    assert!(output.starts_with("1\n2\n3\n"));
    assert!(output.ends_with("99999\n100000\n"));
    assert!(output.contains("\n...middle omitted...\n"));
    assert!(output.len() <= 32 * 1024 + 64);
    let file = v["output_file"].as_str().unwrap();
    assert!(file.contains("moviepilot-command-"));
    let expected: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(std::fs::read_to_string(file).unwrap(), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_timeout_kills_the_whole_group() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "run", "timeout": 1, "shell": "bash", "env": {"MPA_TEST_MARK": mark},
               "command": "bash -c 'trap \"\" TERM; sleep 1000' & sleep 1000; echo unreachable"}),
    )
    .await;
    assert_eq!(v["status"], "timed_out", "{v}");
    assert_eq!(v["timed_out"], true);
    assert_eq!(v["success"], false);
    assert_eq!(v["execution_outcome"], "failed");
    let left = survivors_after_grace(&mark).await;
    reap(&mark);
    assert!(left.is_empty(), "survivors: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_rejects_bad_interpreters_cwds_and_arguments_before_spawning() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "run", "command": "print(1)", "shell": "python3"}),
    )
    .await;
    assert_eq!(
        (v["code"].as_str(), v["success"].as_bool()),
        (Some("unsupported_shell"), Some(false))
    );
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "run", "command": "ls", "cwd": "nope"}),
    )
    .await;
    assert_eq!(v["code"], "invalid_cwd");
    let v = exec(&f.hub, &s, json!({"action": "run", "command": "  "})).await;
    assert_eq!(
        v,
        json!({"error": "invalid argument: command is required and must not be blank", "status": "error",
               "action": "run", "success": false, "execution_outcome": "failed", "code": "invalid_arguments"})
    );
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "run", "command": "echo hi", "timeout": 1000}),
    )
    .await;
    assert_eq!(v["timeout"], 300);
    assert!(v["message"].as_str().unwrap().contains("300 s was used"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_cwd_and_venv_are_applied() {
    let f = fixture();
    std::fs::create_dir_all(f.dir.path().join("sub")).unwrap();
    std::fs::create_dir_all(f.dir.path().join("venv/bin")).unwrap();
    let python = f.dir.path().join("venv/bin/python3");
    std::fs::write(&python, "#!/bin/sh\necho venv-python\n").unwrap();
    std::fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let s = scope(&f.hub, "admin");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "run", "command": "pwd; python3; echo $VIRTUAL_ENV", "cwd": "sub"}),
    )
    .await;
    let sub = f.dir.path().join("sub");
    let venv = f.dir.path().join("venv");
    assert_eq!(
        v["output"].as_str().unwrap(),
        format!("{}\nvenv-python\n{}\n", sub.display(), venv.display())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangerous_commands_need_confirmation() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let script = f.dir.path().join("reboot");
    std::fs::write(&script, "#!/bin/sh\necho pretend-reboot\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for action in ["run", "start"] {
        let v = exec(&f.hub, &s, json!({"action": action, "command": "./reboot"})).await;
        assert_eq!(v["code"], "dangerous_command_blocked", "{v}");
        assert!(v["error"].as_str().unwrap().contains("rebooting"));
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .contains("confirm_dangerous=true")
        );
    }
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "run", "command": "./reboot", "confirm_dangerous": true}),
    )
    .await;
    assert_eq!(v["output"], "pretend-reboot\n");
}

// ---------------------------------------------------------------------------------------------
// sessions: cursors and paging

fn roomy() -> ExecLimits {
    ExecLimits {
        max_retained_bytes: 8 << 20,
        ..ExecLimits::default()
    }
}

const COUNT_LINES: &str = "for i in $(seq 1 100000); do echo line $i; done";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipe_output_read_page_by_page_is_byte_for_byte() {
    let f = fixture_with(roomy());
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let id = start(
        &f.hub,
        &s,
        &format!("bash -c '{COUNT_LINES}'"),
        false,
        &mark,
    )
    .await;
    let done = wait_finished(&f.hub, &s, &id).await;
    assert_eq!(
        (done["status"].as_str(), done["exit_code"].as_i64()),
        (Some("exited"), Some(0))
    );
    assert_eq!(done["execution_outcome"], "succeeded");
    let expected: String = (1..=100_000).map(|i| format!("line {i}\n")).collect();
    let (whole, lost) = read_all(&f.hub, &s, &id, 10_240, false).await;
    assert!(!lost);
    assert_eq!(whole, expected);
    let (partial, _) = read_all(&f.hub, &s, &id, 1000, true).await;
    assert_eq!(partial, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_output_read_page_by_page_is_byte_for_byte() {
    let f = fixture_with(roomy());
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let id = start(
        &f.hub,
        &s,
        &format!("stty -echo; bash -c '{COUNT_LINES}'"),
        true,
        &mark,
    )
    .await;
    wait_finished(&f.hub, &s, &id).await;
    // The terminal's line discipline turns every newline into CR LF.
    let expected: String = (1..=100_000).map(|i| format!("line {i}\r\n")).collect();
    let (text, lost) = read_all(&f.hub, &s, &id, 7_777, true).await;
    assert!(!lost);
    assert_eq!(text, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_behind_the_window_reports_loss_and_resumes() {
    let f = fixture_with(ExecLimits {
        max_retained_bytes: 64 * 1024,
        ..ExecLimits::default()
    });
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let id = start(&f.hub, &s, "seq 1 200000", false, &mark).await;
    wait_finished(&f.hub, &s, &id).await;
    let v = exec(&f.hub, &s, json!({"action": "read", "session_id": id, "since_seq": 0, "since_offset": 0, "max_bytes": 65536})).await;
    assert_eq!(v["output_lost"], true);
    assert_eq!(v["output_truncated"], true);
    let retained_from = v["retained_from_seq"].as_u64().unwrap();
    assert!(retained_from > 1);
    // Continuing from the returned cursor loses nothing more and reaches the end.
    let mut seq = v["output_until_seq"].as_u64().unwrap();
    let mut offset = v["output_until_offset"].as_u64().unwrap();
    let mut rest = String::new();
    loop {
        let v = exec(
            &f.hub,
            &s,
            json!({"action": "read", "session_id": id, "since_seq": seq, "since_offset": offset}),
        )
        .await;
        assert_eq!(v["output_lost"], false);
        rest.push_str(v["output"].as_str().unwrap());
        seq = v["output_until_seq"].as_u64().unwrap();
        offset = v["output_until_offset"].as_u64().unwrap();
        if v["output_truncated"] == false {
            break;
        }
    }
    assert!(rest.ends_with("199999\n200000\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursor_errors_are_reported_with_codes() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let id = start(&f.hub, &s, "echo 0123456789", false, &mark).await;
    wait_finished(&f.hub, &s, &id).await;
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "read", "session_id": id, "since_seq": 99}),
    )
    .await;
    assert_eq!(v["code"], "invalid_output_cursor");
    assert_eq!(v["execution_outcome"], "failed");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "read", "session_id": id, "since_seq": 0, "max_bytes": 4}),
    )
    .await;
    assert_eq!(v["code"], "read_limit_too_small");
    assert_eq!(v["minimum_read_bytes"], 11);
    let v = exec(&f.hub, &s, json!({"action": "read", "session_id": id, "since_seq": 0, "since_offset": 0, "max_bytes": 4})).await;
    assert_eq!(
        (v["output"].as_str(), v["output_until_offset"].as_u64()),
        (Some("0123"), Some(4))
    );
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "read", "session_id": id, "since_offset": 3}),
    )
    .await;
    assert_eq!(v["code"], "invalid_output_cursor");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_without_a_cursor_continue_where_the_last_reply_ended() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let id = start(&f.hub, &s, "printf abcdefghij", false, &mark).await;
    wait_finished(&f.hub, &s, &id).await;
    let first = exec(&f.hub, &s, json!({"action": "read", "session_id": id, "since_seq": 0, "since_offset": 0, "max_bytes": 3})).await;
    let mut pieces = vec![first["output"].as_str().unwrap().to_string()];
    for _ in 0..3 {
        let v = exec(
            &f.hub,
            &s,
            json!({"action": "read", "session_id": id, "max_bytes": 3}),
        )
        .await;
        pieces.push(v["output"].as_str().unwrap().to_string());
    }
    assert_eq!(pieces, ["abc", "def", "ghi", "j"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_are_fitted_to_the_json_budget_by_shrinking_the_page() {
    let f = fixture_with(ExecLimits {
        json_budget_chars: 5000,
        ..ExecLimits::default()
    });
    let s = scope(&f.hub, "admin");
    let mark = marker();
    // Quotes double in JSON, so 10 KB of them cannot fit a 5000-character reply.
    let id = start(
        &f.hub,
        &s,
        "head -c 10000 /dev/zero | tr '\\0' '\"'",
        false,
        &mark,
    )
    .await;
    wait_finished(&f.hub, &s, &id).await;
    let v = exec(&f.hub, &s, json!({"action": "read", "session_id": id, "since_seq": 0, "since_offset": 0, "max_bytes": 65536})).await;
    let chars = serde_json::to_string_pretty(&v).unwrap().chars().count();
    assert!(chars <= 5000, "{chars}");
    assert!(!v["output"].as_str().unwrap().is_empty());
    assert_eq!(v["output_truncated"], true);
    let (all, _) = read_all(&f.hub, &s, &id, 65536, true).await;
    assert_eq!(all, "\"".repeat(10_000));
}

// ---------------------------------------------------------------------------------------------
// sessions: payload shape, interaction, signals

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_and_wait_payloads_have_the_spec_fields() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let v = exec(&f.hub, &s, json!({"action": "start", "command": "printf hi; sleep 1", "use_pty": false, "yield_time_ms": 5000})).await;
    let id = v["session_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("term_") && id.len() == 17, "{id}");
    assert_eq!(
        redact(v),
        json!({
            "action": "start", "session_id": "[session_id]", "command": "printf hi; sleep 1",
            "command_truncated": false, "command_total_chars": 18, "cwd": "[cwd]", "cwd_truncated": false,
            "pid": "[pid]", "status": "running", "exit_code": null, "execution_outcome": "pending",
            "use_pty": false, "shell": "[shell]", "shell_truncated": false, "login": false,
            "stdin_closed": false, "last_seq": 1, "retained_from_seq": 1, "output_complete": false,
            "error": null, "error_truncated": false, "output": "hi", "output_until_seq": 1,
            "output_until_offset": 0, "output_truncated": false, "output_lost": false,
            "yield_time_ms": 5000, "wait_reason": "output"
        })
    );
    let mut v = exec(
        &f.hub,
        &s,
        json!({"action": "wait", "session_id": id, "timeout_ms": 10000}),
    )
    .await;
    while v["wait_reason"] != "completed" {
        v = exec(
            &f.hub,
            &s,
            json!({"action": "wait", "session_id": id, "timeout_ms": 10000}),
        )
        .await;
    }
    assert_eq!(
        redact(v),
        json!({
            "action": "wait", "session_id": "[session_id]", "command": "printf hi; sleep 1",
            "command_truncated": false, "command_total_chars": 18, "cwd": "[cwd]", "cwd_truncated": false,
            "pid": "[pid]", "status": "exited", "exit_code": 0, "execution_outcome": "succeeded",
            "use_pty": false, "shell": "[shell]", "shell_truncated": false, "login": false,
            "stdin_closed": true, "last_seq": 1, "retained_from_seq": 1, "output_complete": true,
            "error": null, "error_truncated": false, "output": "", "output_until_seq": 1,
            "output_until_offset": 0, "output_truncated": false, "output_lost": false,
            "wait_timeout_ms": 10000, "wait_reason": "completed"
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_commands_are_clipped_in_payloads() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let command = format!("true {}", "x".repeat(3000));
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "start", "command": command, "use_pty": false}),
    )
    .await;
    assert_eq!(v["command_truncated"], true);
    assert_eq!(v["command_total_chars"], 3005);
    assert_eq!(v["command"].as_str().unwrap().len(), 1024);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_python_in_a_pty() {
    if !has("python3") {
        return;
    }
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let id = start(&f.hub, &s, "python3 -q -i", true, &mark).await;
    wait_for_text(&f.hub, &s, &id, ">>> ").await;
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "write", "session_id": id, "input_text": "print(6 * 7)\n"}),
    )
    .await;
    assert_eq!(v["written_bytes"], 13, "{v}");
    // The helper fails the test unless the answer shows up.
    wait_for_text(&f.hub, &s, &id, "42").await;
    exec(
        &f.hub,
        &s,
        json!({"action": "write", "session_id": id, "input_text": "raise SystemExit(5)\n"}),
    )
    .await;
    let v = wait_finished(&f.hub, &s, &id).await;
    assert_eq!(
        (v["exit_code"].as_i64(), v["execution_outcome"].as_str()),
        (Some(5), Some("failed"))
    );
    assert!(survivors_after_grace(&mark).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_sends_one_sigint_and_the_sleep_ends() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let id = start(&f.hub, &s, "sleep 100", true, &mark).await;
    let v = exec(&f.hub, &s, json!({"action": "interrupt", "session_id": id})).await;
    assert_eq!(
        (v["signal"].as_str(), v["signal_sent"].as_bool()),
        (Some("SIGINT"), Some(true)),
        "{v}"
    );
    let v = wait_finished(&f.hub, &s, &id).await;
    assert_eq!(v["status"], "exited");
    // -2 when the shell exec'd sleep (killed by SIGINT), 130 when a shell reported it.
    assert!(v["exit_code"] == -2 || v["exit_code"] == 130, "{v}");
    assert_eq!(v["execution_outcome"], "failed");
    let v = exec(&f.hub, &s, json!({"action": "interrupt", "session_id": id})).await;
    assert_eq!(v["signal_sent"], false);
    assert!(survivors_after_grace(&mark).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_escalates_to_sigkill_when_term_is_ignored() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let id = start(
        &f.hub,
        &s,
        "trap '' TERM; echo armed; while :; do sleep 1; done",
        false,
        &mark,
    )
    .await;
    wait_for_text(&f.hub, &s, &id, "armed").await;
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "kill", "session_id": id, "signal_name": "bogus"}),
    )
    .await;
    assert_eq!(v["code"], "invalid_arguments");
    assert_eq!(
        exec(&f.hub, &s, json!({"action": "status", "session_id": id})).await["status"],
        "running"
    );
    let v = exec(&f.hub, &s, json!({"action": "kill", "session_id": id})).await;
    assert_eq!(v["status"], "killed", "{v}");
    assert_eq!(v["signal"], "SIGTERM");
    assert_eq!(v["kill_escalated"], true);
    assert_eq!(v["execution_outcome"], "failed");
    let left = survivors_after_grace(&mark).await;
    reap(&mark);
    assert!(left.is_empty(), "survivors: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipe_eof_write_rules() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let id = start(&f.hub, &s, "wc -c", false, &mark).await;
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "write", "session_id": id, "input_text": ""}),
    )
    .await;
    assert_eq!(v["written_bytes"], 0);
    assert_eq!(v["stdin_closed"], false);
    let v = exec(&f.hub, &s, json!({"action": "write", "session_id": id, "input_text": "hello world\n", "close_stdin": true})).await;
    assert_eq!(v["written_bytes"], 12);
    assert_eq!(v["stdin_closed"], true);
    let out = wait_for_text(&f.hub, &s, &id, "\n").await;
    assert_eq!(out.trim(), "12");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "write", "session_id": id, "input_text": "more"}),
    )
    .await;
    assert_eq!(v["code"], "stdin_closed");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "write", "session_id": id, "input_text": "", "close_stdin": true}),
    )
    .await;
    assert_eq!(v["written_bytes"], 0, "{v}");
    let v = wait_finished(&f.hub, &s, &id).await;
    assert_eq!(v["exit_code"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_rejects_close_stdin_and_writes_to_finished_sessions_fail() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let id = start(&f.hub, &s, "cat", true, &mark).await;
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "write", "session_id": id, "input_text": "x", "close_stdin": true}),
    )
    .await;
    assert_eq!(v["code"], "close_stdin_unsupported");
    exec(
        &f.hub,
        &s,
        json!({"action": "kill", "session_id": id, "signal_name": "KILL"}),
    )
    .await;
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "write", "session_id": id, "input_text": "x"}),
    )
    .await;
    assert_eq!(v["code"], "session_not_running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_complete_is_honest() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    // Closes its output but keeps running.
    let quiet = start(
        &f.hub,
        &s,
        "echo bye; exec >&- 2>&-; read line",
        false,
        &mark,
    )
    .await;
    wait_for_text(&f.hub, &s, &quiet, "bye").await;
    let mut v = exec(
        &f.hub,
        &s,
        json!({"action": "wait", "session_id": quiet, "timeout_ms": 200}),
    )
    .await;
    while v["output_complete"] != true {
        v = exec(
            &f.hub,
            &s,
            json!({"action": "wait", "session_id": quiet, "timeout_ms": 200}),
        )
        .await;
    }
    assert_eq!(v["status"], "running");
    // Exits while a background child keeps the output open.
    let leaky = start(&f.hub, &s, "sleep 1000 & echo started", false, &mark).await;
    let mut v = exec(&f.hub, &s, json!({"action": "status", "session_id": leaky})).await;
    while v["status"] == "running" {
        tokio::time::sleep(Duration::from_millis(20)).await;
        v = exec(&f.hub, &s, json!({"action": "status", "session_id": leaky})).await;
    }
    assert_eq!(
        (v["status"].as_str(), v["exit_code"].as_i64()),
        (Some("exited"), Some(0))
    );
    assert_eq!(v["output_complete"], false);
    let v = exec(&f.hub, &s, json!({"action": "kill", "session_id": leaky})).await;
    assert_eq!(v["signal_sent"], true);
    exec(&f.hub, &s, json!({"action": "kill", "session_id": quiet})).await;
    let left = survivors_after_grace(&mark).await;
    reap(&mark);
    assert!(left.is_empty(), "survivors: {left:?}");
    let v = wait_finished(&f.hub, &s, &leaky).await;
    assert_eq!(v["output_complete"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_in_a_session_is_replaced() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let id = start(
        &f.hub,
        &s,
        "printf 'ok\\377\\376 \\344\\270\\226\\n'",
        false,
        &mark,
    )
    .await;
    wait_finished(&f.hub, &s, &id).await;
    let (text, _) = read_all(&f.hub, &s, &id, 100, true).await;
    assert_eq!(text, "ok\u{FFFD}\u{FFFD} 世\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_stream_is_held_in_bounded_memory() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let before = rss_kib();
    let id = start(
        &f.hub,
        &s,
        "head -c 1000000000 /dev/zero | tr '\\0' a",
        false,
        &mark,
    )
    .await;
    let v = wait_finished(&f.hub, &s, &id).await;
    assert_eq!(v["exit_code"], 0);
    let growth = rss_kib().saturating_sub(before);
    assert!(growth < 64 * 1024, "RSS grew by {growth} KiB");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "read", "session_id": id, "since_seq": 0, "since_offset": 0}),
    )
    .await;
    assert_eq!(v["output_lost"], true);
    assert!(v["last_seq"].as_u64().unwrap() >= 1_000_000_000 / 4096);
    assert_eq!(v["output_complete"], true);
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_sessions_are_limited_to_four() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    for _ in 0..4 {
        start(&f.hub, &s, "sleep 1000", false, &mark).await;
    }
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "start", "command": "sleep 1000", "use_pty": false}),
    )
    .await;
    assert_eq!(v["code"], "terminal_limit_reached");
    let v = exec(&f.hub, &s, json!({"action": "list"})).await;
    assert_eq!(
        (v["count"].as_u64(), v["running"].as_u64()),
        (Some(4), Some(4))
    );
    f.hub.shutdown().await;
    let left = survivors_after_grace(&mark).await;
    reap(&mark);
    assert!(left.is_empty(), "survivors: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_start_kills_and_unregisters_its_process() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let call = f.hub.execute(
        &s,
        json!({"action": "start", "command": "sleep 1000", "yield_time_ms": 10000, "env": {"MPA_TEST_MARK": mark}}),
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(300), call)
            .await
            .is_err()
    );
    let v = exec(&f.hub, &s, json!({"action": "list"})).await;
    assert_eq!(v["count"], 0);
    let left = survivors_after_grace(&mark).await;
    reap(&mark);
    assert!(left.is_empty(), "survivors: {left:?}");
}

// ---------------------------------------------------------------------------------------------
// scopes and sharing

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_closed_missing_and_expired_sessions_look_identical() {
    let f = fixture_with(ExecLimits {
        finished_retention: Duration::ZERO,
        ..ExecLimits::default()
    });
    let mine = scope(&f.hub, "alice");
    let mark = marker();
    let id = start(&f.hub, &mine, "sleep 1000", false, &mark).await;
    let other_chat = scope(&f.hub, "alice");
    let other_user = scope(&f.hub, "bob");
    let closed = scope(&f.hub, "alice");
    f.hub.close_scope(&closed).await;
    let denied = json!({
        "error": "terminal session not found or not accessible from this conversation",
        "status": "error", "action": "read", "success": false, "execution_outcome": "failed",
        "code": "terminal_access_denied"
    });
    for s in [&other_chat, &other_user, &closed] {
        assert_eq!(
            exec(&f.hub, s, json!({"action": "read", "session_id": id})).await,
            denied
        );
    }
    assert_eq!(
        exec(
            &f.hub,
            &mine,
            json!({"action": "read", "session_id": "term_000000000000"})
        )
        .await,
        denied
    );
    // After the restart of a host nothing is restored.
    let fresh = ExecHub::new(mpa_exec::ExecConfig {
        workdir: f.dir.path().into(),
        venv_path: None,
        spill_dir: f.dir.path().into(),
    });
    let fresh_scope = scope(&fresh, "alice");
    assert_eq!(
        exec(
            &fresh,
            &fresh_scope,
            json!({"action": "read", "session_id": id})
        )
        .await,
        denied
    );
    // Expired: finished sessions with zero retention are purged.
    exec(
        &f.hub,
        &mine,
        json!({"action": "kill", "session_id": id, "signal_name": "KILL"}),
    )
    .await;
    assert_eq!(
        exec(&f.hub, &mine, json!({"action": "read", "session_id": id})).await,
        denied
    );
    let v = exec(&f.hub, &other_user, json!({"action": "list"})).await;
    assert_eq!(v["count"], 0);
    assert!(survivors_after_grace(&mark).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_subtask_may_read_and_wait_but_not_write_or_kill() {
    let f = fixture();
    let parent = scope(&f.hub, "alice");
    let mark = marker();
    let id = start(&f.hub, &parent, "echo shared; sleep 1000", false, &mark).await;
    let grants = TerminalGrant::parse_task_field(&json!([{"session_id": id}])).unwrap();
    let child = f.hub.open_child_scope(&parent, grants).unwrap();
    // Waiting from the child scope works (the helper fails the test if "shared" never shows).
    wait_for_text(&f.hub, &child, &id, "shared").await;
    let v = exec(
        &f.hub,
        &child,
        json!({"action": "read", "session_id": id, "since_seq": 0}),
    )
    .await;
    assert_eq!(v["output"], "shared\n");
    let v = exec(&f.hub, &child, json!({"action": "list"})).await;
    assert_eq!(v["sessions"][0]["access"], "granted");
    assert_eq!(v["sessions"][0]["granted_actions"], json!(["read", "wait"]));
    for action in [
        json!({"action": "write", "session_id": id, "input_text": "x"}),
        json!({"action": "kill", "session_id": id}),
        json!({"action": "interrupt", "session_id": id}),
    ] {
        let v = exec(&f.hub, &child, action).await;
        assert_eq!(v["code"], "terminal_access_denied");
    }
    // Grants are not transitive.
    let grandchild = f.hub.open_child_scope(
        &child,
        vec![TerminalGrant {
            session_id: id.clone(),
            actions: vec![GrantAction::Read],
        }],
    );
    assert!(grandchild.is_err());
    let report = f.hub.close_scope(&child).await;
    assert!(report.is_complete() && report.terminated.is_empty());
    let v = exec(&f.hub, &child, json!({"action": "read", "session_id": id})).await;
    assert_eq!(v["code"], "terminal_access_denied");
    let v = exec(
        &f.hub,
        &parent,
        json!({"action": "status", "session_id": id}),
    )
    .await;
    assert_eq!(v["status"], "running");
    let report = f.hub.close_scope(&parent).await;
    assert_eq!(report.terminated, vec![id]);
    let left = survivors_after_grace(&mark).await;
    reap(&mark);
    assert!(left.is_empty(), "survivors: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_scope_terminates_only_its_own_sessions() {
    let f = fixture();
    let a = scope(&f.hub, "alice");
    let b = scope(&f.hub, "alice");
    let mark_a = marker();
    let mark_b = format!("{}-b", marker());
    let id_a = start(&f.hub, &a, "sleep 1000 & sleep 1000", false, &mark_a).await;
    let id_b = start(&f.hub, &b, "sleep 1000", true, &mark_b).await;
    let waiter = {
        let hub = f.hub.clone();
        let a = a.clone();
        let id_a = id_a.clone();
        tokio::spawn(async move {
            hub.execute(
                &a,
                json!({"action": "wait", "session_id": id_a, "timeout_ms": 60000}),
            )
            .await
        })
    };
    let report = f.hub.close_scope(&a).await;
    assert_eq!(report.terminated, vec![id_a.clone()]);
    assert!(report.is_complete());
    // A wait in the sealed scope wakes up denied instead of sleeping out its timeout.
    assert_eq!(waiter.await.unwrap()["code"], "terminal_access_denied");
    let left_a = survivors_after_grace(&mark_a).await;
    assert!(left_a.is_empty(), "survivors: {left_a:?}");
    assert!(!marked_processes(&mark_b).is_empty());
    let v = exec(&f.hub, &b, json!({"action": "status", "session_id": id_b})).await;
    assert_eq!(v["status"], "running");
    let v = exec(&f.hub, &a, json!({"action": "start", "command": "true"})).await;
    assert_eq!(v["code"], "terminal_access_denied");
    let report = f.hub.close_scope(&a).await;
    assert!(report.already_closed);
    f.hub.close_scope(&b).await;
    let left_b = survivors_after_grace(&mark_b).await;
    reap(&mark_a);
    reap(&mark_b);
    assert!(left_b.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_scope_cancels_its_runs() {
    let f = fixture();
    let s = scope(&f.hub, "alice");
    let mark = marker();
    let run = {
        let hub = f.hub.clone();
        let s = s.clone();
        let mark = mark.clone();
        tokio::spawn(async move {
            hub.execute(&s, json!({"action": "run", "command": "echo go; sleep 1000", "env": {"MPA_TEST_MARK": mark}})).await
        })
    };
    while marked_processes(&mark).is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = f.hub.close_scope(&s).await;
    assert_eq!(report.runs_still_active, 0);
    let v = run.await.unwrap();
    assert_eq!(
        (v["status"].as_str(), v["execution_outcome"].as_str()),
        (Some("cancelled"), Some("failed"))
    );
    assert_eq!(v["success"], false);
    let left = survivors_after_grace(&mark).await;
    reap(&mark);
    assert!(left.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_surface_is_consistent() {
    let schema = mpa_exec::execute_command_parameters_schema();
    let actions = schema["properties"]["action"]["enum"].as_array().unwrap();
    assert_eq!(actions.len(), 9);
    assert!(mpa_exec::execute_command_description().contains("since_seq"));
    let denied = mpa_exec::permission_denied_result();
    assert_eq!(
        (
            denied["success"].as_bool(),
            denied["execution_outcome"].as_str()
        ),
        (Some(false), Some("failed"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_a_slot_is_abandoned_when_its_scope_closes() {
    let f = fixture_with(ExecLimits {
        run_concurrency: 1,
        ..ExecLimits::default()
    });
    let busy = scope(&f.hub, "alice");
    let waiting = scope(&f.hub, "alice");
    let mark = marker();
    let blocker = {
        let hub = f.hub.clone();
        let busy = busy.clone();
        let mark = mark.clone();
        tokio::spawn(async move {
            hub.execute(
                &busy,
                json!({"action": "run", "command": "sleep 1000", "env": {"MPA_TEST_MARK": mark}}),
            )
            .await
        })
    };
    while marked_processes(&mark).is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let queued = {
        let hub = f.hub.clone();
        let waiting = waiting.clone();
        tokio::spawn(async move {
            hub.execute(&waiting, json!({"action": "run", "command": "echo never"}))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    f.hub.close_scope(&waiting).await;
    let v = queued.await.unwrap();
    assert_eq!(v["status"], "cancelled", "{v}");
    assert_eq!(v["output"], "");
    assert!(v["message"].as_str().unwrap().contains("was not started"));
    f.hub.close_scope(&busy).await;
    assert_eq!(blocker.await.unwrap()["status"], "cancelled");
    let left = survivors_after_grace(&mark).await;
    reap(&mark);
    assert!(left.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_leaves_the_process_running() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let mark = marker();
    let id = start(&f.hub, &s, "sleep 1000", false, &mark).await;
    let call = f.hub.execute(
        &s,
        json!({"action": "wait", "session_id": id, "timeout_ms": 60000}),
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(200), call)
            .await
            .is_err()
    );
    let v = exec(&f.hub, &s, json!({"action": "status", "session_id": id})).await;
    assert_eq!(v["status"], "running");
    assert_eq!(v["execution_outcome"], "pending");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "wait", "session_id": id, "timeout_ms": 0}),
    )
    .await;
    assert_eq!(v["wait_reason"], "timeout");
    f.hub.shutdown().await;
    let left = survivors_after_grace(&mark).await;
    reap(&mark);
    assert!(left.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_whose_page_fails_keeps_the_session_and_the_cursor() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "start", "command": "echo hello; exec sleep 1000", "use_pty": false,
               "yield_time_ms": 5000, "max_bytes": 1}),
    )
    .await;
    let id = v["session_id"].as_str().unwrap().to_string();
    assert_eq!(v["status"], "running");
    assert_eq!(v["output"], "");
    assert_eq!(
        (
            v["output_until_seq"].as_u64(),
            v["output_until_offset"].as_u64()
        ),
        (Some(0), Some(0))
    );
    assert_eq!(
        (
            v["output_error"]["code"].as_str(),
            v["output_error"]["minimum_read_bytes"].as_u64()
        ),
        (Some("read_limit_too_small"), Some(6))
    );
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "read", "session_id": id, "since_seq": 0}),
    )
    .await;
    assert_eq!(v["output"], "hello\n");
    let v = exec(&f.hub, &s, json!({"action": "kill", "session_id": id})).await;
    assert_eq!(
        (v["status"].as_str(), v["kill_escalated"].as_bool()),
        (Some("killed"), Some(false))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_shells_are_reported() {
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let v = exec(
        &f.hub,
        &s,
        json!({"action": "run", "command": "shopt -q login_shell && echo login", "shell": "bash", "login": true}),
    )
    .await;
    assert_eq!(
        (v["output"].as_str(), v["login"].as_bool()),
        (Some("login\n"), Some(true)),
        "{v}"
    );
}

#[test]
fn the_hub_and_its_futures_can_cross_threads() {
    fn assert_send<T: Send>(_: &T) {}
    fn assert_sync<T: Send + Sync + Clone>() {}
    assert_sync::<ExecHub>();
    let f = fixture();
    let s = scope(&f.hub, "admin");
    let future = f.hub.execute(&s, json!({"action": "list"}));
    assert_send(&future);
    let close = f.hub.close_scope(&s);
    assert_send(&close);
}
