//! Shared setup: a kernel host on a temporary directory with short limits, a scripted tool
//! handler, and `/proc` scans.

use async_trait::async_trait;
use mpa_kernel::{
    CellReport, CellRequest, Helper, KernelConfig, KernelOwner, Kernels, RpcHandler, RpcOutcome,
};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Whether `python3` runs here; without it the test prints a notice and passes, unless
/// `MPA_REQUIRE_ALL_TESTS=1`.
pub fn python_available() -> bool {
    let ok = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    mpa_test_support::external_program("python3", ok)
}

pub struct Env {
    pub dir: tempfile::TempDir,
    pub kernels: Kernels,
}

pub fn env_with(tune: impl FnOnce(&mut KernelConfig)) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = KernelConfig::new(dir.path(), dir.path().join("runtime/code"));
    cfg.cell_timeout = Duration::from_secs(20);
    tune(&mut cfg);
    Env {
        kernels: Kernels::new(cfg),
        dir,
    }
}

pub fn env() -> Env {
    env_with(|_| {})
}

/// Answers each helper call from a script: `echo` returns its arguments, `fail` fails,
/// `big` returns `n` bytes; every call is recorded.
#[derive(Default)]
pub struct Scripted {
    pub calls: Mutex<Vec<(String, Value)>>,
}

#[async_trait]
impl RpcHandler for Scripted {
    async fn call(&self, tool: &str, args: Value) -> RpcOutcome {
        self.calls.lock().unwrap().push((tool.into(), args.clone()));
        match tool {
            "fail" => RpcOutcome {
                outcome: "failed".into(),
                text: json!({"success": false, "error": "read_only_scope",
                    "message": "this scope may only read"})
                .to_string(),
                error: Some("read_only_scope".into()),
            },
            "big" => RpcOutcome {
                outcome: "succeeded".into(),
                text: format!("\"{}\"", "x".repeat(args["n"].as_u64().unwrap() as usize)),
                error: None,
            },
            _ => RpcOutcome {
                outcome: "succeeded".into(),
                text: json!({"success": true, "echo": args}).to_string(),
                error: None,
            },
        }
    }
}

pub fn helper(name: &str) -> Helper {
    Helper {
        name: name.into(),
        summary: format!("the {name} tool"),
        parameters: json!({"type": "object",
            "properties": {"value": {"type": "string"}, "n": {"type": "integer"}},
            "required": []}),
    }
}

pub fn owner(scope: &str) -> KernelOwner {
    KernelOwner {
        scope: scope.into(),
        user_key: mpa_redact::UserKey::for_user("7"),
    }
}

pub fn cell(scope: &str, code: &str) -> CellRequest {
    CellRequest {
        owner: owner(scope),
        code: code.into(),
        reset: false,
        helpers: vec![helper("echo"), helper("fail"), helper("big")],
        handler: Arc::new(Scripted::default()),
        cancel: CancellationToken::new(),
    }
}

pub async fn run(env: &Env, scope: &str, code: &str) -> CellReport {
    env.kernels.execute(cell(scope, code)).await.unwrap()
}

pub fn json_of(r: &CellReport) -> Value {
    serde_json::to_value(r).unwrap()
}

/// Processes of group `pgid` that are still alive (zombies excluded: they hold nothing).
pub fn alive_in_group(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …; comm may hold spaces, so split after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
            out.push(pid);
        }
    }
    out
}

/// Waits (with a deadline) until no process of the group is alive.
pub async fn group_gone(pgid: u32) -> bool {
    mpa_test_support::eventually(Duration::from_secs(10), || {
        alive_in_group(pgid).is_empty() && !std::path::Path::new(&format!("/proc/{pgid}")).exists()
    })
    .await
}
