//! Steering latency (issue 28; run with `cargo bench -p mpa-server --bench steering`): an
//! in-process host on 127.0.0.1 with the mock model; each round starts a turn that waits on a
//! gate tool, then
//!
//! - **submit → queued**: a second `POST /api/v1/agent/stream` from sending the request to
//!   reading its `steering` `queued` frame (session lookup, the inbox, the SSE answer);
//! - **applied → next model request**: the gate opens; from the turn's `applied` event reaching
//!   the event consumer to the mock model receiving the request that carries the message (what
//!   the host does in between — the outbound contributors, counting, assembling and sending the
//!   request — plus the loopback hop).
//!
//! Env: `MPA_BENCH_ROUNDS` (200).
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark's panic is its failure report"
)]

#[path = "../tests/common/gate.rs"]
mod gate;

use futures_util::StreamExt;
use mpa_core::{Agent, AgentConfig, Steered};
use mpa_protocol::{Actor, Event, SteeringStatus, UserId};
use mpa_server::{Host, ServerConfig};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

const TOKEN: &str = "bench-admin-token-0123456789abcdef";

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{what}: n={} p50={:.3} ms p90={:.3} ms p99={:.3} ms max={:.3} ms",
        samples.len(),
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.9)),
        ms(percentile(&samples, 0.99)),
        ms(*samples.last().unwrap()),
    );
}

/// Reads one SSE frame (`None` at the end of the body).
async fn next_frame(
    body: &mut (impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    buf: &mut String,
) -> Option<Value> {
    loop {
        if let Some(i) = buf.find("\n\n") {
            let raw: String = buf.drain(..i + 2).collect();
            let data = raw.trim().strip_prefix("data: ")?.to_string();
            return serde_json::from_str(&data).ok();
        }
        let chunk = body.next().await?.ok()?;
        buf.push_str(&String::from_utf8_lossy(&chunk));
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let rounds: usize = std::env::var("MPA_BENCH_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(200);
        let mock = MockModelServer::start().await;
        // When the request carrying the steering message arrived, per round.
        let arrivals: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let seen = Arc::clone(&arrivals);
        mock.set_responder(move |req| {
            let text = req.to_string();
            if text.contains("steering_message_id") {
                seen.lock().unwrap().push(Instant::now());
                MockReply::text("ok")
            } else {
                MockReply::tool_calls(&[("call_gate", gate::GATE_TOOL, json!({}))])
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let store = mpa_store::Store::open_in(dir.path()).unwrap();
        let model = mpa_model::ModelConfig {
            base_url: mock.base_url.clone(),
            api_key: Some("sk-bench".into()),
            model: "gpt-4o".into(),
            max_retries: 0,
            ..Default::default()
        };
        let gate = Arc::new(Semaphore::new(0));
        let agent = Agent::builder(AgentConfig::new(model), store)
            .tool(mpa_core::tools::json_tool(gate::Gate(Arc::clone(&gate))))
            .build()
            .unwrap();
        let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.admin_token = Some(TOKEN.into());
        let host = Host::bind(agent.clone(), cfg).await.unwrap();
        let base = format!("http://{}", host.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(host.run(async move {
            let _ = stopped.await;
        }));
        let http = reqwest::Client::new();
        let actor = Actor {
            user_id: UserId("bench".into()),
            user_name: "bench".into(),
            is_admin: false,
        };

        // Submit → queued, over HTTP (the admin token's own sessions).
        let mut queued = Vec::with_capacity(rounds);
        for i in 0..rounds {
            let session = format!("q{i}");
            let first = http
                .post(format!("{base}/api/v1/agent/stream"))
                .bearer_auth(TOKEN)
                .json(&json!({"text": "wait", "session_id": session}))
                .send()
                .await
                .unwrap();
            let mut body = first.bytes_stream();
            let mut buf = String::new();
            while let Some(f) = next_frame(&mut body, &mut buf).await {
                if f["type"] == "tool" {
                    break;
                }
            }
            let t0 = Instant::now();
            let r = http
                .post(format!("{base}/api/v1/agent/stream"))
                .bearer_auth(TOKEN)
                .json(&json!({"text": "only 4K", "session_id": session}))
                .send()
                .await
                .unwrap();
            let mut ack = r.bytes_stream();
            let mut ack_buf = String::new();
            loop {
                let f = next_frame(&mut ack, &mut ack_buf)
                    .await
                    .expect("queued frame");
                if f["type"] == "steering" {
                    assert_eq!(f["status"], "queued");
                    break;
                }
            }
            queued.push(t0.elapsed());
            gate.add_permits(1);
            while let Some(f) = next_frame(&mut body, &mut buf).await {
                if f["type"] == "done" {
                    break;
                }
            }
        }
        report("submit -> queued frame (HTTP)", queued);

        // Applied → next model request, in process.
        arrivals.lock().unwrap().clear();
        let mut applied_at = Vec::with_capacity(rounds);
        for i in 0..rounds {
            let session = format!("a{i}");
            let handle = agent.session(&actor, &session, "bench").await.unwrap();
            let mut events = handle.submit(actor.clone(), "wait".into(), vec![]).unwrap();
            while let Some(ev) = events.recv().await {
                if matches!(ev, Event::ToolStarted { .. }) {
                    break;
                }
            }
            let Steered::Queued { .. } =
                handle.steer(&actor, "only 4K".into(), Vec::new()).unwrap()
            else {
                panic!("the running turn did not take the message");
            };
            gate.add_permits(1);
            while let Some(ev) = events.recv().await {
                match ev {
                    Event::Steering {
                        status: SteeringStatus::Applied,
                        ..
                    } => applied_at.push(Instant::now()),
                    Event::TurnEnded { .. } => break,
                    _ => {}
                }
            }
        }
        let arrived = arrivals.lock().unwrap().clone();
        assert_eq!(arrived.len(), applied_at.len());
        let gaps: Vec<Duration> = applied_at
            .iter()
            .zip(&arrived)
            .map(|(a, r)| r.saturating_duration_since(*a))
            .collect();
        report("applied event -> next model request at the mock", gaps);
        let _ = stop.send(());
        let _ = server.await;
    });
}
