//! Loopback round trips to the fake MoviePilot (run with `cargo bench -p mpa-eval --bench
//! fake_roundtrip`): p50/p99 of `subscription.list` (120 rows, one page of 20) and of
//! `download.add`, over one keep-alive reqwest client, so the gateway's benchmark can subtract
//! the fake's own time. Env: `MPA_BENCH_CALLS` (2000).
#![expect(clippy::unwrap_used, reason = "a benchmark fails loudly")]

use mpa_eval::{FakeConfig, FakeMoviePilot, WorldState};
use serde_json::json;
use std::time::{Duration, Instant};

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name:<34} n={:<5} p50 {:.3} ms  p99 {:.3} ms",
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.99)
    );
}

#[tokio::main]
async fn main() {
    let calls: usize = std::env::var("MPA_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let subscriptions: Vec<_> = (1..=120)
        .map(|i| json!({"id": i, "name": format!("订阅 {i}"), "media_source": "themoviedb", "media_id": format!("{}", 8000 + i)}))
        .collect();
    let state = WorldState::from_value(json!({
        "users": [{"id": 1, "name": "admin", "password": "x", "super_user": true}],
        "subscriptions": subscriptions,
    }))
    .unwrap();
    let h = FakeMoviePilot::start(FakeConfig::new("bench-secret"), state)
        .await
        .unwrap();
    let token = h.token_for("admin").unwrap();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();

    for (name, path) in [
        ("subscription.list (all 120 rows)", "/api/v1/subscribe/"),
        (
            "subscription.list (page of 20)",
            "/api/v1/subscribe/?page=6&count=20",
        ),
    ] {
        let url = format!("{}{path}", h.url());
        let mut samples = Vec::with_capacity(calls);
        for _ in 0..calls {
            let t = Instant::now();
            let r = client.get(&url).bearer_auth(&token).send().await.unwrap();
            r.bytes().await.unwrap();
            samples.push(t.elapsed());
        }
        report(name, samples);
    }

    let url = format!("{}/api/v1/download/add", h.url());
    let mut samples = Vec::with_capacity(calls);
    for i in 0..calls {
        let body = json!({
            "torrent_in": {"title": "t", "enclosure": format!("magnet:?xt=urn:btih:{i:040x}")},
            "media_source": "themoviedb", "media_id": "1"
        });
        let t = Instant::now();
        let r = client
            .post(&url)
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .unwrap();
        r.bytes().await.unwrap();
        samples.push(t.elapsed());
    }
    report("download.add (new infohash)", samples);
    assert_eq!(h.ledger().len(), calls * 3);
    h.shutdown().await;
}
