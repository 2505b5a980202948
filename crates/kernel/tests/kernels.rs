//! Kernels as the `execute_code` tool uses them: state across cells, the ways a kernel ends,
//! helper calls over the socket, output caps and spill files, lifecycle.

use crate::common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn variables_persist_and_an_exception_keeps_them() {
    if !python_available() {
        return;
    }
    let env = env();
    let first = json_of(&run(&env, "s1", "x = 41\nprint('set')").await);
    assert_eq!(first["status"], "success");
    assert_eq!(first["output"], "set\n");
    assert_eq!(first["kernel"]["reused"], false);
    assert_eq!(first["kernel"]["execution_count"], 1);
    let failing = json_of(&run(&env, "s1", "x += 1\nraise ValueError('boom')").await);
    assert_eq!(failing["status"], "error");
    assert_eq!(failing["exit_code"], 1);
    assert_eq!(failing["success"], false);
    assert!(
        failing["error"]
            .as_str()
            .unwrap()
            .contains("ValueError: boom")
    );
    assert!(failing["stderr"].as_str().unwrap().contains("Traceback"));
    assert!(failing["output"].as_str().unwrap().contains("[stderr]"));
    let after = json_of(&run(&env, "s1", "print(x)").await);
    assert_eq!(after["output"], "42\n");
    assert_eq!(after["kernel"]["reused"], true);
    assert_eq!(after["kernel"]["state_reset"], false);
    assert_eq!(after["kernel"]["execution_count"], 3);
    assert_eq!(after["success"], true);
    // Helpers are imported into every kernel without an import line.
    let helpers = json_of(
        &run(
            &env,
            "s1",
            "print(json_parse('\\ufeff{\"a\": 1}')['a'], shell_quote('a b'))",
        )
        .await,
    );
    assert_eq!(helpers["output"], "1 'a b'\n");
}

#[tokio::test]
async fn reset_clears_the_variables_and_says_so() {
    if !python_available() {
        return;
    }
    let env = env();
    run(&env, "s1", "x = 1").await;
    let pgid = env.kernels.live()[0];
    let mut req = cell("s1", "print('x' in globals())");
    req.reset = true;
    let r = json_of(&env.kernels.execute(req).await.unwrap());
    assert_eq!(r["output"], "False\n");
    assert_eq!(r["kernel"]["state_reset"], true);
    assert_eq!(r["kernel"]["reused"], false);
    assert_eq!(r["kernel"]["execution_count"], 1);
    assert!(
        group_gone(pgid).await,
        "the old kernel's processes are gone"
    );
}

#[tokio::test]
async fn sys_exit_ends_the_kernel_and_the_next_cell_starts_fresh() {
    if !python_available() {
        return;
    }
    let env = env();
    run(&env, "s1", "x = 1").await;
    let pgid = env.kernels.live()[0];
    let r = json_of(&run(&env, "s1", "print('bye')\nimport sys\nsys.exit(3)").await);
    assert_eq!(r["status"], "error");
    assert_eq!(r["exit_code"], -1);
    assert_eq!(r["output"], "bye\n");
    assert_eq!(
        r["kernel"],
        json!({"mode": "session", "ended": true, "state_lost": true})
    );
    assert!(r["error"].as_str().unwrap().contains("sys.exit(3)"));
    assert!(group_gone(pgid).await);
    let next = json_of(&run(&env, "s1", "print('x' in globals())").await);
    assert_eq!(next["output"], "False\n");
    assert_eq!(next["kernel"]["reused"], false);
    assert_eq!(next["kernel"]["state_reset"], true);
    assert!(next["warning"].as_str().unwrap().contains("sys.exit"));
}

#[tokio::test]
async fn a_timeout_kills_the_kernel_and_its_children() {
    if !python_available() {
        return;
    }
    let env = env_with(|c| c.cell_timeout = Duration::from_millis(1500));
    let code = "import subprocess\nsubprocess.Popen(['sleep', '600'])\nprint('started', flush=True)\nimport time\ntime.sleep(600)";
    let r = json_of(&run(&env, "s1", code).await);
    assert_eq!(r["status"], "timeout");
    assert_eq!(r["kernel"]["state_lost"], true);
    assert_eq!(r["success"], false);
    assert!(r["output"].as_str().unwrap().contains("started"));
    assert!(env.kernels.live().is_empty());
}

#[tokio::test]
async fn processes_are_gone_after_timeout_scope_close_and_shutdown() {
    if !python_available() {
        return;
    }
    let env = env_with(|c| c.cell_timeout = Duration::from_millis(1500));
    let spawn_child = "import subprocess\np = subprocess.Popen(['sleep', '600'])\nprint(p.pid)";
    // Timeout.
    run(&env, "t", spawn_child).await;
    let pgid = env.kernels.live()[0];
    run(&env, "t", "import time\ntime.sleep(600)").await;
    assert!(
        group_gone(pgid).await,
        "timeout: kernel and its sleep are gone"
    );
    // Scope close while idle, and while a cell runs.
    run(&env, "idle", spawn_child).await;
    let idle = env.kernels.live()[0];
    env.kernels.close_scope("idle").await;
    assert!(group_gone(idle).await, "scope close: idle kernel gone");
    let env = env_with(|_| {});
    let running = {
        let kernels = env.kernels.clone();
        tokio::spawn(async move {
            kernels
                .execute(cell(
                    "busy",
                    "print('go', flush=True)\nimport time\ntime.sleep(600)",
                ))
                .await
        })
    };
    mpa_test_support::eventually(Duration::from_secs(10), || !env.kernels.live().is_empty()).await;
    let busy = env.kernels.live()[0];
    env.kernels.close_scope("busy").await;
    let r = json_of(&running.await.unwrap().unwrap());
    assert_eq!(r["kernel"]["state_lost"], true);
    assert!(group_gone(busy).await, "scope close: running kernel gone");
    // Host shutdown.
    run(&env, "a", spawn_child).await;
    run(&env, "b", spawn_child).await;
    let live = env.kernels.live();
    assert_eq!(live.len(), 2);
    env.kernels.shutdown().await;
    for pgid in live {
        assert!(group_gone(pgid).await, "shutdown: every kernel gone");
    }
    let refused = env.kernels.execute(cell("a", "print(1)")).await;
    assert_eq!(refused.unwrap_err().code(), "shutting_down");
}

#[tokio::test]
async fn cancellation_ends_the_kernel() {
    if !python_available() {
        return;
    }
    let env = env();
    let mut req = cell(
        "s1",
        "import time\nprint('working', flush=True)\ntime.sleep(600)",
    );
    let cancel = CancellationToken::new();
    req.cancel = cancel.clone();
    let kernels = env.kernels.clone();
    let task = tokio::spawn(async move { kernels.execute(req).await });
    mpa_test_support::eventually(Duration::from_secs(10), || !env.kernels.live().is_empty()).await;
    let pgid = env.kernels.live()[0];
    cancel.cancel();
    let r = json_of(&task.await.unwrap().unwrap());
    assert_eq!(r["kernel"]["state_lost"], true);
    assert!(r["error"].as_str().unwrap().contains("cancelled"));
    assert!(group_gone(pgid).await);
}

#[tokio::test]
async fn helper_calls_return_parsed_json_and_failures_are_listed() {
    if !python_available() {
        return;
    }
    let env = env();
    let handler = Arc::new(Scripted::default());
    let mut req = cell(
        "s1",
        "r = echo(value='a')\nprint(r['echo']['value'])\nf = fail()\nprint(f['success'], f['error'])",
    );
    req.handler = handler.clone();
    let r = json_of(&env.kernels.execute(req).await.unwrap());
    assert_eq!(r["status"], "success");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["output"], "a\nFalse read_only_scope\n");
    assert_eq!(r["tool_calls_made"], 2);
    assert_eq!(
        r["success"], false,
        "a failed helper call makes the cell fail"
    );
    assert_eq!(r["tool_errors"][0]["tool"], "fail");
    assert!(
        r["tool_errors"][0]["error"]
            .as_str()
            .unwrap()
            .starts_with("read_only_scope")
    );
    assert_eq!(r["tool_calls"][0]["outcome"], "succeeded");
    assert_eq!(r["tool_calls"][0]["args_preview"], "{\"value\":\"a\"}");
    assert_eq!(handler.calls.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn the_51st_call_and_oversized_results_are_refused() {
    if !python_available() {
        return;
    }
    let env = env_with(|c| c.max_rpc_result_bytes = 1000);
    let handler = Arc::new(Scripted::default());
    let mut req = cell(
        "s1",
        "rs = [echo(value=str(i)) for i in range(51)]\nprint(rs[49]['success'], rs[50]['error'])\nb = big(n=5000)\nprint(b['error'])",
    );
    req.handler = handler.clone();
    let r = json_of(&env.kernels.execute(req).await.unwrap());
    assert_eq!(r["status"], "success");
    assert_eq!(
        r["output"],
        "True tool_call_budget_exhausted\ntool_call_budget_exhausted\n"
    );
    assert_eq!(r["tool_calls_made"], 50);
    assert_eq!(
        handler.calls.lock().unwrap().len(),
        50,
        "the 51st never reached the host"
    );
    assert_eq!(r["success"], false);
    let errors = r["tool_errors"].as_array().unwrap();
    assert!(errors.len() <= 5);
    assert!(
        errors[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("tool_call_budget_exhausted")
    );
    // Within budget, an oversized result is refused with a hint.
    let mut req = cell(
        "s2",
        "b = big(n=5000)\nprint(b['error'], 'paging' in b['message'])",
    );
    req.handler = handler.clone();
    let r = json_of(&env.kernels.execute(req).await.unwrap());
    assert_eq!(r["output"], "result_too_large True\n");
    assert_eq!(r["success"], false);
}

/// The kernel's socket and token, as the kernel itself sees them.
async fn channel_of(env: &Env, scope: &str) -> (String, String) {
    let r = run(
        env,
        scope,
        "import os\nprint(os.environ['MOVIEPILOT_RPC_SOCKET'])\nprint(os.environ['MOVIEPILOT_RPC_TOKEN'])",
    )
    .await;
    let mut lines = r.output.lines();
    (
        lines.next().unwrap().to_string(),
        lines.next().unwrap().to_string(),
    )
}

fn request(socket: &str, token: &str) -> Value {
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    let line = json!({"tool": "echo", "args": {}, "token": token}).to_string() + "\n";
    s.write_all(line.as_bytes()).unwrap();
    let mut reply = String::new();
    BufReader::new(s).read_line(&mut reply).unwrap();
    serde_json::from_str(&reply).unwrap()
}

#[tokio::test]
async fn wrong_tokens_and_calls_outside_a_cell_are_refused() {
    if !python_available() {
        return;
    }
    let env = env();
    let (socket_a, token_a) = channel_of(&env, "a").await;
    let (_, token_b) = channel_of(&env, "b").await;
    let mode = std::fs::metadata(&socket_a).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(std::path::Path::new(&socket_a).parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
    let (a, b, c) = tokio::task::spawn_blocking(move || {
        (
            request(&socket_a, "0".repeat(64).as_str()),
            request(&socket_a, &token_b),
            request(&socket_a, &token_a),
        )
    })
    .await
    .unwrap();
    assert_eq!(a["ok"], false);
    assert!(a["error"].as_str().unwrap().starts_with("unauthorized"));
    assert_eq!(b["ok"], false, "another kernel's token");
    assert!(b["error"].as_str().unwrap().starts_with("unauthorized"));
    assert_eq!(c["ok"], false, "the right token after the cell ended");
    assert!(c["error"].as_str().unwrap().starts_with("no_cell_running"));
    // A thread the cell left behind cannot call once the cell ended.
    let trigger = env.dir.path().join("trigger");
    let result = env.dir.path().join("result");
    let code = format!(
        "import threading, os, time\n\
         def later():\n    while not os.path.exists({t:?}):\n        time.sleep(0.01)\n    \
         try:\n        echo(value='late')\n        msg = 'ran'\n    \
         except ToolRpcError as e:\n        msg = str(e)\n    \
         open({r:?} + '.tmp', 'w').write(msg)\n    os.rename({r:?} + '.tmp', {r:?})\n\
         threading.Thread(target=later, daemon=True).start()",
        t = trigger.display().to_string(),
        r = result.display().to_string(),
    );
    assert_eq!(
        run(&env, "a", &code).await.status,
        mpa_kernel::CellStatus::Success
    );
    std::fs::write(&trigger, "go").unwrap();
    mpa_test_support::eventually(Duration::from_secs(10), || result.exists()).await;
    let said = std::fs::read_to_string(&result).unwrap();
    assert!(said.starts_with("no_cell_running"), "{said}");
}

#[tokio::test]
async fn ten_megabytes_of_stdout_are_previewed_and_spilled_redacted() {
    if !python_available() {
        return;
    }
    let env = env();
    let code = "import sys\nsys.stdout.write('HEAD password=hunter2hunter2\\n')\n\
                for i in range(100000):\n    sys.stdout.write('%099d\\n' % i)\nsys.stdout.write('THE END\\n')";
    let r = json_of(&run(&env, "s1", code).await);
    let total = r["stdout_bytes_total"].as_u64().unwrap();
    assert!(total > 10_000_000);
    assert_eq!(r["stdout_truncated"], true);
    let output = r["output"].as_str().unwrap();
    assert!(
        output.starts_with("HEAD password=[REDACTED"),
        "{}",
        &output[..60]
    );
    assert!(output.ends_with("THE END\n"));
    assert!(output.len() < 50_500);
    assert_eq!(r["stdout_bytes_captured"], 5_000_000);
    assert_eq!(r["stdout_capture_incomplete"], true);
    assert_eq!(r["stdout_spill_capped"], true);
    assert_eq!(
        r["stdout_bytes_omitted"].as_u64().unwrap(),
        total - 50_000,
        "everything but the preview's 50,000 bytes"
    );
    let path = r["stdout_spill_path"].as_str().unwrap();
    assert!(path.starts_with(env.dir.path().join("runtime/code/users").to_str().unwrap()));
    assert!(path.contains("/output/stdout-"));
    let meta = std::fs::metadata(path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let spilled = std::fs::read_to_string(path).unwrap();
    assert!(spilled.starts_with("HEAD password=[REDACTED"));
    assert!(!spilled.contains("hunter2"));
    assert!(spilled.len() <= 5_000_100);
    // It outlives the kernel.
    env.kernels.close_scope("s1").await;
    assert!(std::path::Path::new(path).exists());
}

#[tokio::test]
async fn idle_kernels_beyond_the_limit_are_evicted_least_recently_used_first() {
    if !python_available() {
        return;
    }
    let env = env_with(|c| c.max_idle_kernels = 2);
    for s in ["k1", "k2", "k3"] {
        run(&env, s, "x = 1").await;
    }
    assert_eq!(env.kernels.live().len(), 2);
    let k1 = json_of(&run(&env, "k1", "print('x' in globals())").await);
    assert_eq!(k1["output"], "False\n");
    assert_eq!(k1["kernel"]["state_reset"], true);
    assert!(k1["warning"].as_str().unwrap().contains("evicted"));
    // k2 was the least recently used when k1 came back.
    let k3 = json_of(&run(&env, "k3", "print('x' in globals())").await);
    assert_eq!(k3["output"], "True\n");
}

#[tokio::test]
async fn idle_kernels_expire() {
    if !python_available() {
        return;
    }
    let env = env_with(|c| c.idle_ttl = Duration::ZERO);
    run(&env, "s1", "x = 1").await;
    let pgid = env.kernels.live()[0];
    env.kernels.reap_idle().await;
    assert!(group_gone(pgid).await);
    let r = json_of(&run(&env, "s1", "print('x' in globals())").await);
    assert_eq!(r["output"], "False\n");
    assert!(r["warning"].as_str().unwrap().contains("idle expiry"));
}

#[tokio::test]
async fn different_scopes_and_helper_sets_never_share_state() {
    if !python_available() {
        return;
    }
    let env = env();
    run(&env, "s1", "x = 1").await;
    let other = json_of(&run(&env, "s2", "print('x' in globals())").await);
    assert_eq!(other["output"], "False\n");
    let mut req = cell("s1", "print('x' in globals())");
    req.helpers.pop();
    let fewer = json_of(&env.kernels.execute(req).await.unwrap());
    assert_eq!(fewer["output"], "False\n");
    assert_eq!(env.kernels.live().len(), 3);
}

#[tokio::test]
async fn the_kernel_environment_has_no_host_secrets_and_private_files() {
    if !python_available() {
        return;
    }
    let env = env();
    let r = run(
        &env,
        "s1",
        "import os, stat\nprint(sorted(k for k in os.environ if k.startswith('MOVIEPILOT_')))\n\
         d = os.path.dirname(__import__('moviepilot_tools').__file__)\n\
         print(oct(os.stat(d).st_mode & 0o777), oct(os.stat(os.path.join(d, 'moviepilot_tools.py')).st_mode & 0o777))\n\
         print('PYTHONPATH' in os.environ, os.getpgid(0) == os.getpid())",
    )
    .await;
    let lines: Vec<&str> = r.output.lines().collect();
    assert_eq!(
        lines[0],
        "['MOVIEPILOT_KERNEL_PARENT_FD', 'MOVIEPILOT_KERNEL_SENTINEL', 'MOVIEPILOT_KERNEL_SPILL_DIR', 'MOVIEPILOT_RPC_PERSISTENT', 'MOVIEPILOT_RPC_SOCKET', 'MOVIEPILOT_RPC_TOKEN']"
    );
    assert_eq!(lines[1], "0o700 0o600");
    assert_eq!(lines[2], "False True");
}
