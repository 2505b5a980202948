//! External MCP tool calls (issue 33). Target: the host's overhead per external tool call over
//! a stdio server ≤ 1 ms p50 — compare `host_call` (the one call path: policy, ledger claim and
//! finish, timeout task, classification, cap) with `sdk_call` (the same call on the same server
//! through the SDK connection alone); the difference is the host's. The server is the Python
//! fixture (tests/fixtures/mcp_fixture_server.py, needs `pip install mcp`).
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
        let (host, admin, sdk) = rt.block_on(async {
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
            let added = host.mcp().unwrap().add(config.clone()).await.unwrap();
            assert_eq!(added["status"], "connected", "{added}");
            let sdk = Arc::new(mpa_mcp::Server::new(
                mpa_mcp::ServerConfig::from_json(config).unwrap(),
                mpa_mcp::ClientOptions::default(),
                Arc::new(|| {}),
            ));
            sdk.list_tools().await.unwrap();
            (host, admin, sdk)
        });
        Bed {
            rt,
            _dir: dir,
            host,
            admin,
            sdk,
        }
    })
}

#[divan::bench(sample_count = 200)]
fn host_call(b: Bencher) {
    let bed = bed();
    b.bench(|| {
        bed.rt.block_on(async {
            bed.host
                .agent()
                .run_tool(
                    &bed.admin,
                    "bench",
                    "mcp__fixture__lookup",
                    json!({"title": "Dune"}),
                )
                .await
                .unwrap()
        })
    });
}

#[divan::bench(sample_count = 200)]
fn sdk_call(b: Bencher) {
    let bed = bed();
    b.bench(|| {
        bed.rt.block_on(async {
            let mut args = serde_json::Map::new();
            args.insert("title".into(), "Dune".into());
            bed.sdk.call("lookup", args).await.unwrap()
        })
    });
}
