//! Time to first token on a warm local llama.cpp server across the turns of one session: a
//! byte-stable prompt prefix (the server reuses its evaluated prefix) against one that changes on
//! every request (a clock in the system prompt: the whole prompt is evaluated again).
//!
//! Needs the real server (`.ci/run` installs it; `MPA_LLAMA_SERVER_PYTHON`, `MPA_LLAMA_MODEL`);
//! without it, says so and exits. Run:
//! `cargo bench -p mpa-model --bench local_server_prefix`
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_model::{ChatRequest, ModelClient, ModelConfig, StreamEvent};
use mpa_protocol::Message;
use mpa_test_support::{LlamaCppOptions, LlamaCppServer};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const TURNS: usize = 5;

/// A long system prompt (~1,500 tokens), the same bytes every time.
fn system_text() -> String {
    let rules = [
        "Answer in the user's language, briefly.",
        "Search MoviePilot before claiming a title is missing.",
        "Never start a download without the user's confirmation.",
        "Report tool failures honestly; an unknown outcome is not a success.",
        "Prefer the user's saved quality preferences when choosing a release.",
    ];
    let mut s = String::from("You are the MoviePilot agent.\n");
    for i in 0..60 {
        s.push_str(&format!("Rule {i}: {}\n", rules[i % rules.len()]));
    }
    s
}

async fn first_token(client: &ModelClient, messages: &[Message]) -> Duration {
    let started = Instant::now();
    let mut first: Option<Duration> = None;
    let req = ChatRequest::new(messages, &[]);
    client
        .stream_chat(&req, &CancellationToken::new(), &mut |e| {
            if matches!(e, StreamEvent::Content(_)) && first.is_none() {
                first = Some(started.elapsed());
            }
        })
        .await
        .unwrap();
    first.unwrap_or_else(|| started.elapsed())
}

async fn session(client: &ModelClient, changing_prefix: bool) -> Vec<Duration> {
    let system = system_text();
    let mut times = Vec::new();
    for turn in 0..TURNS {
        let head = if changing_prefix {
            // What a per-minute clock at the top of the prompt does to the prefix.
            format!("Current time: 2026-12-01 20:{:02}\n", 10 + turn)
        } else {
            String::new()
        };
        let messages = vec![
            Message::system(format!("{head}{system}")),
            Message::user(format!("Turn {turn}: recommend one film.")),
        ];
        times.push(first_token(client, &messages).await);
    }
    times
}

fn main() {
    let opts = LlamaCppOptions {
        n_ctx: 4096,
        ..LlamaCppOptions::default()
    };
    let Some(server) = LlamaCppServer::start(&opts) else {
        return;
    };
    let client = ModelClient::new(ModelConfig {
        base_url: server.base_url.clone(),
        model: server.model_id.clone(),
        temperature: Some(0.0),
        max_output_tokens: Some(8),
        idle_timeout: Duration::from_secs(600),
        ..ModelConfig::default()
    })
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // Warm the server (model pages, first allocation) on an unrelated prompt.
        first_token(&client, &[Message::user("Hello.")]).await;
        let stable = session(&client, false).await;
        let changing = session(&client, true).await;
        let ms = |d: &Duration| format!("{:.2}", d.as_secs_f64());
        println!("time to first token (s), turns 1-{TURNS}");
        println!(
            "byte-stable prefix:   {}",
            stable.iter().map(ms).collect::<Vec<_>>().join("  ")
        );
        println!(
            "prefix changes/turn:  {}",
            changing.iter().map(ms).collect::<Vec<_>>().join("  ")
        );
    });
}
