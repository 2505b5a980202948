//! Host benchmarks for the working core (issue 2), run with `cargo bench -p mpa-cli --bench host`:
//!
//! - host overhead per model iteration with a 200-, 2,000- and 20,000-message context against an
//!   instantly answering mock: (time of a K-iteration turn − time of K bare model calls with the
//!   same context) / K. It must stay flat as the context grows (the transcript is borrowed, never
//!   cloned per call); `MPA_BENCH_CONTEXTS=200,2000` picks the sizes;
//! - `mpagent chat` cold start to the first model request arriving at the mock.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_core::{Agent, AgentConfig, RegistryOptions};
use mpa_model::{ChatRequest, ModelClient, ModelConfig};
use mpa_protocol::{Actor, Message, Outcome, ToolCall, UserId};
use mpa_store::{Chat, Store};
use mpa_test_support::{MockModelServer, MockReply};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Iterations per turn: fewer for the larger contexts, whose requests are megabytes each.
fn iterations_for(context: usize) -> u32 {
    match context {
        0..=500 => 100,
        501..=5000 => 40,
        _ => 10,
    }
}

fn context_messages(context: usize) -> Vec<Message> {
    let mut v = Vec::with_capacity(context);
    for i in 0..context / 4 {
        v.push(Message::user(format!(
            "请帮我找一下电影 {i}, and check the downloader status please"
        )));
        v.push(Message::assistant(
            "",
            vec![ToolCall {
                id: format!("c{i}"),
                name: "test_echo".into(),
                arguments: format!("{{\"text\":\"query {i}\"}}"),
            }],
        ));
        v.push(Message::tool(
            format!("c{i}"),
            "test_echo",
            format!(
                "{{\"success\":true,\"echo\":\"{}\"}}",
                "result text ".repeat(40)
            ),
            Outcome::Succeeded,
        ));
        v.push(Message::assistant(
            format!(
                "Here is what I found for item {i}. {}",
                "detail ".repeat(30)
            ),
            vec![],
        ));
    }
    v
}

fn model_config(mock: &MockModelServer) -> ModelConfig {
    ModelConfig {
        base_url: mock.base_url.clone(),
        // Not in the model catalogue, so the window below is the one the host budgets against.
        model: "bench-model".into(),
        ..ModelConfig::default()
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Median milliseconds of a whole `iterations`-call turn and of as many bare model calls.
async fn turn_and_bare(mock: &MockModelServer, context: usize, iterations: u32) -> (f64, f64) {
    mock.set_default(MockReply::tool_calls(&[(
        "call_x",
        "test_echo",
        serde_json::json!({"text": "ping"}),
    )]));
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let user = store.ensure_local_user("bench").await.unwrap();
    let actor = Actor {
        user_id: user.id.clone(),
        user_name: user.name.clone(),
        is_admin: false,
    };
    let mut cfg = AgentConfig::new(model_config(mock));
    cfg.max_iterations = iterations;
    // A window no context here comes near: this measures the loop, not a compaction.
    cfg.max_context_tokens_k = 1_000_000;
    let agent = Agent::builder(cfg, store.clone())
        .options(RegistryOptions {
            diagnostic_tools: true,
        })
        .build()
        .unwrap();
    let client = ModelClient::new(model_config(mock)).unwrap();
    let mut turn_ms = Vec::new();
    let mut bare_ms = Vec::new();
    for round in 0..5 {
        let sid = format!("bench{round}");
        store
            .save_chat(Chat {
                session_id: sid.clone(),
                user_id: UserId(user.id.0.clone()),
                channel: "bench".into(),
                title: String::new(),
                agent_messages: context_messages(context),
                display_messages: serde_json::json!([]),
                message_count: context as i64,
                session_state: mpa_store::chats::empty_object(),
                turn_status: None,
                created_at: chrono::Utc::now(),
                updated_at: chrono::Utc::now(),
            })
            .await
            .unwrap();
        let session = agent.session(&actor, &sid, "bench").await.unwrap();
        let t = Instant::now();
        let mut rx = session.submit(actor.clone(), "go".into(), vec![]).unwrap();
        while let Some(ev) = rx.recv().await {
            if let mpa_protocol::Event::TurnEnded { status, .. } = ev {
                // Every model answer calls a tool, so a whole turn runs to the iteration limit.
                assert_eq!(status, mpa_protocol::TurnStatus::IterationLimit);
                break;
            }
        }
        turn_ms.push(t.elapsed().as_secs_f64() * 1e3);

        // The same number of bare model calls with a context of the same average size.
        let mut msgs = vec![Message::system("system prompt ".repeat(100))];
        msgs.extend(context_messages(context));
        msgs.push(Message::user("go"));
        let t = Instant::now();
        for _ in 0..iterations {
            let req = ChatRequest::new(&msgs, &[]);
            client
                .stream_chat(&req, &CancellationToken::new(), &mut |_| {})
                .await
                .unwrap();
            msgs.push(Message::assistant("", vec![]));
            msgs.push(Message::tool(
                "call_x",
                "test_echo",
                "{\"success\":true,\"echo\":\"ping\"}",
                Outcome::Succeeded,
            ));
        }
        bare_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    (median(turn_ms), median(bare_ms))
}

/// Host overhead per model iteration as the slope between a turn of K and one of K/2 calls (so
/// what a turn costs once — loading and saving the chat — is not spread over its calls), and that
/// once-per-turn cost.
async fn overhead_per_iteration(mock: &MockModelServer, context: usize) -> (f64, f64, f64) {
    let k = iterations_for(context);
    let h = k / 2;
    let (turn_k, bare_k) = turn_and_bare(mock, context, k).await;
    let (turn_h, bare_h) = turn_and_bare(mock, context, h).await;
    let per_iter = ((turn_k - turn_h) - (bare_k - bare_h)) / f64::from(k - h);
    let per_turn = (turn_h - bare_h) - per_iter * f64::from(h);
    (turn_k / f64::from(k), per_iter, per_turn)
}

async fn cold_start(mock: &MockModelServer) -> f64 {
    mock.set_default(MockReply::text("hi"));
    let dir = tempfile::tempdir().unwrap();
    let mut samples = Vec::new();
    for _ in 0..20 {
        let before = mock.request_count();
        let t = Instant::now();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mpagent"))
            .arg("--data-dir")
            .arg(dir.path())
            .env("LLM_BASE_URL", &mock.base_url)
            .env("LLM_MODEL", "gpt-4o")
            .args(["chat", "--session", "cold", "hello"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        while mock.request_count() == before {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        samples.push(t.elapsed().as_secs_f64() * 1e3);
        child.wait().await.unwrap();
    }
    median(samples)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mock = MockModelServer::start().await;
        mock.forget_request_bodies();
        let contexts: Vec<usize> = std::env::var("MPA_BENCH_CONTEXTS")
            .unwrap_or_else(|_| "200,2000,20000".into())
            .split(',')
            .map(|s| s.trim().parse().unwrap())
            .collect();
        for context in contexts {
            let (per_iter, overhead, per_turn) = overhead_per_iteration(&mock, context).await;
            println!(
                "turn iteration with {context}-message context: {per_iter:.3} ms per iteration, host overhead {overhead:.3} ms per iteration + {per_turn:.1} ms once per turn (medians of 5 turns of {k} and of {h} iterations)",
                k = iterations_for(context),
                h = iterations_for(context) / 2
            );
        }
        let cold = cold_start(&mock).await;
        println!("mpagent chat cold start to first request: {cold:.1} ms (median of 20)");
    });
}
