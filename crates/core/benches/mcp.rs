//! External MCP tool calls (issue 33). Target: the host's overhead per external tool call over
//! a stdio server ≤ 1 ms p50 — compare `host_call` (the one call path: policy, ledger claim and
//! finish, timeout task, classification, cap) with `sdk_call` (the same call on the same server
//! through the SDK connection alone); the difference is the host's. The server is the Python
//! fixture (tests/fixtures/mcp_fixture_server.py, needs `pip install mcp`), over stdio and (the
//! `http_` pair) over streamable HTTP on 127.0.0.1 (the SDK's app under uvicorn).
//! Run: `cargo bench -p mpa-core --bench mcp`.
#![expect(
    clippy::unwrap_used,
    reason = "a benchmark's panic is its failure report"
)]

use divan::Bencher;
use mpa_core::{AgentConfig, Host, HostConfig};
use mpa_protocol::Actor;
use serde_json::json;
use std::sync::{Arc, OnceLock};

fn main() {
    divan::main();
}

struct Bed {
    rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
    host: Host,
    admin: Actor,
    sdk: Arc<mpa_mcp::Server>,
    http_sdk: Arc<mpa_mcp::Server>,
    _http_server: std::process::Child,
}

/// The fixture over streamable HTTP and its URL (it exits with this process).
fn start_http_fixture(dir: &std::path::Path, fixture: &str) -> (std::process::Child, String) {
    let child = std::process::Command::new("python3")
        .args([fixture, "http", "0"])
        .env("MCP_FIXTURE_DIR", dir)
        .spawn()
        .unwrap();
    let port_file = dir.join("port");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !port_file.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no port from the fixture"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let port = std::fs::read_to_string(port_file).unwrap();
    (child, format!("http://127.0.0.1:{}/mcp", port.trim()))
}

fn sdk_server(config: serde_json::Value) -> Arc<mpa_mcp::Server> {
    Arc::new(mpa_mcp::Server::new(
        mpa_mcp::ServerConfig::from_json(config).unwrap(),
        mpa_mcp::ClientOptions::default(),
        Arc::new(|| {}),
    ))
}

fn bed() -> &'static Bed {
    static BED: OnceLock<Bed> = OnceLock::new();
    BED.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/mcp_fixture_server.py"
        );
        let config = json!({"name": "fixture", "transport": "stdio", "command": "python3",
            "args": [fixture], "env": {"MCP_FIXTURE_DIR": dir.path().to_str().unwrap()},
            "read_tools": ["lookup"]});
        let (http_server, url) = start_http_fixture(dir.path(), fixture);
        let http_config = json!({"name": "remote", "transport": "streamable_http", "url": url,
            "read_tools": ["lookup"]});
        let (host, admin, sdk, http_sdk) = rt.block_on(async {
            let model = mpa_core::model::ModelConfig {
                base_url: "http://127.0.0.1:9".into(),
                model: "gpt-4o".into(),
                ..Default::default()
            };
            let host = Host::open(HostConfig::new(
                dir.path().join("data"),
                AgentConfig::new(model),
            ))
            .await
            .unwrap();
            let admin = host.local_actor("root", true).await.unwrap();
            for config in [&config, &http_config] {
                let added = host.mcp().unwrap().add(config.clone()).await.unwrap();
                assert_eq!(added["status"], "connected", "{added}");
            }
            let sdk = sdk_server(config);
            sdk.list_tools().await.unwrap();
            let http_sdk = sdk_server(http_config);
            http_sdk.list_tools().await.unwrap();
            (host, admin, sdk, http_sdk)
        });
        Bed {
            rt,
            _dir: dir,
            host,
            admin,
            sdk,
            http_sdk,
            _http_server: http_server,
        }
    })
}

fn host_call_of(tool: &str) {
    let bed = bed();
    bed.rt.block_on(async {
        bed.host
            .agent()
            .run_tool(&bed.admin, "bench", tool, json!({"title": "Dune"}))
            .await
            .unwrap()
    });
}

fn sdk_call_of(server: &mpa_mcp::Server) {
    bed().rt.block_on(async {
        let mut args = serde_json::Map::new();
        args.insert("title".into(), "Dune".into());
        server.call("lookup", args).await.unwrap()
    });
}

#[divan::bench(sample_count = 200)]
fn host_call(b: Bencher) {
    bed();
    b.bench(|| host_call_of("mcp__fixture__lookup"));
}

#[divan::bench(sample_count = 200)]
fn sdk_call(b: Bencher) {
    let bed = bed();
    b.bench(|| sdk_call_of(&bed.sdk));
}

#[divan::bench(sample_count = 200)]
fn http_host_call(b: Bencher) {
    bed();
    b.bench(|| host_call_of("mcp__remote__lookup"));
}

#[divan::bench(sample_count = 200)]
fn http_sdk_call(b: Bencher) {
    let bed = bed();
    b.bench(|| sdk_call_of(&bed.http_sdk));
}
