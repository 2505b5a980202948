//! `execute_code` (issue 32; spec runtime.md §10) through real turns: a real `python3` kernel,
//! the mock model server, the fake MoviePilot over HTTP. Helper calls re-enter the one call path
//! as origin `kernel`; who may run a cell; a conversation's kernels end with it and with the
//! host (checked in `/proc`).
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::{demo_world, linked, mock_model};
use mpa_core::Host;
use mpa_eval::{FakeConfig, FakeHandle, FakeMoviePilot};
use mpa_protocol::{Actor, Event, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::time::Duration;

const SECRET: &str = "kernel-secret";

fn python_available() -> bool {
    let ok = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    mpa_test_support::external_program("python3", ok)
}

struct Env {
    dir: tempfile::TempDir,
    host: Host,
    fake: FakeHandle,
    mock: MockModelServer,
    admin: Actor,
    user: Actor,
}

async fn env() -> Env {
    let fake = FakeMoviePilot::start(FakeConfig::new(SECRET), demo_world())
        .await
        .unwrap();
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = mpa_core::AgentConfig::new(mock_model(&mock));
    let mut cfg = mpa_core::HostConfig::new(dir.path().join("data"), agent);
    cfg.code_cell_timeout = Duration::from_secs(30);
    cfg.moviepilot = Some(mpa_core::MoviePilotHostConfig {
        config: mpa_core::moviepilot::MoviePilotConfig {
            url: fake.url(),
            secret_key: Some(SECRET.into()),
            auth: mpa_core::moviepilot::AuthMode::Local,
        },
        identity: Some(linked(SECRET, &[("admin", ("1", "admin"))])),
        account_clock: None,
    });
    let host = Host::open(cfg).await.unwrap();
    let admin = host.local_actor("admin", true).await.unwrap();
    let user = host.local_actor("kim", false).await.unwrap();
    Env {
        dir,
        host,
        fake,
        mock,
        admin,
        user,
    }
}

impl Env {
    async fn turn_as(&self, actor: &Actor, channel: &str, session: &str) -> TurnStatus {
        let mut rx = self
            .host
            .agent()
            .submit(actor, session, channel, "go".into(), vec![])
            .await
            .unwrap();
        while let Some(ev) = rx.recv().await {
            if let Event::TurnEnded { status, .. } = ev {
                return status;
            }
        }
        panic!("no TurnEnded")
    }

    /// One admin turn whose model runs `code` once, then answers; the cell's result JSON.
    async fn cell(&self, session: &str, code: &str, reset: bool) -> Value {
        let n = self.mock.request_count();
        self.mock.push(MockReply::tool_calls(&[(
            "c1",
            "execute_code",
            json!({"code": code, "reset": reset}),
        )]));
        self.mock.push(MockReply::text("done"));
        self.turn_as(&self.admin, "web", session).await;
        let req = &self.mock.requests()[n + 1];
        let content = req["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["tool_call_id"] == "c1")
            .and_then(|m| m["content"].as_str())
            .unwrap()
            .to_owned();
        serde_json::from_str(&content).unwrap()
    }

    fn offered(&self, request: usize) -> Vec<Value> {
        self.mock.requests()[request]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

fn alive_in_group(pgid: u32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        f.len() > 2 && f[2] == pgid.to_string() && f[0] != "Z"
    })
}

async fn gone(pgid: u32) -> bool {
    mpa_test_support::eventually(Duration::from_secs(10), || !alive_in_group(pgid)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn helpers_page_subscriptions_as_parsed_json_through_the_one_call_path() {
    if !python_available() {
        return;
    }
    let e = env().await;
    let code = "pages = [moviepilot_api('subscription.list', query={'page': p, 'count': 100}) \
                for p in range(1, 4)]\n\
                print([p['success'] for p in pages], sum(len(p['data']) for p in pages))";
    let r = e.cell("s1", code, false).await;
    assert_eq!(r["status"], "success", "{r}");
    assert_eq!(r["output"], "[True, True, True] 1\n");
    assert_eq!(r["tool_calls_made"], 3);
    assert_eq!(r["success"], true);
    assert!(r.get("tool_errors").is_none());
    let reads: Vec<_> = e
        .fake
        .ledger()
        .into_iter()
        .filter(|a| a.operation_id.as_deref() == Some("subscription.list"))
        .collect();
    assert_eq!(reads.len(), 3);
    assert!(
        reads
            .iter()
            .all(|a| a.agent.source.as_deref() == Some("kernel"))
    );
    // The request's description listed the helpers with their real signatures.
    let tools = e.offered(e.mock.request_count() - 2);
    let code_tool = tools
        .iter()
        .find(|t| t["function"]["name"] == "execute_code")
        .unwrap();
    let description = code_tool["function"]["description"].as_str().unwrap();
    assert!(
        description.contains(
            "Current Python helpers: moviepilot_api(operation_id, path_params=None, query=None, body=None)"
        ),
        "{description}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_secrets_and_the_51st_call_are_refused_and_fail_the_cell() {
    if !python_available() {
        return;
    }
    let e = env().await;
    let before = e.fake.ledger().len();
    let code = "w = moviepilot_api('subscription.add', body={'name': 'x', 'tmdbid': 1})\n\
                s = moviepilot_api('config.system.get', query={'show_secrets': True})\n\
                print(w['success'], w['error'], s['success'], s['error'])";
    let r = e.cell("s1", code, false).await;
    assert_eq!(r["status"], "success", "the script itself exited 0: {r}");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["success"], false);
    assert_eq!(
        r["output"],
        "False kernel_read_only False kernel_read_only\n"
    );
    let errors = r["tool_errors"].as_array().unwrap();
    assert_eq!(errors.len(), 2);
    assert!(
        errors[1]["error"]
            .as_str()
            .unwrap()
            .contains("show_secrets")
    );
    assert_eq!(e.fake.ledger().len(), before, "nothing reached MoviePilot");
    let code = "rs = [moviepilot_api('site.list') for _ in range(51)]\n\
                print(sum(r.get('success') is True for r in rs), rs[-1]['error'])";
    let r = e.cell("s1", code, false).await;
    assert_eq!(r["output"], "50 tool_call_budget_exhausted\n");
    assert_eq!(r["tool_calls_made"], 50);
    assert_eq!(r["success"], false);
    assert!(
        r["tool_errors"][0]["error"]
            .as_str()
            .unwrap()
            .starts_with("tool_call_budget_exhausted")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn variables_persist_reset_clears_them_and_sys_exit_loses_them() {
    if !python_available() {
        return;
    }
    let e = env().await;
    e.cell("s1", "x = 7", false).await;
    let r = e.cell("s1", "print(x)", false).await;
    assert_eq!(r["output"], "7\n");
    assert_eq!(r["kernel"]["reused"], true);
    assert_eq!(r["kernel"]["execution_count"], 2);
    let r = e.cell("s1", "print('x' in globals())", true).await;
    assert_eq!(r["output"], "False\n");
    assert_eq!(r["kernel"]["state_reset"], true);
    let r = e.cell("s1", "import sys\nsys.exit(3)", false).await;
    assert_eq!(
        r["kernel"],
        json!({"mode": "session", "ended": true, "state_lost": true})
    );
    assert_eq!(r["success"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn only_an_admins_own_turn_sees_and_runs_the_tool() {
    if !python_available() {
        return;
    }
    let e = env().await;
    let has_tool = |tools: &[Value]| {
        tools
            .iter()
            .any(|t| t["function"]["name"] == "execute_code")
    };
    // A non-admin is never offered it, and a call anyway is refused.
    let n = e.mock.request_count();
    e.mock.push(MockReply::tool_calls(&[(
        "c1",
        "execute_code",
        json!({"code": "print(1)"}),
    )]));
    e.mock.push(MockReply::text("ok"));
    e.turn_as(&e.user, "web", "k1").await;
    assert!(!has_tool(&e.offered(n)));
    let refused = e.mock.requests()[n + 1]["messages"].to_string();
    assert!(refused.contains("permission_denied"), "{refused}");
    // The OpenAI-compatible endpoint's turns are not offered it either, even for an admin.
    let n = e.mock.request_count();
    e.mock.push(MockReply::tool_calls(&[(
        "c1",
        "execute_code",
        json!({"code": "print(1)"}),
    )]));
    e.mock.push(MockReply::text("ok"));
    e.turn_as(&e.admin, "openai", "o1").await;
    assert!(!has_tool(&e.offered(n)));
    let refused = e.mock.requests()[n + 1]["messages"].to_string();
    assert!(refused.contains("execute_code_unavailable"), "{refused}");
    // A direct call (`mpagent tool`) is refused too.
    let (out, _) = e
        .host
        .agent()
        .run_tool(&e.admin, "d1", "execute_code", json!({"code": "print(1)"}))
        .await
        .unwrap();
    assert_eq!(out.error.as_deref(), Some("execute_code_unavailable"));
    // A subagent is offered only what the read-only rules could allow: never execute_code.
    let n = e.mock.request_count();
    e.mock.push(MockReply::tool_calls(&[(
        "t1",
        "task",
        json!({"description": "look around"}),
    )]));
    e.mock.push(MockReply::text("child done"));
    e.mock.push(MockReply::text("parent done"));
    e.turn_as(&e.admin, "web", "p1").await;
    let child_requests: Vec<Value> = e.mock.requests()[n..]
        .iter()
        .filter(|r| {
            // The child's own requests: its task, without the parent's call.
            let m = r["messages"].to_string();
            m.contains("look around") && !m.contains("\"t1\"")
        })
        .cloned()
        .collect();
    assert!(!child_requests.is_empty());
    for r in child_requests {
        let tools = r["tools"].as_array().cloned().unwrap_or_default();
        assert!(!has_tool(&tools));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kernels_end_with_their_conversation_and_with_the_host() {
    if !python_available() {
        return;
    }
    let e = env().await;
    let spawn =
        "import subprocess, os\np = subprocess.Popen(['sleep', '600'])\nprint(os.getpgid(0))";
    let r = e.cell("s1", spawn, false).await;
    let pgid: u32 = r["output"].as_str().unwrap().trim().parse().unwrap();
    assert!(alive_in_group(pgid));
    e.host.agent().delete_session(&e.admin, "s1").await.unwrap();
    assert!(gone(pgid).await, "deleting the chat ended its kernel");
    let r = e.cell("s2", spawn, false).await;
    let pgid: u32 = r["output"].as_str().unwrap().trim().parse().unwrap();
    // The spill directory is the user's, under the data directory.
    assert!(e.dir.path().join("data/agent/runtime/code/users").is_dir());
    e.host.agent().shutdown().await;
    assert!(gone(pgid).await, "the host's shutdown ended every kernel");
}

/// Output beyond the inline cap is spilled to the user's file, and `read_file` (issue 31) reads
/// it back there: the spill is where the result says, and the model can page it.
#[tokio::test(flavor = "multi_thread")]
async fn a_spilled_output_is_read_back_with_read_file() {
    if !python_available() {
        return;
    }
    let e = env().await;
    let code =
        "for i in range(4000):\n    print('line %05d ' % i + 'x' * 20)\nprint('END-OF-SPILL')";
    let r = e.cell("spill", code, false).await;
    let path = r["stdout_spill_path"]
        .as_str()
        .unwrap_or_else(|| panic!("no spill: {r}"))
        .to_owned();
    assert!(
        path.starts_with(e.dir.path().join("data").to_str().unwrap()),
        "{path}"
    );
    let n = e.mock.request_count();
    e.mock.push(MockReply::tool_calls(&[(
        "r1",
        "read_file",
        json!({"file_path": path, "start_line": 4000, "end_line": 4001}),
    )]));
    e.mock.push(MockReply::text("read"));
    e.turn_as(&e.admin, "web", "spill").await;
    let req = &e.mock.requests()[n + 1];
    let content = req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["tool_call_id"] == "r1")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_owned();
    assert!(content.contains("END-OF-SPILL"), "{content}");
    assert!(!content.contains("\"error\""), "{content}");
}

#[test]
fn execute_code_spec_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let kernels = mpa_kernel::Kernels::new(mpa_kernel::KernelConfig::new(dir.path(), dir.path()));
    let caps: Vec<std::sync::Arc<dyn mpa_core::capability::Capability>> =
        vec![std::sync::Arc::new(mpa_core::code::Code { kernels })];
    let registry = mpa_core::capability::registry_of(&caps);
    insta::assert_json_snapshot!(
        "execute_code_spec",
        registry.get("execute_code").unwrap().spec
    );
}
