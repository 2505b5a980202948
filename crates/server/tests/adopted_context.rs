//! Regression (issue 24, item 5): `/v1/chat/completions` with `X-Session-Id` and 20,000 earlier
//! messages answered 502 `context_uncompressible`, and so did every later turn of that session:
//! the adopted messages were never captured as evidence, and compaction may only cut up to the
//! evidence watermark. Adopted messages are now evidence (in the session, whose source is the
//! client's channel, `openai`) before the first model call, so a first request larger than the
//! window is compacted, not rejected. (Here
//! 2,000 earlier messages against a 16 K window: the same first request, about twice the window.)

use crate::common;

use common::*;
use mpa_test_support::MockReply;
use serde_json::{Value, json};

fn is_summariser(req: &Value) -> bool {
    req["messages"][0]["content"] == mpa_core::SUMMARY_PROMPT
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_clients_long_conversation_is_compacted_not_rejected() {
    let env = Env::start_agent(|cfg| {
        // Not in the model catalogue: the 16 K fallback window applies.
        cfg.model.model = "house-model-x".into();
        cfg.max_context_tokens_k = 16;
    })
    .await;
    let token = env.user("alice", "password", false).await;
    env.mock.set_responder(|req| {
        if is_summariser(req) {
            return MockReply::text("The client and the user talked about 2,000 films.");
        }
        MockReply::text("here is my answer")
    });
    let mut messages: Vec<Value> = (0..2_000)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("message {i}: tell me about film number {i}")})
        })
        .collect();
    messages.push(json!({"role": "user", "content": "and the last one?"}));
    for round in 0..2 {
        let r = env
            .http
            .post(env.url("/v1/chat/completions"))
            .bearer_auth(&token)
            .header("x-session-id", "long-client")
            .json(&json!({"model": "m", "messages": messages}))
            .send()
            .await
            .unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        assert_eq!(status, 200, "round {round}: {body}");
        assert_eq!(
            body["choices"][0]["message"]["content"],
            "here is my answer"
        );
    }
    // The adopted messages are evidence, marked as the client's.
    let evidence = env.evidence_settled(2_000).await;
    assert!(
        evidence
            .iter()
            .any(|e| e.3 == "message 7: tell me about film number 7"),
        "adopted messages were captured"
    );
    // The web page's view of the session works too.
    env.mock.push(MockReply::text("still fine"));
    let frames = Frames::new(
        env.stream(
            &token,
            json!({"text": "and now?", "session_id": "long-client"}),
        )
        .await,
    )
    .all()
    .await;
    assert_eq!(text_of(&frames), "still fine", "{frames:?}");
    env.shutdown().await;
}
