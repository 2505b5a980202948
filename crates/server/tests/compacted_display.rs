//! The session detail after a compaction (issue 17): the model's context holds a summary in
//! place of the older messages, but the page's display list keeps every line the user saw, in
//! order, with one marker where the context was summarised — also after the session was
//! reclaimed and reloaded from its snapshot.

#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common;

use common::*;
use mpa_test_support::{MockReply, last_user_text};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const SUMMARY: &str = "The user asked questions 0 to 3; each got a long answer.";

/// A summariser request (the host's compaction) is the one whose first message is the
/// summariser's instructions.
fn is_summariser(req: &Value) -> bool {
    req["messages"][0]["content"] == mpa_core::SUMMARY_PROMPT
}

/// "question N" gets "answer N" and about 2,500 tokens of padding: four turns fill most of a
/// 16 K window.
fn answer_to(question: &str) -> String {
    let n = question.trim_start_matches("question ");
    format!("answer {n}: {}", "长".repeat(2500))
}

/// Runs one turn to its end and returns its stream's frames.
async fn turn(env: &Env, token: &str, text: &str) -> Vec<Value> {
    let frames = Frames::new(
        env.stream(token, json!({"text": text, "session_id": "long-chat"}))
            .await,
    )
    .all()
    .await;
    assert_eq!(
        frames.last().unwrap()["status"],
        "completed",
        "{text}: {frames:?}"
    );
    env.wait_idle(token, "long-chat").await;
    frames
}

fn lines(detail: &Value) -> Vec<Value> {
    detail["display_messages"].as_array().unwrap().clone()
}

/// The user and assistant lines, each as "user: question N" / "assistant: answer N".
fn conversation(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["role"] == "user" || l["role"] == "assistant")
        .map(|l| {
            let text = l["content"].as_str().unwrap();
            let head = text.split(':').next().unwrap();
            format!("{}: {head}", l["role"].as_str().unwrap())
        })
        .collect()
}

fn expected(turns: usize) -> Vec<String> {
    (0..turns)
        .flat_map(|n| {
            [
                format!("user: question {n}"),
                format!("assistant: answer {n}"),
            ]
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compacted_session_still_lists_every_earlier_line_in_order_with_a_marker() {
    let env = Env::start_agent(|cfg| {
        // Not in the model catalogue: the 16 K fallback window applies.
        cfg.model.model = "house-model-x".into();
        cfg.max_context_tokens_k = 16;
        cfg.memory_review_interval = 0;
        cfg.skill_review_interval = 0;
        cfg.session_idle = Duration::from_millis(300);
    })
    .await;
    let summaries = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&summaries);
    env.mock.set_responder(move |req| {
        if is_summariser(req) {
            seen.fetch_add(1, Ordering::SeqCst);
            return MockReply::text(SUMMARY);
        }
        MockReply::text(&answer_to(&last_user_text(req)))
    });
    let token = env.user("alice", "password", false).await;
    let mut context_frames = Vec::new();
    for n in 0..6 {
        let frames = turn(&env, &token, &format!("question {n}")).await;
        // The stream says so when the context was summarised: after the answer that was sent
        // with the compacted request (the compaction is committed only once that call succeeded).
        for (i, f) in frames
            .iter()
            .enumerate()
            .filter(|(_, f)| f["type"] == "context")
        {
            assert_eq!(f["event"], "compacted");
            assert_eq!(f["summary"], SUMMARY);
            assert!(
                frames[..i].iter().any(|f| f["type"] == "delta"),
                "{frames:?}"
            );
            context_frames.push(n);
        }
    }
    assert!(
        summaries.load(Ordering::SeqCst) >= 1,
        "the conversation outgrew the window"
    );
    // One frame per compaction, each with the summary the model got.
    assert_eq!(context_frames.len(), summaries.load(Ordering::SeqCst));
    // The model's context no longer holds the first answer; its summary stands in for it.
    let last_request = env
        .mock
        .requests()
        .into_iter()
        .rfind(|r| !is_summariser(r))
        .unwrap()
        .to_string();
    assert!(
        !last_request.contains("answer 0:"),
        "question 0 was compacted"
    );
    assert!(last_request.contains(SUMMARY));

    let (_, detail) = env.get(&token, "/api/v1/agent/sessions/long-chat").await;
    let shown = lines(&detail);
    assert_eq!(conversation(&shown), expected(6), "{shown:#?}");
    // The summary is a marker, not a user line, and the lines before it are the compacted ones.
    let markers: Vec<usize> = shown
        .iter()
        .enumerate()
        .filter(|(_, l)| l["role"] == "context")
        .map(|(i, _)| i)
        .collect();
    assert!(!markers.is_empty(), "{shown:#?}");
    assert_eq!(
        markers.len(),
        context_frames.len(),
        "a marker per streamed compaction"
    );
    let first = markers[0];
    assert_eq!(shown[first]["summary"], SUMMARY);
    assert!(shown[..first].iter().all(|l| l["compacted"] == true));
    assert!(
        shown[first + 1..]
            .iter()
            .all(|l| l.get("compacted").is_none())
    );
    assert!(
        !shown
            .iter()
            .any(|l| l["content"].as_str().is_some_and(|c| c.contains(SUMMARY))),
        "the summary is not shown as a message"
    );

    // Reclaimed after idling and reloaded from the snapshot: the earlier lines are still there
    // after the next turn writes the chat again.
    env.wait_reclaimed().await;
    let _ = turn(&env, &token, "question 6").await;
    let (_, detail) = env.get(&token, "/api/v1/agent/sessions/long-chat").await;
    let shown = lines(&detail);
    assert_eq!(conversation(&shown), expected(7), "{shown:#?}");
    assert!(shown.iter().any(|l| l["role"] == "context"));
    env.shutdown().await;
}
