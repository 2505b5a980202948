//! Logins while a long chat is checkpointed (issue 23): 100 concurrent logins, each the main
//! store's share of a login and of the first request it authenticates — the user by name, the
//! new token, the token lookup — once on an idle store and once while a 20,000-message chat's
//! snapshot is saved again and again. Latency of the whole login and of its token lookup alone,
//! p50 / p95 / max over `MPA_BENCH_ROUNDS` (20) rounds.
//!
//! Run: `cargo bench -p mpa-store --bench pool`. Env: `MPA_BENCH_ROUNDS`, `MPA_BENCH_MESSAGES`
//! (20,000).
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark's panic is its failure report"
)]

use chrono::Utc;
use mpa_protocol::{Message, Outcome, ToolCall, UserId};
use mpa_store::{Chat, Store};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const LOGINS: usize = 100;

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A long conversation of the usual mix: questions, tool calls with their results, answers.
fn long_chat(owner: &UserId, messages: usize) -> Chat {
    let mut agent = Vec::with_capacity(messages);
    let mut display = Vec::with_capacity(messages);
    while agent.len() < messages {
        let n = agent.len();
        let call = ToolCall {
            id: format!("call_{n}"),
            name: "moviepilot_api".into(),
            arguments: r#"{"operation_id":"subscription.list","query":{"page":1,"count":20}}"#
                .into(),
        };
        let result = format!(
            r#"{{"success":true,"data":[{{"id":{n},"name":"三体 第{n}集","year":2023,"state":"R","overview":"{}"}}]}}"#,
            "A long overview of the series, as MoviePilot returns it. ".repeat(4)
        );
        for m in [
            Message::user(format!("第 {n} 个问题：我的订阅里有哪些剧集还在更新？")),
            Message::assistant("", vec![call]),
            Message::tool(
                format!("call_{n}"),
                "moviepilot_api",
                result,
                Outcome::Succeeded,
            ),
            Message::assistant(
                format!("第 {n} 个回答：三体仍在更新，下一集预计周五上线。"),
                Vec::new(),
            ),
        ] {
            display.push(serde_json::json!({"role": m.role.as_str(), "content": m.text()}));
            agent.push(m);
        }
    }
    agent.truncate(messages);
    display.truncate(messages);
    Chat {
        session_id: "bench-long-chat".into(),
        user_id: owner.clone(),
        channel: "web".into(),
        title: "a long chat".into(),
        message_count: agent.len() as i64,
        agent_messages: agent,
        display_messages: serde_json::Value::Array(display),
        session_state: serde_json::json!({}),
        turn_status: None,
        created_at: Utc::now(),
        updated_at: Utc::now(),
    }
}

/// One login's database work; returns (whole login, token lookup alone).
async fn login(store: &Store, name: &str, token: String) -> (Duration, Duration) {
    let t0 = Instant::now();
    let user = store
        .user_by_name(name)
        .await
        .unwrap()
        .expect("user exists");
    store
        .insert_token(
            token.clone(),
            &user.id,
            Utc::now() + chrono::Duration::hours(1),
        )
        .await
        .unwrap();
    let t1 = Instant::now();
    let owner = store.token_user(token).await.unwrap().expect("token works");
    assert_eq!(owner.id, user.id);
    (t0.elapsed(), t1.elapsed())
}

fn percentiles(label: &str, mut d: Vec<Duration>) {
    d.sort_unstable();
    let at = |q: f64| d[((d.len() as f64 * q).ceil() as usize).clamp(1, d.len()) - 1];
    println!(
        "  {label:<13} p50 {:>8.2?}  p95 {:>8.2?}  max {:>8.2?}  ({} samples)",
        at(0.50),
        at(0.95),
        d[d.len() - 1],
        d.len()
    );
}

async fn rounds(store: &Store, rounds: usize, label: &str, next: &AtomicUsize) {
    let mut logins = Vec::new();
    let mut lookups = Vec::new();
    for _ in 0..rounds {
        let tasks: Vec<_> = (0..LOGINS)
            .map(|i| {
                let store = store.clone();
                let token = format!("bench-token-{}", next.fetch_add(1, Ordering::Relaxed));
                tokio::spawn(async move { login(&store, &format!("user{i}"), token).await })
            })
            .collect();
        for t in tasks {
            let (whole, lookup) = t.await.unwrap();
            logins.push(whole);
            lookups.push(lookup);
        }
    }
    println!("{label}");
    percentiles("login", logins);
    percentiles("token lookup", lookups);
}

#[tokio::main]
async fn main() {
    let rounds_n = env_num("MPA_BENCH_ROUNDS", 20);
    let messages = env_num("MPA_BENCH_MESSAGES", 20_000);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    for i in 0..LOGINS {
        store
            .create_user(&format!("user{i}"), false, Some("$argon2id$stub".into()))
            .await
            .unwrap();
    }
    let owner = store.ensure_local_user("owner").await.unwrap();
    let chat = long_chat(&owner.id, messages);
    let bytes = serde_json::to_string(&chat.agent_messages).unwrap().len();
    let t = Instant::now();
    store.save_chat(chat.clone()).await.unwrap();
    println!(
        "{LOGINS} concurrent logins × {rounds_n} rounds; chat of {messages} messages ({:.1} MB of transcript JSON), first save {:.2?}",
        bytes as f64 / 1e6,
        t.elapsed()
    );
    let next = AtomicUsize::new(0);
    rounds(&store, rounds_n, "idle store:", &next).await;

    // Checkpoints back to back for the whole measurement, as a busy long session would write.
    let stop = Arc::new(AtomicBool::new(false));
    let saver = {
        let (store, stop) = (store.clone(), stop.clone());
        tokio::spawn(async move {
            let mut took = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let mut c = chat.clone();
                c.updated_at = Utc::now();
                let t = Instant::now();
                store.save_chat(c).await.unwrap();
                took.push(t.elapsed());
            }
            took
        })
    };
    rounds(
        &store,
        rounds_n,
        "while the long chat is checkpointed:",
        &next,
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let took = saver.await.unwrap();
    percentiles("checkpoint", took);
}
