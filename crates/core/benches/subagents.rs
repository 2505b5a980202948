//! Subagent costs (issue 30). Targets: the host's overhead of starting one child and collecting
//! its result (the mock model answering at once) ≤ 5 ms — compare `one_child` with
//! `model_round_trip`, the same single model request without the host; eight parallel children
//! finish within 2× the time of one (`eight_children` against `one_child`).
//! Run: `cargo bench -p mpa-core --bench subagents`.
#![expect(
    clippy::unwrap_used,
    reason = "a benchmark's panic is its failure report"
)]

use divan::Bencher;
use mpa_core::{Agent, AgentConfig, Capabilities, RegistryOptions};
use mpa_model::{ChatRequest, ModelClient, ModelConfig};
use mpa_protocol::{Actor, Message};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::json;
use std::sync::OnceLock;
use tokio_util::sync::CancellationToken;

fn main() {
    divan::main();
}

struct Bed {
    rt: tokio::runtime::Runtime,
    _mock: MockModelServer,
    _dir: tempfile::TempDir,
    agent: Agent,
    actor: Actor,
    client: ModelClient,
}

fn bed() -> &'static Bed {
    static BED: OnceLock<Bed> = OnceLock::new();
    BED.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let (mock, dir, agent, actor) = rt.block_on(async {
            let mock = MockModelServer::start().await;
            mock.set_responder(|_| MockReply::text("checked: nothing stuck"));
            let dir = tempfile::tempdir().unwrap();
            let store = mpa_store::Store::open_in(dir.path()).unwrap();
            let user = store.ensure_local_user("bench").await.unwrap();
            let actor = Actor {
                user_id: user.id,
                user_name: user.name,
                is_admin: false,
            };
            let model = ModelConfig {
                base_url: mock.base_url.clone(),
                model: "gpt-4o".into(),
                max_retries: 0,
                ..Default::default()
            };
            let agent = Agent::builder(AgentConfig::new(model), store)
                .caps(Capabilities::default())
                .options(RegistryOptions::default())
                .build()
                .unwrap();
            (mock, dir, agent, actor)
        });
        let client = ModelClient::new(ModelConfig {
            base_url: mock.base_url.clone(),
            model: "gpt-4o".into(),
            max_retries: 0,
            ..Default::default()
        })
        .unwrap();
        Bed {
            rt,
            _mock: mock,
            _dir: dir,
            agent,
            actor,
            client,
        }
    })
}

fn run_children(n: usize) {
    let b = bed();
    let tasks: Vec<_> = (0..n)
        .map(|i| json!({"description": format!("check area {i}")}))
        .collect();
    let (out, _) =
        b.rt.block_on(b.agent.run_tool(
            &b.actor,
            "bench",
            "subagent_task",
            json!({"action": "run", "tasks": tasks, "timeout_ms": 300000}),
        ))
        .unwrap();
    assert!(out.content.contains("\"completed\""), "{}", out.content);
}

/// One child started, run (one model request) and collected, through the tool.
#[divan::bench(sample_count = 200)]
fn one_child() {
    run_children(1);
}

/// Eight children at once (four run, four wait for a place).
#[divan::bench(sample_count = 100)]
fn eight_children() {
    run_children(8);
}

/// The same model request straight through the model client: what `one_child` costs without
/// the host.
#[divan::bench(sample_count = 200)]
fn model_round_trip(bencher: Bencher) {
    let b = bed();
    let messages = vec![
        Message::system(mpa_core::subagent::SYSTEM_PROMPT),
        Message::user("check area 0"),
    ];
    bencher.bench(|| {
        let cancel = CancellationToken::new();
        let req = ChatRequest::new(&messages, &[]);
        b.rt.block_on(b.client.stream_chat(&req, &cancel, &mut |_| {}))
            .unwrap()
    });
}
