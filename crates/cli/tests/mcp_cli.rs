//! MCP both ways through the real binary (issue 33): `mpagent serve` publishes its tools at
//! `/mcp` to the official Python `mcp` client (as the signed-in MoviePilot user, against the
//! fake MoviePilot), `mpagent mcp serve --stdio` does the same over stdio, admins configure
//! external servers over HTTP and with `mpagent mcp`, and `mpagent tool list` names an external
//! tool's server. Skips with a notice when Python's `mcp` package is missing.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common;
use common::demo_world as world;
use mpa_eval::{FakeConfig, FakeHandle, FakeMoviePilot};
use mpa_test_support::MockModelServer;
use serde_json::{Value, json};
use std::path::Path;

const SECRET: &str = "fake-moviepilot-secret-for-mcp";
const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mcp_client.py");
const SERVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../core/tests/fixtures/mcp_fixture_server.py"
);

/// The Python interpreter that has the official `mcp` package (its absolute path: the binary
/// under test runs with a cleared environment), or `None` after a visible skip notice.
fn python() -> Option<String> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import mcp, sys; print(sys.executable)"])
        .output();
    let exe = out
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    mpa_test_support::external_program(
        "Python's official `mcp` package (pip install mcp)",
        exe.is_some(),
    )
    .then_some(exe)
    .flatten()
}

async fn client(python: &str, args: &[String]) -> Value {
    let out = tokio::process::Command::new(python)
        .arg(CLIENT)
        .args(args)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

async fn over_http(python: &str, url: &str, headers: Value, steps: Value) -> Value {
    client(
        python,
        &[
            "http".into(),
            url.into(),
            headers.to_string(),
            steps.to_string(),
        ],
    )
    .await
}

async fn fake() -> FakeHandle {
    FakeMoviePilot::start(FakeConfig::new(SECRET), world())
        .await
        .unwrap()
}

struct Served {
    srv: common::Serve,
    base: String,
    http: reqwest::Client,
}

async fn serve(data: &Path, mock: &MockModelServer, fake: &FakeHandle) -> Served {
    let mut cmd = common::serve_command(data, mock);
    cmd.env("MOVIEPILOT_URL", fake.url())
        .env("MPA_AUTH", "moviepilot")
        .env("MOVIEPILOT_SECRET_KEY", SECRET);
    let srv = common::serve(cmd).await;
    Served {
        base: format!("http://{}", srv.addr),
        srv,
        http: reqwest::Client::builder().no_proxy().build().unwrap(),
    }
}

impl Served {
    async fn token(&self, name: &str, password: &str) -> String {
        let r = self
            .http
            .post(format!("{}/api/v1/login", self.base))
            .json(&json!({"username": name, "password": password}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let v: Value = r.json().await.unwrap();
        v["token"].as_str().unwrap().to_string()
    }

    async fn api(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// One raw JSON-RPC POST to /mcp (no session), its status and the JSON-RPC message.
    async fn raw(&self, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
        let mut req = self
            .http
            .post(format!("{}/mcp", self.base))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        // An SSE reply carries the message on a `data:` line.
        let json_text = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|d| !d.is_empty())
            .unwrap_or(&text)
            .to_string();
        (
            status,
            serde_json::from_str(&json_text).unwrap_or(Value::String(text)),
        )
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_mcp_endpoint_serves_the_official_python_client_as_the_signed_in_user() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await;
    let fake = fake().await;
    let s = serve(dir.path(), &mock, &fake).await;
    let alice = s.token("alice", "alice-demo").await;
    let url = format!("{}/mcp", s.base);
    let steps = json!([
        {"op": "list"},
        {"op": "call", "name": "moviepilot_api",
         "arguments": {"operation_id": "media.search", "query": {"title": "三体"}}},
        {"op": "call", "name": "moviepilot_api", "arguments": {"operation_id": "scheduler.list"}},
        {"op": "call", "name": "moviepilot_api", "arguments": {"operation_id": 5}},
        {"op": "call", "name": "session_search", "arguments": {"query": "x"}},
    ]);
    let seen = over_http(
        &python,
        &url,
        json!({"Authorization": format!("Bearer {alice}")}),
        steps.clone(),
    )
    .await;
    assert_eq!(seen["server_name"], "moviepilot-agent", "{seen}");
    let tools: Vec<&str> = seen["steps"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"moviepilot_api"), "{tools:?}");
    // Internal tools are never published; admin-only ones not to a non-admin.
    for hidden in ["session_search", "update_plan", "memory", "execute_command"] {
        assert!(!tools.contains(&hidden), "{hidden} listed: {tools:?}");
    }
    // A read as alice reaches the fake MoviePilot and answers.
    let search = &seen["steps"][1];
    assert_eq!(search["is_error"], false, "{search}");
    assert!(
        search["text"].as_str().unwrap().contains("三体"),
        "{search}"
    );
    // An admin operation is refused as in a chat.
    let refused = &seen["steps"][2];
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        refused["text"]
            .as_str()
            .unwrap()
            .contains("administrators only"),
        "{refused}"
    );
    // Malformed params, and an unpublished tool: −32602.
    assert_eq!(seen["steps"][3]["error_code"], -32602, "{seen}");
    assert_eq!(seen["steps"][4]["error_code"], -32602, "{seen}");

    // The admin identity through X-API-KEY sees the admin tools, still no internal one.
    let admin = over_http(
        &python,
        &url,
        json!({"X-API-KEY": common::ADMIN_TOKEN}),
        json!([{"op": "list"}]),
    )
    .await;
    let admin_tools = admin["steps"][0]["tools"].to_string();
    assert!(admin_tools.contains("execute_command"), "{admin}");
    assert!(!admin_tools.contains("session_search"), "{admin}");

    // A bad token is refused before any JSON-RPC.
    let bad = over_http(
        &python,
        &url,
        json!({"Authorization": "Bearer not-a-token"}),
        json!([{"op": "list"}]),
    )
    .await;
    assert!(bad.get("connect_error").is_some(), "{bad}");
    let (status, body) = s.raw(&[("x-api-key", "wrong")], "{}").await;
    assert_eq!(status, 401, "{body}");

    // The protocol versions of §11.5 are each accepted as asked.
    for version in ["2025-11-25", "2025-06-18", "2024-11-05"] {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}});
        let (status, reply) = s
            .raw(&[("x-api-key", common::ADMIN_TOKEN)], &init.to_string())
            .await;
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["result"]["protocolVersion"], version, "{reply}");
    }
    // The JSON-RPC errors of §11.5.
    let key = [("x-api-key", common::ADMIN_TOKEN)];
    let (_, reply) = s.raw(&key, "{not json").await;
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    let (_, reply) = s.raw(&key, r#"{"hello": 1}"#).await;
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    let list = r#"{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}"#;
    let (_, reply) = s.raw(&key, list).await;
    assert_eq!(reply["error"]["code"], -32003, "{reply}");
    let (_, reply) = s
        .raw(&[key[0], ("mcp-session-id", "no-such-session")], list)
        .await;
    assert_eq!(reply["error"]["code"], -32002, "{reply}");
    // Every call was alice's, through the ledger and the policy: no admin route was reached.
    assert!(
        !fake
            .ledger()
            .iter()
            .any(|a| a.operation_id.as_deref() == Some("scheduler.list")),
        "an admin operation reached MoviePilot"
    );
    drop(s.srv);
}

#[tokio::test(flavor = "multi_thread")]
async fn admins_configure_mcp_servers_over_http_and_secrets_never_come_back() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let fixture_dir = dir.path().join("fixture");
    std::fs::create_dir_all(&fixture_dir).unwrap();
    let mock = MockModelServer::start().await;
    let fake = fake().await;
    let s = serve(&dir.path().join("data"), &mock, &fake).await;
    let alice = s.token("alice", "alice-demo").await;
    let config = json!({
        "name": "shelf", "transport": "stdio", "command": python, "args": [SERVER],
        "env": {"MCP_FIXTURE_DIR": fixture_dir.to_str().unwrap(),
                "SHELF_TOKEN": "hunter2-shelf-secret"},
        "read_tools": ["lookup"],
    });
    let servers = "/api/v1/agent/mcp/servers";
    // Non-admins are refused every config endpoint.
    for (method, path, body) in [
        (reqwest::Method::GET, servers.to_string(), None),
        (
            reqwest::Method::POST,
            servers.to_string(),
            Some(config.clone()),
        ),
        (
            reqwest::Method::POST,
            format!("{servers}/test"),
            Some(config.clone()),
        ),
        (reqwest::Method::DELETE, format!("{servers}/shelf"), None),
    ] {
        let (status, v) = s.api(method, &path, &alice, body).await;
        assert_eq!(status, 403, "{path}: {v}");
        assert_eq!(v["error"]["code"], "admin_required");
    }
    let admin = common::ADMIN_TOKEN;
    let (status, tested) = s
        .api(
            reqwest::Method::POST,
            &format!("{servers}/test"),
            admin,
            Some(config.clone()),
        )
        .await;
    assert_eq!(status, 200, "{tested}");
    assert_eq!(tested["status"], "connected", "{tested}");
    // Testing stores nothing.
    let (_, listed) = s.api(reqwest::Method::GET, servers, admin, None).await;
    assert_eq!(listed["servers"], json!([]));
    let (status, added) = s
        .api(reqwest::Method::POST, servers, admin, Some(config.clone()))
        .await;
    assert_eq!(status, 200, "{added}");
    assert!(added["tools"].to_string().contains("mcp__shelf__lookup"));
    let (_, listed) = s.api(reqwest::Method::GET, servers, admin, None).await;
    assert_eq!(listed["servers"][0]["name"], "shelf");
    for v in [&tested, &added, &listed] {
        assert!(!v.to_string().contains("hunter2"), "{v}");
    }
    assert!(listed.to_string().contains("SHELF_TOKEN"));
    // Bad input: a clear error, nothing stored.
    let (status, v) = s
        .api(
            reqwest::Method::POST,
            servers,
            admin,
            Some(json!({"name": "x y", "transport": "stdio", "command": "c"})),
        )
        .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("invalid_mcp_server"))
    );
    // The server's tools are the admin's over MCP too (published as external tools).
    let seen = over_http(
        &python,
        &format!("{}/mcp", s.base),
        json!({"Authorization": format!("Bearer {admin}")}),
        json!([{"op": "call", "name": "mcp__shelf__lookup", "arguments": {"title": "Dune"}}]),
    )
    .await;
    assert!(
        seen["steps"][0]["text"]
            .as_str()
            .unwrap()
            .contains("catalogue entry: Dune"),
        "{seen}"
    );
    let (status, _) = s
        .api(
            reqwest::Method::DELETE,
            &format!("{servers}/shelf"),
            admin,
            None,
        )
        .await;
    assert_eq!(status, 200);
    let (status, v) = s
        .api(
            reqwest::Method::DELETE,
            &format!("{servers}/shelf"),
            admin,
            None,
        )
        .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (404, Some("mcp_server_not_found"))
    );
    drop(s.srv);
}

#[tokio::test(flavor = "multi_thread")]
async fn mpagent_mcp_commands_and_the_stdio_server() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let fixture_dir = dir.path().join("fixture");
    std::fs::create_dir_all(&fixture_dir).unwrap();
    let run = |args: &[&str]| common::mpagent_sync(&data, args);
    let fixture_env = format!("MCP_FIXTURE_DIR={}", fixture_dir.display());
    let out = run(&[
        "mcp",
        "add",
        "shelf",
        "--command",
        &python,
        "--arg",
        SERVER,
        "--env",
        &fixture_env,
        "--env",
        "SHELF_TOKEN=hunter2-cli",
        "--read",
        "lookup",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("mcp__shelf__lookup"), "{stdout}");
    assert!(!stdout.contains("hunter2"), "{stdout}");
    let out = run(&["mcp", "list"]);
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("\"shelf\"") && !listed.contains("hunter2"),
        "{listed}"
    );
    // `tool list` names the server of each external tool (admins see them).
    let out = run(&["tool", "list", "--admin"]);
    let tools = String::from_utf8_lossy(&out.stdout);
    let line = tools
        .lines()
        .find(|l| l.starts_with("mcp__shelf__lookup"))
        .unwrap_or_else(|| panic!("{tools}"));
    assert!(line.contains(" shelf "), "{line}");
    assert!(line.contains("safe_read"), "{line}");
    assert!(!tools.contains("mcp__") || tools.contains("SERVER"));
    // A bad configuration is bad usage and stores nothing.
    let out = run(&["mcp", "add", "Bad Name", "--command", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["mcp", "test", "shelf"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // The same host's tools over stdio, for a desktop client that launches a command.
    let seen = client(
        &python,
        &[
            "stdio".into(),
            env!("CARGO_BIN_EXE_mpagent").into(),
            json!([
                "--data-dir",
                data,
                "mcp",
                "serve",
                "--stdio",
                "--user",
                "desk"
            ])
            .to_string(),
            json!({"PATH": std::env::var("PATH").unwrap_or_default(),
                   "MPA_ENABLE_TEST_TOOLS": "true", "LLM_MODEL": "gpt-4o",
                   "LLM_BASE_URL": "http://127.0.0.1:9"})
            .to_string(),
            json!([{"op": "list"},
                   {"op": "call", "name": "test_echo", "arguments": {"text": "over stdio"}}])
            .to_string(),
        ],
    )
    .await;
    let tools = seen["steps"][0]["tools"].to_string();
    assert!(tools.contains("test_echo"), "{seen}");
    // `desk` is not an admin: no external tool, no internal one.
    assert!(
        !tools.contains("mcp__shelf") && !tools.contains("session_search"),
        "{seen}"
    );
    assert!(
        seen["steps"][1]["text"]
            .as_str()
            .unwrap()
            .contains("over stdio"),
        "{seen}"
    );

    let out = run(&["mcp", "remove", "shelf"]);
    assert!(out.status.success());
    let out = run(&["mcp", "remove", "shelf"]);
    assert_eq!(out.status.code(), Some(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn mpagent_mcp_add_and_test_a_streamable_http_server_with_a_bearer_header() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let fixture_dir = dir.path().join("fixture");
    std::fs::create_dir_all(&fixture_dir).unwrap();
    let bearer = "hunter2-http-bearer==";
    let _server = tokio::process::Command::new(&python)
        .args([SERVER, "http", "0"])
        .env("MCP_FIXTURE_DIR", &fixture_dir)
        .env("MCP_FIXTURE_BEARER", bearer)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let port_file = fixture_dir.join("port");
    assert!(
        mpa_test_support::eventually(std::time::Duration::from_secs(60), || port_file.exists())
            .await
    );
    let port: u16 = std::fs::read_to_string(&port_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        mpa_test_support::eventually(std::time::Duration::from_secs(60), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .await
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    let run = |args: &[&str]| common::mpagent_sync(&data, args);
    let text = |out: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };

    // curl's form of a header, a token with '=' in it.
    let header = format!("Authorization: Bearer {bearer}");
    let added = run(&["mcp", "add", "remote", "--url", &url, "--header", &header]);
    assert!(added.status.success(), "{}", text(&added));
    assert!(
        text(&added).contains("mcp__remote__lookup"),
        "{}",
        text(&added)
    );
    let tested = run(&["mcp", "test", "remote"]);
    assert!(tested.status.success(), "{}", text(&tested));
    let listed = run(&["mcp", "list"]);
    assert!(text(&listed).contains("Authorization"), "{}", text(&listed));
    // The header's value never comes back.
    for out in [&added, &tested, &listed] {
        assert!(!text(out).contains(bearer), "{}", text(out));
    }

    // Without the header the server's 401 is the error (and the exit code 1).
    let out = run(&["mcp", "add", "open", "--url", &url]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("401"), "{}", text(&out));

    // A url that is not http(s) is bad usage and stores nothing.
    for bad in [
        "ftp://127.0.0.1/mcp",
        "file:///etc/passwd",
        "127.0.0.1:9/mcp",
    ] {
        let out = run(&["mcp", "add", "bad", "--url", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out));
        assert!(text(&out).contains("http:// or https://"), "{}", text(&out));
    }
    let out = run(&["mcp", "list"]);
    assert!(!text(&out).contains("\"bad\""), "{}", text(&out));
}
