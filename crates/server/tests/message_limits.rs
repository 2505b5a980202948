//! Regressions of issue 24, item 4: a huge message was stored before it was judged — a 31 MB
//! `text` under the 32 MiB body limit failed its turn with `context_uncompressible` but was
//! persisted first (~64 MB more in `agent.db` per request), and that session failed every later
//! turn. Now a message is judged at submission (size, then whether it could fit the model's
//! window even alone) and refused with a clear 413 before anything is stored; a chat that holds
//! such a message from before recovers.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common;

use common::*;
use mpa_test_support::MockReply;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Everything the host stored: chat rows, journals and evidence.
fn stored(env: &Env) -> (i64, i64, usize) {
    (
        rows(env, "chats"),
        rows(env, "chat_journals"),
        env.evidence().len(),
    )
}

async fn refused(r: reqwest::Response, code: &str) -> Value {
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], code, "{v}");
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn huge_messages_are_refused_before_anything_is_stored() {
    let env = Env::start_full().await;
    let token = env.user("alice", "password", false).await;
    env.mock.push(MockReply::text("first answer"));
    Frames::new(
        env.stream(&token, json!({"text": "hello", "session_id": "s1"}))
            .await,
    )
    .all()
    .await;
    env.wait_idle(&token, "s1").await;
    env.evidence_settled(2).await;
    let before = stored(&env);
    let chat_before = env.chat_rows();
    let requests = env.mock.request_count();

    // 4 MB of text (the body limit is 32 MiB): over the 256 KB message limit, on the stream API
    // (an existing session and a new one) and on the OpenAI endpoint, as its newest message and
    // as an earlier one a stateless client sends along.
    let huge = "moviepilot ".repeat(400_000);
    for session in ["s1", "new-one"] {
        let v = refused(
            env.stream(&token, json!({"text": huge, "session_id": session}))
                .await,
            "message_too_large",
        )
        .await;
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("4400000 bytes") && msg.contains("262144"),
            "{msg}"
        );
        assert!(msg.contains("消息文本过长"), "{msg}");
        assert!(
            !msg.contains("moviepilot moviepilot"),
            "never echoed: {msg}"
        );
    }
    for messages in [
        json!([{"role": "user", "content": huge}]),
        json!([{"role": "user", "content": huge}, {"role": "assistant", "content": "ok"},
               {"role": "user", "content": "and now?"}]),
    ] {
        let r = env
            .http
            .post(env.url("/v1/chat/completions"))
            .bearer_auth(&token)
            .header("x-session-id", "oa")
            .json(&json!({"model": "m", "messages": messages}))
            .send()
            .await
            .unwrap();
        refused(r, "message_too_large").await;
    }
    assert_eq!(env.mock.request_count(), requests, "no model call");
    assert_eq!(stored(&env), before, "nothing stored");
    assert_eq!(env.chat_rows(), chat_before);
    let (s, _) = env.get(&token, "/api/v1/agent/sessions/new-one").await;
    assert_eq!(s, StatusCode::NOT_FOUND, "no session was created");

    // The session goes on as if nothing had been sent.
    env.mock.push(MockReply::text("second answer"));
    let frames = Frames::new(
        env.stream(&token, json!({"text": "still there?", "session_id": "s1"}))
            .await,
    )
    .all()
    .await;
    assert_eq!(text_of(&frames), "second answer");
    let v = env.wait_idle(&token, "s1").await;
    assert_eq!(v["message_count"], 4);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_that_cannot_fit_the_window_alone_is_refused_before_it_is_stored() {
    let env = Env::start_agent(|cfg| {
        // Not in the model catalogue: the 16 K fallback window applies.
        cfg.model.model = "house-model-x".into();
        cfg.max_context_tokens_k = 16;
    })
    .await;
    let token = env.user("alice", "password", false).await;
    let requests = env.mock.request_count();
    // 120 KB: under the size limit, but about 45,000 budgeted tokens — three windows.
    let long = "字幕组 1080p ".repeat(10_000);
    assert!(long.len() < 256 * 1024);
    let v = refused(
        env.stream(&token, json!({"text": long, "session_id": "w"}))
            .await,
        "message_exceeds_context_window",
    )
    .await;
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("(16000 tokens)"), "{msg}");
    assert!(msg.contains("上下文窗口"), "{msg}");
    assert_eq!(env.mock.request_count(), requests, "no model call");
    assert_eq!(stored(&env), (0, 0, 0), "nothing stored");
    // A message that fits goes through.
    env.mock.push(MockReply::text("fine"));
    let frames = Frames::new(
        env.stream(&token, json!({"text": "字幕组 1080p", "session_id": "w"}))
            .await,
    )
    .all()
    .await;
    assert_eq!(text_of(&frames), "fine");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_broken_by_an_oversize_message_recovers() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    let alice = env.accounts.find("alice").await.unwrap().unwrap().id;
    // What an older version stored: a 2 MB first message that failed its turn (and would fail
    // every later one: the first user message is kept verbatim by every compaction).
    let huge = "订阅 ".repeat(300_000);
    let now = chrono::Utc::now();
    env.store
        .save_chat(mpa_core::Chat {
            session_id: mpa_core::server_session_id(&alice, "broken"),
            user_id: alice.clone(),
            channel: "web".into(),
            title: "订阅 订阅".into(),
            agent_messages: vec![
                mpa_protocol::Message::user(huge.clone()),
                mpa_protocol::Message::assistant(
                    "[The previous turn ended with an error: history contains over-long content]",
                    vec![],
                ),
            ],
            display_messages: json!([]),
            message_count: 2,
            session_state: json!({}),
            turn_status: None,
            created_at: now,
            updated_at: now,
        })
        .await
        .unwrap();

    env.mock.push(MockReply::text("back in business"));
    let n = env.mock.request_count();
    let frames = Frames::new(
        env.stream(&token, json!({"text": "try again", "session_id": "broken"}))
            .await,
    )
    .all()
    .await;
    assert_eq!(text_of(&frames), "back in business", "{frames:?}");
    assert_eq!(frames.last().unwrap()["status"], "completed");
    let sent = env.mock.requests()[n].to_string();
    assert!(
        !sent.contains("订阅 订阅 订阅"),
        "the huge text is left out"
    );
    assert!(
        sent.contains("too large for the model's context"),
        "with a notice"
    );
    assert!(sent.contains("try again"));

    let detail = env.wait_idle(&token, "broken").await;
    let stored = env.chat_rows();
    assert!(stored[0].2.len() < 10_000, "the snapshot dropped the text");
    assert!(stored[0].2.contains("moviepilot_oversize"), "and marks it");
    let first = &detail["display_messages"][0];
    assert_eq!(first["role"], "user");
    assert!(
        first["content"]
            .as_str()
            .unwrap()
            .contains("2.0 MB of text"),
        "{first}"
    );
    env.shutdown().await;
}

/// Issue 24, item 3 (the part before a turn starts): a host whose data directory's disk is below
/// `MPA_MIN_FREE_MB` says so in `/healthz` and refuses new turns with 507 `storage_full` before
/// anything is stored, instead of acknowledging turns it may lose.
#[tokio::test(flavor = "multi_thread")]
async fn a_disk_below_the_free_space_floor_refuses_new_turns_and_says_so() {
    // A floor above any real disk's free space.
    let env = Env::start_agent(|cfg| cfg.min_free_bytes = u64::MAX / 2).await;
    let token = env.user("alice", "password", false).await;
    let health: Value = env
        .http
        .get(env.url("/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["disk"]["low"], true);
    assert!(health["disk"]["available_bytes"].as_u64().unwrap() < u64::MAX / 2);
    assert_eq!(health["disk"]["floor_bytes"], u64::MAX / 2);

    let requests = env.mock.request_count();
    let r = env
        .stream(&token, json!({"text": "hello", "session_id": "s"}))
        .await;
    assert_eq!(r.status(), StatusCode::INSUFFICIENT_STORAGE);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "storage_full", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("disk is almost full") && msg.contains("磁盘空间不足"),
        "{msg}"
    );
    let r = env
        .http
        .post(env.url("/v1/chat/completions"))
        .bearer_auth(&token)
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::INSUFFICIENT_STORAGE);
    assert_eq!(env.mock.request_count(), requests, "no model call");
    assert_eq!(stored(&env), (0, 0, 0), "nothing stored");
    env.shutdown().await;
}
