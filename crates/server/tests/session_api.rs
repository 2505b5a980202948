//! The session endpoints of issue 29 item 4/6: rename, the page's display snapshot, the §14.4
//! status fields, search over the caller's own sessions, regenerate and edit-and-resend, and
//! per-turn timestamps and token usage in the detail.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::{Env, Frames};
use mpa_test_support::MockReply;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn turn(env: &Env, token: &str, body: Value, answer: &str) -> Vec<Value> {
    env.mock.push(MockReply::text(answer).usage(30, 4));
    Frames::new(env.stream(token, body).await).all().await
}

fn lines(detail: &Value) -> Vec<(String, String)> {
    detail["display_messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["role"].as_str().unwrap_or_default().to_string(),
                l["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn rename_display_status_timestamps_and_usage() {
    let env = Env::start().await;
    let alice = env.user("alice", "password", false).await;
    let bob = env.user("bob", "password", false).await;
    turn(
        &env,
        &alice,
        json!({"text": "find Dune", "session_id": "r1"}),
        "Found it.",
    )
    .await;
    let detail = env.wait_idle(&alice, "r1").await;
    let shown = detail["display_messages"].as_array().unwrap();
    assert!(
        shown[0]["created_at"]
            .as_str()
            .is_some_and(|t| t.contains('T')),
        "{detail}"
    );
    let answer = shown.last().unwrap();
    assert!(answer["created_at"].is_string(), "{answer}");
    assert_eq!(answer["usage"]["input_tokens"], 30, "{answer}");
    assert_eq!(answer["usage"]["output_tokens"], 4, "{answer}");
    let status = &detail["status"];
    assert_eq!(status["queue_capacity"], 8, "{detail}");
    for field in [
        "pending_messages",
        "queue_saturated",
        "queue_rejections",
        "last_queue_wait_ms",
        "shutdown_pending",
        "is_processing",
        "steering_pending",
        "steering_active",
    ] {
        assert!(!status[field].is_null(), "{field} missing: {status}");
    }

    let (s, row) = env
        .send_json(
            Method::PATCH,
            &alice,
            "/api/v1/agent/sessions/r1",
            json!({"title": "  My Dune hunt  "}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{row}");
    assert_eq!(row["title"], "My Dune hunt");
    // Later turns keep the user's title.
    turn(
        &env,
        &alice,
        json!({"text": "and the sequel?", "session_id": "r1"}),
        "Also found.",
    )
    .await;
    let detail = env.wait_idle(&alice, "r1").await;
    assert_eq!(detail["title"], "My Dune hunt");
    let (s, v) = env
        .send_json(
            Method::PATCH,
            &alice,
            "/api/v1/agent/sessions/r1",
            json!({"title": " "}),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_input"))
    );
    let (s, _) = env
        .send_json(
            Method::PATCH,
            &bob,
            "/api/v1/agent/sessions/r1",
            json!({"title": "mine"}),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    let snapshot = json!([{"role": "user", "content": "find Dune", "collapsed": true}]);
    let (s, v) = env
        .send_json(
            Method::PUT,
            &alice,
            "/api/v1/agent/sessions/r1/display",
            json!({"display_messages": snapshot}),
        )
        .await;
    assert_eq!(
        (s, v["saved"].as_bool()),
        (StatusCode::OK, Some(true)),
        "{v}"
    );
    let (_, detail) = env.get(&alice, "/api/v1/agent/sessions/r1").await;
    assert_eq!(detail["display_snapshot"], snapshot);
    let (s, _) = env
        .send_json(
            Method::PUT,
            &bob,
            "/api/v1/agent/sessions/r1/display",
            json!({"display_messages": []}),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn search_finds_titles_and_content_of_the_callers_own_sessions_only() {
    let env = Env::start_full().await;
    let alice = env.user("alice", "password", false).await;
    let bob = env.user("bob", "password", false).await;
    turn(
        &env,
        &alice,
        json!({"text": "subscribe to Dune", "session_id": "a-title"}),
        "Subscribed.",
    )
    .await;
    turn(
        &env,
        &alice,
        json!({"text": "what is downloading", "session_id": "a-content"}),
        "The Zanzibar documentary is at 40%.",
    )
    .await;
    turn(
        &env,
        &bob,
        json!({"text": "Zanzibar and Dune for me", "session_id": "b"}),
        "ok",
    )
    .await;
    env.wait_idle(&alice, "a-content").await;
    env.wait_idle(&bob, "b").await;
    env.evidence_settled(6).await;

    let (s, v) = env.get(&alice, "/api/v1/agent/sessions?q=dune").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let ids: Vec<&str> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a-title"], "{v}");
    assert_eq!(v["sessions"][0]["match"], "title");
    let (_, v) = env.get(&alice, "/api/v1/agent/sessions?q=Zanzibar").await;
    let rows = v["sessions"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    assert_eq!(rows[0]["session_id"], "a-content");
    assert_eq!(rows[0]["match"], "content");
    // Even an administrator searches only their own sessions.
    let (_, v) = env
        .get(
            crate::common::ADMIN_TOKEN,
            "/api/v1/agent/sessions?q=Zanzibar&all=true",
        )
        .await;
    assert_eq!(v["sessions"], json!([]), "{v}");
    let (s, v) = env.get(&alice, "/api/v1/agent/sessions?q=").await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_input"))
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn regenerate_and_edit_replace_the_last_exchange() {
    let env = Env::start().await;
    let alice = env.user("alice", "password", false).await;
    turn(
        &env,
        &alice,
        json!({"text": "first question", "session_id": "g"}),
        "first answer",
    )
    .await;
    turn(
        &env,
        &alice,
        json!({"text": "second question", "session_id": "g"}),
        "weak answer",
    )
    .await;
    env.wait_idle(&alice, "g").await;
    env.mock.clear_requests();

    let frames = turn(
        &env,
        &alice,
        json!({"session_id": "g", "text": "", "regenerate": true}),
        "better answer",
    )
    .await;
    assert_eq!(frames.last().unwrap()["status"], "completed", "{frames:?}");
    let req = &env.mock.requests()[0];
    assert_eq!(mpa_test_support::last_user_text(req), "second question");
    let said: Vec<String> = req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect();
    assert!(!said.iter().any(|t| t.contains("weak answer")), "{said:?}");
    let detail = env.wait_idle(&alice, "g").await;
    assert_eq!(
        lines(&detail),
        [
            ("user".into(), "first question".into()),
            ("assistant".into(), "first answer".into()),
            ("user".into(), "second question".into()),
            ("assistant".into(), "better answer".into()),
        ]
    );

    turn(
        &env,
        &alice,
        json!({"session_id": "g", "text": "second question, in 4K", "edit_last": true}),
        "4K answer",
    )
    .await;
    let detail = env.wait_idle(&alice, "g").await;
    assert_eq!(
        lines(&detail)[2..],
        [
            ("user".to_string(), "second question, in 4K".to_string()),
            ("assistant".to_string(), "4K answer".to_string()),
        ]
    );

    // Nothing to go back to, and not another user's session.
    let bob = env.user("bob", "password", false).await;
    let r = env
        .stream(
            &bob,
            json!({"session_id": "g", "text": "", "regenerate": true}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn regenerate_while_a_turn_runs_is_refused() {
    let env = Env::start().await;
    let alice = env.user("alice", "password", false).await;
    turn(
        &env,
        &alice,
        json!({"text": "q", "session_id": "busy"}),
        "a",
    )
    .await;
    env.wait_idle(&alice, "busy").await;
    env.mock
        .push(MockReply::text("never finishes").stall_after(1));
    let mut running = Frames::new(
        env.stream(&alice, json!({"text": "long", "session_id": "busy"}))
            .await,
    );
    running.until("start").await;
    let r = env
        .stream(
            &alice,
            json!({"session_id": "busy", "text": "", "regenerate": true}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "session_busy");
    env.shutdown().await;
}

/// What `session_search` tells the model for `query`, asked in a session of its own.
async fn recalled(env: &Env, token: &str, session: &str, query: &str) -> String {
    env.mock.clear_requests();
    env.mock.push(MockReply::tool_calls(&[(
        "c1",
        "session_search",
        json!({"query": query}),
    )]));
    env.mock.push(MockReply::text("done"));
    Frames::new(
        env.stream(
            token,
            json!({"text": "what did we say?", "session_id": session}),
        )
        .await,
    )
    .all()
    .await;
    let reqs = env.mock.requests();
    let tool = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap_or_else(|| panic!("no tool result: {:?}", reqs[1]));
    tool["content"].as_str().unwrap().to_string()
}

/// Regression: after regenerate (or edit-and-resend) the answer the user threw away stayed in
/// the evidence store, so session search and recall could still return it.
#[tokio::test(flavor = "multi_thread")]
async fn regenerate_left_the_dropped_exchange_in_the_evidence_store() {
    let env = Env::start_full().await;
    let alice = env.user("alice", "password", false).await;
    turn(
        &env,
        &alice,
        json!({"text": "which documentary was it", "session_id": "rg"}),
        "It was the Quokkarama documentary.",
    )
    .await;
    env.wait_idle(&alice, "rg").await;
    env.evidence_settled(2).await;
    turn(
        &env,
        &alice,
        json!({"session_id": "rg", "text": "", "regenerate": true}),
        "It was the Wombatorium documentary.",
    )
    .await;
    env.wait_idle(&alice, "rg").await;
    env.evidence_settled(4).await;

    let (_, v) = env.get(&alice, "/api/v1/agent/sessions?q=Quokkarama").await;
    assert_eq!(v["sessions"], json!([]), "{v}");
    let (_, v) = env
        .get(&alice, "/api/v1/agent/sessions?q=Wombatorium")
        .await;
    assert_eq!(v["sessions"][0]["session_id"], "rg", "{v}");
    // A result from the chat `rg` names it (`…:rg`); the probes' own rows may quote each other.
    let from_rg = |found: &str| found.contains(":rg\"");
    let found = recalled(&env, &alice, "probe-1", "Quokkarama").await;
    assert!(!from_rg(&found), "{found}");
    let found = recalled(&env, &alice, "probe-2", "Wombatorium").await;
    assert!(
        from_rg(&found) && found.contains("Wombatorium documentary"),
        "{found}"
    );

    // Edit-and-resend drops the regenerated exchange the same way, question included.
    turn(
        &env,
        &alice,
        json!({"session_id": "rg", "text": "which podcast was it", "edit_last": true}),
        "It was the Platypodcast.",
    )
    .await;
    env.wait_idle(&alice, "rg").await;
    env.evidence_settled(6).await;
    // (The probe sessions hold the search words themselves; the chat `rg` must not match.)
    let (_, v) = env
        .get(&alice, "/api/v1/agent/sessions?q=Wombatorium")
        .await;
    assert!(
        !v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["session_id"] == "rg"),
        "{v}"
    );
    let found = recalled(&env, &alice, "probe-3", "Wombatorium").await;
    assert!(!from_rg(&found), "{found}");
    let found = recalled(&env, &alice, "probe-4", "Platypodcast").await;
    assert!(from_rg(&found) && found.contains("Platypodcast"), "{found}");
    env.shutdown().await;
}
