//! HTTP tests of the host: real sockets on 127.0.0.1, a real SQLite store, the real core against
//! the mock model server.

use crate::common;

use common::*;
use mpa_test_support::MockReply;
use reqwest::StatusCode;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn health_page_and_request_ids() {
    let env = Env::start().await;
    let r = env.http.get(env.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers().contains_key("x-request-id"));
    let health = r.json::<Value>().await.unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["disk"]["low"], false, "{health}");
    let r = env
        .http
        .get(env.url("/"))
        .header("x-request-id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "abc-123");
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(r.text().await.unwrap().contains("/assets/app.js"));
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_expired_and_revoked_tokens_get_401() {
    let env = Env::start().await;
    let token = env.user("alice", "password-alice-1", false).await;
    for bad in [None, Some("nope"), Some("")] {
        let mut req = env.http.get(env.url("/api/v1/agent/sessions"));
        if let Some(b) = bad {
            req = req.bearer_auth(b);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "unauthorized");
    }
    // An expired token, written the way the store writes tokens (hash only).
    let expired = "expired-token-value";
    let alice = env.accounts.find("alice").await.unwrap().unwrap();
    let db = rusqlite::Connection::open(env.dir.path().join("agent.db")).unwrap();
    db.execute(
        "INSERT INTO auth_tokens (token_hash, user_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?3)",
        rusqlite::params![
            mpa_core::accounts::token_hash(expired),
            alice.id.0,
            "2020-01-01T00:00:00Z"
        ],
    )
    .unwrap();
    let (s, _) = env.get(expired, "/api/v1/agent/sessions").await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // Only the hash is stored.
    let rows_with = |value: &str| -> i64 {
        db.query_row(
            "SELECT COUNT(*) FROM auth_tokens WHERE token_hash = ?1",
            [value],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(rows_with(&token), 0);
    assert_eq!(rows_with(&mpa_core::accounts::token_hash(&token)), 1);

    let (s, me) = env.get(&token, "/api/v1/me").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(me["name"], "alice");
    assert_eq!(me["id"], alice.id.0);
    assert_eq!(env.logout(&token).await, StatusCode::NO_CONTENT);
    let (s, _) = env.get(&token, "/api/v1/me").await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);

    let (s, me) = env.get(ADMIN_TOKEN, "/api/v1/me").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(me["is_admin"], true);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stream_runs_a_tool_streams_text_and_saves_the_session() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    env.mock.push(MockReply::tool_calls(&[(
        "call_1",
        "test_echo",
        json!({"text": "ping"}),
    )]));
    env.mock.push(MockReply::text("The echo said **ping**."));
    let frames = Frames::new(
        env.stream(
            &token,
            json!({"text": "echo ping", "session_id": "s-alice"}),
        )
        .await,
    )
    .all()
    .await;
    assert_eq!(
        types(&frames),
        ["start", "tool:running", "tool:done", "delta", "done"]
    );
    assert_eq!(frames[0]["session_id"], "s-alice");
    assert_eq!(frames[1]["tool_id"], "call_1");
    assert_eq!(frames[1]["name"], "test_echo");
    assert_eq!(text_of(&frames), "The echo said **ping**.");
    assert_eq!(frames.last().unwrap()["status"], "completed");

    let detail = env.wait_idle(&token, "s-alice").await;
    let shown = detail["display_messages"].as_array().unwrap();
    let roles: Vec<&str> = shown.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "tool", "assistant"]);
    assert_eq!(shown[2]["content"], "The echo said **ping**.");
    assert_eq!(detail["title"], "echo ping");

    let (s, list) = env
        .get(&token, "/api/v1/agent/sessions?page=1&count=10")
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["sessions"][0]["session_id"], "s-alice");
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);

    // Without a session id a new one is made and announced in `start`.
    env.mock.push(MockReply::text("fresh"));
    let frames = Frames::new(env.stream(&token, json!({"text": "hi"})).await)
        .all()
        .await;
    let sid = frames[0]["session_id"].as_str().unwrap();
    assert!(!sid.is_empty() && sid != "s-alice");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn other_users_sessions_are_404_everywhere_and_nothing_changes() {
    let env = Env::start().await;
    let alice = env.user("alice", "password-a", false).await;
    let bob = env.user("bob", "password-b", false).await;
    let admin = env.user("root", "password-r", true).await;
    env.mock.push(MockReply::text("hello alice"));
    Frames::new(
        env.stream(&alice, json!({"text": "mine", "session_id": "a1"}))
            .await,
    )
    .all()
    .await;
    let before = env.wait_idle(&alice, "a1").await;
    let requests_before = env.mock.request_count();

    let missing = env.get(&bob, "/api/v1/agent/sessions/never-existed").await;
    assert_eq!(missing.0, StatusCode::NOT_FOUND);
    // (Bob streaming with "a1" gets a new session of his own, like any unused id: see
    // tests/session_ids.rs.)
    assert_eq!(env.get(&bob, "/api/v1/agent/sessions/a1").await, missing);
    let del = env
        .send(reqwest::Method::DELETE, &bob, "/api/v1/agent/sessions/a1")
        .await;
    assert_eq!(del, missing);
    let stop = env
        .send(
            reqwest::Method::POST,
            &bob,
            "/api/v1/agent/sessions/a1/stop",
        )
        .await;
    assert_eq!(stop, missing);
    let (_, bobs) = env.get(&bob, "/api/v1/agent/sessions").await;
    assert_eq!(bobs["sessions"], json!([]));
    // Bob even asking for everyone's list sees only his own.
    let (_, bobs) = env.get(&bob, "/api/v1/agent/sessions?all=true").await;
    assert_eq!(bobs["sessions"], json!([]));

    let after = env.wait_idle(&alice, "a1").await;
    assert_eq!(after, before);
    assert_eq!(env.mock.request_count(), requests_before, "no turn ran");

    // The admin reads and continues alice's chat, naming her as the owner (the web page's
    // explicit continuation); alice stays the owner.
    let owner = before["user_id"].as_str().unwrap();
    let (s, seen) = env
        .get(
            &admin,
            &format!("/api/v1/agent/sessions/a1?user_id={owner}"),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(seen["display_messages"], before["display_messages"]);
    let (_, all) = env.get(&admin, "/api/v1/agent/sessions?all=true").await;
    assert_eq!(all["sessions"][0]["session_id"], "a1");
    env.mock.push(MockReply::text("admin here"));
    let frames = Frames::new(
        env.stream(
            &admin,
            json!({"text": "continue", "session_id": "a1", "user_id": owner}),
        )
        .await,
    )
    .all()
    .await;
    assert_eq!(text_of(&frames), "admin here");
    let after = env.wait_idle(&alice, "a1").await;
    assert_eq!(after["user_id"], before["user_id"]);
    assert_eq!(after["display_messages"].as_array().unwrap().len(), 4);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_queue_answers_agent_manager_queue_full() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    env.mock
        .push(MockReply::text("never finishes").stall_after(1));
    env.mock.set_default(MockReply::text("queued answer"));
    let mut first = Frames::new(
        env.stream(&token, json!({"text": "t0", "session_id": "q"}))
            .await,
    );
    first.until("start").await;
    // The first turn holds the stalled reply before anything queues behind it (a stop that came
    // before its model call would leave the stall to a queued turn).
    assert!(
        env.mock
            .wait_for_requests(1, std::time::Duration::from_secs(30))
            .await
    );
    // While the turn runs, the first eight messages join it (its steering inbox is full then),
    // the next eight wait in the session's queue, and the seventeenth is refused.
    for i in 1..=8 {
        let ack = Frames::new(
            env.stream(&token, json!({"text": format!("s{i}"), "session_id": "q"}))
                .await,
        )
        .all()
        .await;
        assert_eq!(ack[1]["status"], "queued", "{ack:?}");
    }
    let mut queued = Vec::new();
    for i in 9..=16 {
        let r = env
            .stream(&token, json!({"text": format!("t{i}"), "session_id": "q"}))
            .await;
        assert_eq!(r.status(), StatusCode::OK);
        queued.push(r);
    }
    let frames = Frames::new(
        env.stream(&token, json!({"text": "t17", "session_id": "q"}))
            .await,
    )
    .all()
    .await;
    assert_eq!(frames[0]["type"], "error");
    assert_eq!(frames[0]["code"], "agent_manager_queue_full");
    assert_eq!(frames.last().unwrap()["type"], "done");
    let (s, v) = env
        .send(
            reqwest::Method::POST,
            &token,
            "/api/v1/agent/sessions/q/stop",
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["stopped"], true);
    let rest = first.until("done").await;
    assert_eq!(rest.last().unwrap()["status"], "stopped");
    // A stop discards what waited (spec runtime.md §2.7), and says so to each waiting sender.
    let discarded = rest
        .iter()
        .filter(|f| f["type"] == "steering" && f["status"] == "discarded")
        .count();
    assert_eq!(discarded, 8);
    for r in queued {
        let f = Frames::new(r).all().await;
        let said: Vec<&Value> = f.iter().filter(|f| f["type"] != "heartbeat").collect();
        assert_eq!(said[0]["code"], "discarded_by_stop", "{f:?}");
        assert_eq!(said[1]["status"], "stopped");
    }
    assert_eq!(
        env.mock.request_count(),
        1,
        "nothing discarded reached the model"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_disconnected_client_does_not_stop_the_turn() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    env.mock.push(MockReply::tool_calls(&[(
        "call_s",
        "test_sleep",
        json!({"ms": 600}),
    )]));
    env.mock.push(MockReply::text("slept and done"));
    let mut frames = Frames::new(
        env.stream(&token, json!({"text": "sleep", "session_id": "d"}))
            .await,
    );
    frames.until("tool").await;
    drop(frames);
    let detail = env.wait_idle(&token, "d").await;
    let shown = detail["display_messages"].as_array().unwrap();
    assert_eq!(shown.len(), 3, "{shown:?}");
    assert_eq!(shown[1]["outcome"], "succeeded");
    assert_eq!(shown[2]["content"], "slept and done");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_ends_a_long_turn_and_delete_removes_the_chat() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    env.mock.push(MockReply::tool_calls(&[(
        "call_long",
        "test_sleep",
        json!({"ms": 600_000}),
    )]));
    env.mock.set_default(MockReply::text("after stop"));
    let mut frames = Frames::new(
        env.stream(&token, json!({"text": "long", "session_id": "L"}))
            .await,
    );
    let got = frames.until("tool").await;
    assert_eq!(got.last().unwrap()["status"], "running");
    let (s, v) = env
        .send(
            reqwest::Method::POST,
            &token,
            "/api/v1/agent/sessions/L/stop",
        )
        .await;
    assert_eq!((s, v), (StatusCode::OK, json!({"stopped": true})));
    let rest = frames.all().await;
    let tool_end = rest.iter().find(|f| f["type"] == "tool").unwrap();
    assert_eq!(tool_end["status"], "error");
    assert_eq!(rest.last().unwrap()["type"], "done");
    assert_eq!(rest.last().unwrap()["status"], "stopped");
    let detail = env.wait_idle(&token, "L").await;
    assert_eq!(detail["display_messages"][1]["status"], "error");
    // Idle now: stopping again reports that nothing ran.
    let (_, v) = env
        .send(
            reqwest::Method::POST,
            &token,
            "/api/v1/agent/sessions/L/stop",
        )
        .await;
    assert_eq!(v, json!({"stopped": false}));

    let (s, v) = env
        .send(reqwest::Method::DELETE, &token, "/api/v1/agent/sessions/L")
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["deleted"], true);
    let (s, _) = env.get(&token, "/api/v1/agent/sessions/L").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (_, list) = env.get(&token, "/api/v1/agent/sessions").await;
    assert_eq!(list["sessions"], json!([]));
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_endpoint_answers_with_the_final_text_streamed_or_not() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    let (s, models) = env.get(&token, "/v1/models").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(models["data"][0]["id"], "mpagent");

    env.mock.push(MockReply::tool_calls(&[(
        "call_1",
        "test_echo",
        json!({"text": "x"}),
    )]));
    env.mock.push(MockReply::text("Final answer."));
    let r = env
        .http
        .post(env.url("/v1/chat/completions"))
        .bearer_auth(&token)
        .json(&json!({"model": "mpagent", "user": "conv-1",
                      "messages": [{"role": "system", "content": "be brief"},
                                   {"role": "user", "content": "hello"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let sid = r.headers()["x-session-id"].to_str().unwrap().to_string();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(
        v["choices"][0]["message"],
        json!({"role": "assistant", "content": "Final answer."})
    );
    assert_eq!(v["choices"][0]["finish_reason"], "stop");

    // Same `user`: same session, so the agent sees the earlier exchange.
    env.mock.push(MockReply::text("Second."));
    let r = env
        .http
        .post(env.url("/v1/chat/completions"))
        .bearer_auth(&token)
        .json(&json!({"stream": true, "user": "conv-1",
                      "messages": [{"role": "user", "content": "again"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body = r.text().await.unwrap();
    let mut text = String::new();
    let mut finish = None;
    assert!(body.trim_end().ends_with("data: [DONE]"));
    for line in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if line == "[DONE]" {
            continue;
        }
        let c: Value = serde_json::from_str(line).unwrap();
        assert_eq!(c["object"], "chat.completion.chunk");
        text.push_str(c["choices"][0]["delta"]["content"].as_str().unwrap_or(""));
        if let Some(f) = c["choices"][0]["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
    }
    assert_eq!(text, "Second.");
    assert_eq!(finish.as_deref(), Some("stop"));
    let detail = env.wait_idle(&token, &sid).await;
    assert_eq!(detail["display_messages"].as_array().unwrap().len(), 5);

    let r = env
        .http
        .post(env.url("/v1/chat/completions"))
        .json(&json!({"messages": [{"role": "user", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openai_endpoint_keeps_the_clients_conversation_as_real_messages() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    env.mock.push(MockReply::text("Three.").usage(120, 3));
    let r = env
        .http
        .post(env.url("/v1/chat/completions"))
        .bearer_auth(&token)
        .json(
            &json!({"model": "some-other-name", "user": "conv-ctx", "messages": [
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "one?"},
            {"role": "assistant", "content": "One."},
            {"role": "user", "content": "two?"},
            {"role": "assistant", "content": "Two."},
            {"role": "user", "content": "three?"},
            {"role": "assistant", "content": "Three?"},
            {"role": "user", "content": "and now?"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    // The model id is the one /v1/models lists; usage is the upstream's own.
    assert_eq!(v["model"], "mpagent");
    assert_eq!(v["usage"]["prompt_tokens"], 120);
    assert_eq!(v["usage"]["completion_tokens"], 3);
    let req = &env.mock.requests()[0];
    let msgs = req["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "user"
        ]
    );
    assert_eq!(msgs[1]["content"], "one?");
    assert_eq!(msgs[6]["content"], "Three?");
    assert!(msgs[7]["content"].as_str().unwrap().starts_with("and now?"));
    // The client's system text is a marked layer after the host's own, not the host prompt.
    let sys = msgs[0]["content"].as_str().unwrap();
    assert!(sys.starts_with("You are the MoviePilot agent"));
    let client = sys.find("<client_instructions>").unwrap();
    assert!(sys[client..].contains("Answer in one word."));
    assert!(!req.to_string().contains("Earlier conversation"));
    // Without upstream usage the answer carries an estimate marked as such, never 0/0/0.
    env.mock.push(MockReply::text("Four.").without_usage());
    let r = env
        .http
        .post(env.url("/v1/chat/completions"))
        .bearer_auth(&token)
        .json(&json!({"user": "conv-ctx", "messages": [{"role": "user", "content": "four?"}]}))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["usage"]["estimated"], true);
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_stops_a_running_turn_and_writes_its_snapshot() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    env.mock.push(MockReply::tool_calls(&[(
        "call_long",
        "test_sleep",
        json!({"ms": 600_000}),
    )]));
    let mut frames = Frames::new(
        env.stream(&token, json!({"text": "long", "session_id": "S"}))
            .await,
    );
    frames.until("tool").await;
    let store = env.store.clone();
    let env_accounts = env.accounts.clone();
    env.shutdown().await;
    let rest = frames.all().await;
    assert_eq!(rest.last().unwrap()["type"], "done");
    let alice = env_accounts.find("alice").await.unwrap().unwrap().id;
    let chat = store
        .chat(&mpa_core::server_session_id(&alice, "S"))
        .await
        .unwrap()
        .expect("snapshot written");
    let tool = chat
        .agent_messages
        .iter()
        .find(|m| m.role == mpa_protocol::Role::Tool)
        .unwrap();
    assert!(tool.outcome.is_some_and(|o| o.is_error()), "{tool:?}");
    // Regression (issue 12, item 6): the notice names the shutdown, not the user.
    let notice = chat.agent_messages.last().unwrap().text();
    assert!(
        notice.contains("stopped because the host was shutting down"),
        "{notice}"
    );
    assert!(!notice.contains("by the user"), "{notice}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rename_keeps_history_and_a_reused_name_inherits_nothing() {
    let env = Env::start().await;
    let token = env.user("dave", "password-d", false).await;
    env.mock.push(MockReply::text("kept"));
    Frames::new(
        env.stream(&token, json!({"text": "remember", "session_id": "dv"}))
            .await,
    )
    .all()
    .await;
    env.wait_idle(&token, "dv").await;
    let dave = env.accounts.rename("dave", "david").await.unwrap();
    let (s, me) = env.get(&token, "/api/v1/me").await;
    assert_eq!((s, me["name"].clone()), (StatusCode::OK, json!("david")));
    assert_eq!(me["id"], dave.id.0);
    let (_, list) = env.get(&token, "/api/v1/agent/sessions").await;
    assert_eq!(list["sessions"][0]["session_id"], "dv");

    let newcomer = env.user("dave", "password-new", false).await;
    let (_, list) = env.get(&newcomer, "/api/v1/agent/sessions").await;
    assert_eq!(list["sessions"], json!([]));
    let (s, _) = env.get(&newcomer, "/api/v1/agent/sessions/dv").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_endpoint_reports_a_failed_turn_as_an_error_streamed_or_not() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    for stream in [false, true] {
        env.mock
            .push(MockReply::status(401, "{\"error\":\"bad key\"}"));
        let r = env
            .http
            .post(env.url("/v1/chat/completions"))
            .bearer_auth(&token)
            .json(&json!({"stream": stream, "user": format!("fail-{stream}"),
                          "messages": [{"role": "user", "content": "hello"}]}))
            .send()
            .await
            .unwrap();
        assert!(r.headers().contains_key("x-session-id"), "stream={stream}");
        if !stream {
            assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
            let v: Value = r.json().await.unwrap();
            assert_eq!(v["error"]["type"], "server_error", "{v}");
            continue;
        }
        assert_eq!(r.status(), StatusCode::OK, "the stream had already started");
        let body = r.text().await.unwrap();
        assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
        let frames: Vec<Value> = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|l| *l != "[DONE]")
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let last = frames.last().unwrap();
        assert_eq!(last["error"]["type"], "server_error", "{body}");
        assert!(
            frames
                .iter()
                .all(|f| f["choices"][0]["finish_reason"].is_null()),
            "a failed turn never claims finish_reason=stop: {body}"
        );
    }
    env.shutdown().await;
}

/// Regression (issue 12, item 6): the page's CSP did not forbid framing, so another site could
/// overlay it (clickjacking).
#[tokio::test(flavor = "multi_thread")]
async fn the_page_cannot_be_framed_by_another_site() {
    let env = Env::start().await;
    let r = env.http.get(env.url("/")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let csp = r.headers()["content-security-policy"].to_str().unwrap();
    let directives: Vec<&str> = csp.split(';').map(str::trim).collect();
    assert!(directives.contains(&"frame-ancestors 'none'"), "{csp}");
    assert!(directives.contains(&"default-src 'self'"), "{csp}");
    env.shutdown().await;
}
