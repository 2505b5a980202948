//! MCP both ways, the client side (issue 33): a real MCP server built with the official Python
//! `mcp` package (tests/fixtures/mcp_fixture_server.py, stdio) configured by an admin, its tools
//! in a chat turn against the mock model, a server killed mid-call and restarted, and the
//! rules external tools run under (admin only, never for subagents or code, always ledgered).
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::mock_model;
use crate::common::tool_names;
use async_trait::async_trait;
use mpa_core::tools::policy::Origin;
use mpa_core::tools::{JsonTool, ToolContext, ToolMeta, ToolOutput, json_tool};
use mpa_core::{AgentConfig, Host, HostConfig};
use mpa_protocol::{Actor, Event, Outcome, ToolSpec, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/mcp_fixture_server.py"
);

/// Whether Python with the official `mcp` package is here (a visible skip otherwise).
fn python_mcp() -> bool {
    let present = std::process::Command::new("python3")
        .args(["-c", "import mcp"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    mpa_test_support::external_program("Python's official `mcp` package (pip install mcp)", present)
}

/// Runs calls given as `{"calls": [{tool, args, origin}]}` through the agent handle with the
/// origin named (`subagent`, `kernel`), as a subagent's loop or a code kernel would.
struct Probe;

#[async_trait]
impl JsonTool for Probe {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "probe".into(),
            description: "test probe".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn call(&self, ctx: ToolContext, args: Value) -> ToolOutput {
        let mut outs = Vec::new();
        for c in args["calls"].as_array().unwrap() {
            let origin = match c["origin"].as_str().unwrap() {
                "subagent" => Origin::Subagent,
                _ => Origin::Kernel,
            };
            let inv = ctx
                .agent
                .call_tool(&ctx, origin, c["tool"].as_str().unwrap(), c["args"].clone())
                .await
                .unwrap();
            outs.push(json!({"error": inv.output.error.as_deref(), "content": inv.output.content}));
        }
        ToolOutput::json(&json!({"outputs": outs}), Outcome::Succeeded)
    }
}

struct Env {
    _dir: tempfile::TempDir,
    fixture_dir: PathBuf,
    host: Host,
    admin: Actor,
    mock: MockModelServer,
}

impl Env {
    /// The admin's evidence history searched for tool results matching `query`.
    async fn tool_evidence(&self, query: &str) -> Value {
        let history = self
            .host
            .agent()
            .services()
            .caps
            .history()
            .cloned()
            .unwrap();
        mpa_core::history::search_json(
            &history,
            &mpa_core::UserKey::for_user(&self.admin.user_id),
            None,
            json!({"query": query, "role_filter": "tool"}),
        )
        .await
    }

    async fn open() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let fixture_dir = dir.path().join("fixture");
        std::fs::create_dir_all(&fixture_dir).unwrap();
        let mock = MockModelServer::start().await;
        let mut cfg = HostConfig::new(dir.path().join("data"), AgentConfig::new(mock_model(&mock)));
        // A dead server is retried at the next call (no waiting in tests).
        cfg.mcp.backoff_initial = Duration::ZERO;
        let host = Host::open_with(cfg, |b| b.tool(json_tool(Probe)))
            .await
            .unwrap();
        let admin = host.local_actor("root", true).await.unwrap();
        Env {
            _dir: dir,
            fixture_dir,
            host,
            admin,
            mock,
        }
    }

    fn config(&self) -> Value {
        json!({
            "name": "fixture",
            "transport": "stdio",
            "command": "python3",
            "args": [FIXTURE],
            "env": {"MCP_FIXTURE_DIR": self.fixture_dir.to_str().unwrap(),
                    "FIXTURE_TOKEN": "s3cret-fixture-token"},
            "read_tools": ["lookup"],
        })
    }

    async fn add(&self) -> Value {
        self.host.mcp().unwrap().add(self.config()).await.unwrap()
    }

    async fn turn(&self, actor: &Actor, session: &str) -> (TurnStatus, String) {
        let mut rx = self
            .host
            .agent()
            .submit(actor, session, "test", "go".into(), vec![])
            .await
            .unwrap();
        while let Some(ev) = rx.recv().await {
            if let Event::TurnEnded {
                status, final_text, ..
            } = ev
            {
                return (status, final_text);
            }
        }
        panic!("no TurnEnded")
    }
}

fn tool_result(req: &Value, call_id: &str) -> Value {
    let content = req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no result for {call_id}"))["content"]
        .as_str()
        .unwrap()
        .to_string();
    serde_json::from_str(&content).unwrap_or(Value::String(content))
}

fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_external_server_s_tool_answers_in_a_chat_turn_and_is_kept_as_evidence() {
    if !python_mcp() {
        return;
    }
    let env = Env::open().await;
    let added = env.add().await;
    assert_eq!(added["status"], "connected", "{added}");
    let names: std::collections::BTreeSet<&str> = added["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "mcp__fixture__broken",
            "mcp__fixture__lookup",
            "mcp__fixture__open_shelf",
            "mcp__fixture__slow_write"
        ]
        .into()
    );
    // The stored env value is never shown back, only its name.
    assert!(
        !added.to_string().contains("s3cret-fixture-token"),
        "{added}"
    );
    assert_eq!(
        added["env_names"],
        json!(["FIXTURE_TOKEN", "MCP_FIXTURE_DIR"])
    );

    env.mock.push(MockReply::tool_calls(&[
        ("c1", "mcp__fixture__lookup", json!({"title": "Dune"})),
        ("c2", "mcp__fixture__broken", json!({})),
    ]));
    env.mock.push(MockReply::text(
        "The catalogue lists Dune (2021) by Denis Villeneuve.",
    ));
    let (status, answer) = env.turn(&env.admin, "mcp-chat").await;
    assert_eq!(status, TurnStatus::Completed);
    assert!(answer.contains("Denis Villeneuve"));
    let reqs = env.mock.requests();
    // The model was offered the server's tools with their own schemas.
    assert!(tool_names(&reqs[0]).contains("mcp__fixture__lookup"));
    let listed = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__fixture__lookup")
        .unwrap();
    assert_eq!(
        listed["function"]["parameters"]["required"],
        json!(["title"])
    );
    let found = tool_result(&reqs[1], "c1");
    assert!(
        found.to_string().contains("catalogue entry: Dune (2021)"),
        "{found}"
    );
    // isError → failed, with the server's words; external calls carry their ledger receipt.
    let broken = tool_result(&reqs[1], "c2");
    assert!(
        broken.to_string().contains("Error executing tool broken"),
        "{broken}"
    );
    assert_eq!(broken["_tool_execution"]["outcome"], "failed", "{broken}");
    let stored = env
        .host
        .agent()
        .chat_for(&env.admin, "mcp-chat")
        .await
        .unwrap();
    let outcome = |id: &str| {
        stored
            .agent_messages
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some(id))
            .unwrap()
            .metadata
            .get("moviepilot_execution_outcome")
            .cloned()
    };
    assert_eq!(outcome("c1"), Some(json!("succeeded")));
    assert_eq!(outcome("c2"), Some(json!("failed")));
    // The result is in the evidence history.
    let hits = env.tool_evidence("Villeneuve").await;
    assert!(hits.to_string().contains("mcp-chat"), "{hits}");
    env.host.agent().shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_mid_call_leaves_the_write_unknown_is_unavailable_then_reconnects() {
    if !python_mcp() {
        return;
    }
    let env = Env::open().await;
    assert_eq!(env.add().await["status"], "connected");
    env.mock.push(MockReply::tool_calls(&[(
        "w1",
        "mcp__fixture__slow_write",
        json!({"note": "shelf A"}),
    )]));
    env.mock.push(MockReply::tool_calls(&[(
        "l1",
        "mcp__fixture__lookup",
        json!({"title": "Dune"}),
    )]));
    env.mock
        .push(MockReply::text("I could not confirm the note."));
    let agent = env.host.agent().clone();
    let admin = env.admin.clone();
    let turn = tokio::spawn(async move {
        let mut rx = agent
            .submit(&admin, "mcp-kill", "test", "write".into(), vec![])
            .await
            .unwrap();
        while let Some(ev) = rx.recv().await {
            if let Event::TurnEnded { status, .. } = ev {
                return status;
            }
        }
        panic!("no TurnEnded")
    });
    // The write is running on the server: it stays dead from now on, and dies.
    wait_for_file(&env.fixture_dir.join("started"));
    std::fs::write(env.fixture_dir.join("down"), "").unwrap();
    let pid = std::fs::read_to_string(env.fixture_dir.join("pid")).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    // A write whose server died under it is unknown, and so is the turn.
    assert_eq!(turn.await.unwrap(), TurnStatus::Unknown);
    let reqs = env.mock.requests();
    let write = tool_result(&reqs[1], "w1");
    assert_eq!(write["execution_outcome"], "unknown", "{write}");
    // The next call finds the server unable to start: a quick, clear refusal.
    let next = tool_result(&reqs[2], "l1");
    assert_eq!(next["error"], "mcp_server_unavailable", "{next}");

    // Back up: the next call reconnects.
    std::fs::remove_file(env.fixture_dir.join("down")).unwrap();
    env.mock.push(MockReply::tool_calls(&[(
        "l2",
        "mcp__fixture__lookup",
        json!({"title": "Arrival"}),
    )]));
    env.mock.push(MockReply::text("found"));
    assert_eq!(
        env.turn(&env.admin, "mcp-back").await.0,
        TurnStatus::Completed
    );
    let reqs = env.mock.requests();
    let again = tool_result(reqs.last().unwrap(), "l2");
    assert!(
        again.to_string().contains("catalogue entry: Arrival"),
        "{again}"
    );
    env.host.agent().shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn external_tools_are_admin_only_and_refused_to_subagents_and_code() {
    if !python_mcp() {
        return;
    }
    let env = Env::open().await;
    assert_eq!(env.add().await["status"], "connected");
    // A non-admin chat is never offered them, and calling one by name is refused.
    let bob = env.host.local_actor("bob", false).await.unwrap();
    env.mock.push(MockReply::tool_calls(&[(
        "b1",
        "mcp__fixture__lookup",
        json!({"title": "Dune"}),
    )]));
    env.mock.push(MockReply::text("no"));
    env.turn(&bob, "bob-chat").await;
    let reqs = env.mock.requests();
    assert!(
        !tool_names(&reqs[0]).iter().any(|n| n.starts_with("mcp__")),
        "{:?}",
        tool_names(&reqs[0])
    );
    assert_eq!(tool_result(&reqs[1], "b1")["error"], "permission_denied");

    // A subagent's call — even of a tool the admin marked read — and code's are refused.
    env.mock.push(MockReply::tool_calls(&[(
        "p1",
        "probe",
        json!({"calls": [
            {"tool": "mcp__fixture__lookup", "args": {"title": "Dune"}, "origin": "subagent"},
            {"tool": "mcp__fixture__slow_write", "args": {"note": "x"}, "origin": "subagent"},
            {"tool": "mcp__fixture__lookup", "args": {"title": "Dune"}, "origin": "kernel"},
        ]}),
    )]));
    env.mock.push(MockReply::text("done"));
    env.turn(&env.admin, "admin-probe").await;
    let reqs = env.mock.requests();
    let outs = tool_result(reqs.last().unwrap(), "p1");
    let errors: Vec<&str> = outs["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["error"].as_str().unwrap_or("none"))
        .collect();
    assert_eq!(
        errors,
        [
            "subagent_read_only",
            "subagent_read_only",
            // The kernel's own gate answers first: code may call only its helper tools.
            "kernel_read_only"
        ]
    );
    assert!(!env.fixture_dir.join("started").exists());
    env.host.agent().shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_external_call_is_ledgered_even_one_marked_read() {
    if !python_mcp() {
        return;
    }
    let env = Env::open().await;
    assert_eq!(env.add().await["status"], "connected");
    let (out, outcome) = env
        .host
        .agent()
        .run_tool(
            &env.admin,
            "cli-ledger",
            "mcp__fixture__lookup",
            json!({"title": "Dune"}),
        )
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Succeeded, "{}", out.content);
    // Its receipt: a read an admin marked is ledgered all the same.
    let v: Value = serde_json::from_str(&out.content).unwrap();
    assert_eq!(v["_tool_execution"]["outcome"], "succeeded", "{v}");
    env.host.agent().shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_server_configuration_is_refused_and_changes_nothing() {
    let env = Env::open().await;
    let hub = env.host.mcp().unwrap();
    for bad in [
        json!({"name": "Bad Name", "transport": "stdio", "command": "x"}),
        json!({"name": "ok", "transport": "stdio"}),
        json!({"name": "ok", "transport": "streamable_http", "url": "ftp://x"}),
        json!({"name": "ok", "transport": "stdio", "command": "x", "secret": "hunter2"}),
        json!({"name": "ok", "transport": "stdio", "command": "x", "env": "hunter2"}),
    ] {
        let err = hub.add(bad.clone()).await.unwrap_err();
        assert_eq!(err.code(), "invalid_mcp_server", "{bad}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
    assert!(hub.list().await.unwrap().is_empty());
    assert_eq!(
        hub.remove("nothing").await.unwrap_err().code(),
        "mcp_server_not_found"
    );
    // A server that cannot start is stored, reported unavailable, and costs its tools nothing.
    let v = hub
        .add(json!({"name": "ghost", "transport": "stdio",
                    "command": "/nonexistent/mcp-server-binary"}))
        .await
        .unwrap();
    assert_eq!(v["status"], "unavailable");
    assert_eq!(v["error"], "mcp_server_unavailable");
    assert_eq!(hub.list().await.unwrap().len(), 1);
    hub.remove("ghost").await.unwrap();
    assert!(hub.list().await.unwrap().is_empty());
}

// ---- The same server over streamable HTTP (the SDK's own app under uvicorn, on 127.0.0.1) ----

const BEARER: &str = "s3cret-http-bearer";

/// The fixture served over streamable HTTP: a child of the test, killed when dropped.
struct HttpFixture {
    child: tokio::process::Child,
    port: u16,
}

impl HttpFixture {
    /// Starts it on `port` (0: a free one) and waits until it listens.
    async fn start(fixture_dir: &Path, port: u16) -> HttpFixture {
        let port_file = fixture_dir.join("port");
        let _ = std::fs::remove_file(&port_file);
        let child = tokio::process::Command::new("python3")
            .args([FIXTURE, "http", &port.to_string()])
            .env("MCP_FIXTURE_DIR", fixture_dir)
            .env("MCP_FIXTURE_BEARER", BEARER)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        assert!(
            mpa_test_support::eventually(Duration::from_secs(60), || port_file.exists()).await,
            "the HTTP fixture never wrote its port"
        );
        let port: u16 = std::fs::read_to_string(&port_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The port is written once the socket is bound; uvicorn accepts once its app started.
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let up = mpa_test_support::eventually(Duration::from_secs(60), || {
            std::net::TcpStream::connect(addr).is_ok()
        })
        .await;
        assert!(up, "the HTTP fixture never accepted a connection");
        HttpFixture { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    async fn kill(&mut self) {
        self.child.kill().await.unwrap();
    }
}

fn http_config(url: &str, with_bearer: bool) -> Value {
    let headers = if with_bearer {
        json!({"Authorization": format!("Bearer {BEARER}")})
    } else {
        json!({})
    };
    json!({"name": "remote", "transport": "streamable_http", "url": url,
           "headers": headers, "read_tools": ["lookup"]})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamable_http_server_s_tool_answers_in_a_chat_turn_and_is_kept_as_evidence() {
    if !python_mcp() {
        return;
    }
    let env = Env::open().await;
    let fixture = HttpFixture::start(&env.fixture_dir, 0).await;
    let hub = env.host.mcp().unwrap();
    let added = hub.add(http_config(&fixture.url(), true)).await.unwrap();
    assert_eq!(added["status"], "connected", "{added}");
    assert!(
        added["tools"]
            .to_string()
            .contains("mcp__remote__slow_write"),
        "{added}"
    );
    // The header's value is a secret: only its name comes back, here and in the list.
    assert_eq!(added["header_names"], json!(["Authorization"]));
    let listed = serde_json::to_string(&hub.list().await.unwrap()).unwrap();
    for shown in [added.to_string(), listed] {
        assert!(!shown.contains(BEARER), "{shown}");
    }

    env.mock.push(MockReply::tool_calls(&[
        ("h1", "mcp__remote__lookup", json!({"title": "Arrival"})),
        ("h2", "mcp__remote__broken", json!({})),
    ]));
    env.mock
        .push(MockReply::text("Arrival (2021), by Denis Villeneuve."));
    let (status, answer) = env.turn(&env.admin, "http-chat").await;
    assert_eq!(status, TurnStatus::Completed);
    assert!(answer.contains("Villeneuve"));
    let reqs = env.mock.requests();
    assert!(tool_names(&reqs[0]).contains("mcp__remote__lookup"));
    let found = tool_result(&reqs[1], "h1");
    assert!(
        found
            .to_string()
            .contains("catalogue entry: Arrival (2021)"),
        "{found}"
    );
    // Ledgered like every external call; isError → failed.
    assert_eq!(found["_tool_execution"]["outcome"], "succeeded", "{found}");
    assert_eq!(
        tool_result(&reqs[1], "h2")["_tool_execution"]["outcome"],
        "failed"
    );
    let hits = env.tool_evidence("Arrival").await;
    assert!(hits.to_string().contains("http-chat"), "{hits}");
    env.host.agent().shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamable_http_server_refusing_a_missing_header_gives_a_clear_error() {
    if !python_mcp() {
        return;
    }
    let env = Env::open().await;
    let fixture = HttpFixture::start(&env.fixture_dir, 0).await;
    let added = env
        .host
        .mcp()
        .unwrap()
        .add(http_config(&fixture.url(), false))
        .await
        .unwrap();
    assert_eq!(added["status"], "unavailable", "{added}");
    assert_eq!(added["error"], "mcp_server_unavailable");
    let message = added["message"].as_str().unwrap();
    assert!(
        message.contains("401") && message.contains("refused the credentials"),
        "{message}"
    );
    env.host.agent().shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_streamable_http_server_is_unavailable_then_reconnects_on_the_same_port() {
    if !python_mcp() {
        return;
    }
    let env = Env::open().await;
    let mut fixture = HttpFixture::start(&env.fixture_dir, 0).await;
    let hub = env.host.mcp().unwrap();
    assert_eq!(
        hub.add(http_config(&fixture.url(), true)).await.unwrap()["status"],
        "connected"
    );
    // A stdio server next to it is not disturbed by the HTTP one's death.
    assert_eq!(env.add().await["status"], "connected");
    let call = |tool: &'static str, title: &'static str| {
        let agent = env.host.agent().clone();
        let admin = env.admin.clone();
        async move {
            agent
                .run_tool(&admin, "http-kill", tool, json!({ "title": title }))
                .await
                .unwrap()
        }
    };
    let (out, outcome) = call("mcp__remote__lookup", "Dune").await;
    assert_eq!(outcome, Outcome::Succeeded, "{}", out.content);

    let port = fixture.port;
    fixture.kill().await;
    let (out, outcome) = call("mcp__remote__lookup", "Dune").await;
    assert_eq!(
        out.error.as_deref(),
        Some("mcp_server_unavailable"),
        "{}",
        out.content
    );
    assert_eq!(outcome, Outcome::Failed);
    let (out, outcome) = call("mcp__fixture__lookup", "Dune").await;
    assert_eq!(outcome, Outcome::Succeeded, "{}", out.content);

    // Back on the same port: the next call connects a new session.
    let _fixture = HttpFixture::start(&env.fixture_dir, port).await;
    let (out, outcome) = call("mcp__remote__lookup", "Sicario").await;
    assert_eq!(outcome, Outcome::Succeeded, "{}", out.content);
    assert!(
        out.content.contains("catalogue entry: Sicario"),
        "{}",
        out.content
    );
    env.host.agent().shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_non_admin_never_sees_a_streamable_http_server_s_tools() {
    if !python_mcp() {
        return;
    }
    let env = Env::open().await;
    let fixture = HttpFixture::start(&env.fixture_dir, 0).await;
    assert_eq!(
        env.host
            .mcp()
            .unwrap()
            .add(http_config(&fixture.url(), true))
            .await
            .unwrap()["status"],
        "connected"
    );
    let bob = env.host.local_actor("bob", false).await.unwrap();
    env.mock.push(MockReply::tool_calls(&[(
        "b1",
        "mcp__remote__lookup",
        json!({"title": "Dune"}),
    )]));
    env.mock.push(MockReply::text("no"));
    env.turn(&bob, "bob-http").await;
    let reqs = env.mock.requests();
    assert!(
        !tool_names(&reqs[0]).iter().any(|n| n.starts_with("mcp__")),
        "{:?}",
        tool_names(&reqs[0])
    );
    assert_eq!(tool_result(&reqs[1], "b1")["error"], "permission_denied");
    env.host.agent().shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_list_changed_notification_brings_the_new_tool_over_stdio_and_http() {
    if !python_mcp() {
        return;
    }
    let env = Env::open().await;
    let fixture = HttpFixture::start(&env.fixture_dir, 0).await;
    let hub = env.host.mcp().unwrap();
    assert_eq!(env.add().await["status"], "connected");
    let remote = hub.add(http_config(&fixture.url(), true)).await.unwrap();
    assert_eq!(remote["status"], "connected", "{remote}");
    for server in ["fixture", "remote"] {
        let new_tool = format!("mcp__{server}__shelf_note");
        // Not there before the server says so; calling it is an unknown tool.
        let listed = serde_json::to_string(&hub.list().await.unwrap()).unwrap();
        assert!(!listed.contains(&new_tool), "{listed}");
        let (out, outcome) = env
            .host
            .agent()
            .run_tool(
                &env.admin,
                "changed",
                &format!("mcp__{server}__open_shelf"),
                json!({}),
            )
            .await
            .unwrap();
        assert_eq!(outcome, Outcome::Succeeded, "{}", out.content);
        // The notification (stdio: on the pipe; HTTP: on the GET event stream) refreshes the
        // server's set in the registry, and the new tool answers through the one call path.
        let tools = &env.host.agent().services().tools;
        let appeared = mpa_test_support::eventually(Duration::from_secs(30), || {
            tools.meta(&new_tool).is_some()
        })
        .await;
        assert!(appeared, "{server}: the new tool never appeared");
        let (out, outcome) = env
            .host
            .agent()
            .run_tool(&env.admin, "changed", &new_tool, json!({"text": "Dune"}))
            .await
            .unwrap();
        assert_eq!(outcome, Outcome::Succeeded, "{}", out.content);
        assert!(out.content.contains("shelf note: Dune"), "{}", out.content);
    }
    env.host.agent().shutdown().await;
}
