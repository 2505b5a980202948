//! Regressions of issue 12, items 1, 2 and 6: who a session id reaches, on every route, and what
//! a live tool line shows. Real sockets on 127.0.0.1, a real SQLite store and evidence history,
//! the real core against the mock model server.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common;

use common::*;
use mpa_protocol::UserId;
use mpa_test_support::MockReply;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// The conversation part (no system text) of a request the model received.
fn conversation(req: &Value) -> Vec<(String, String)> {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            let content = match &m["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (m["role"].as_str().unwrap().to_owned(), content)
        })
        .collect()
}

fn said(role: &str, text: &str) -> (String, String) {
    (role.to_owned(), text.to_owned())
}

/// A turn on the stream API; returns its frames.
async fn stream_turn(env: &Env, token: &str, body: Value) -> Vec<Value> {
    Frames::new(env.stream(token, body).await).all().await
}

/// What a stream answer looks like apart from ids that differ on every run.
fn shape(frames: &[Value]) -> (Vec<String>, String, Value) {
    (
        types(frames),
        text_of(frames),
        frames.last().unwrap()["status"].clone(),
    )
}

async fn openai(env: &Env, token: &str, session: &str, text: &str, stream: bool) -> (u16, String) {
    let r = env
        .http
        .post(env.url("/v1/chat/completions"))
        .bearer_auth(token)
        .header("x-session-id", session)
        .json(&json!({"model": "m", "stream": stream,
                      "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    assert_eq!(r.headers()["x-session-id"], session, "the client's own id");
    (status, r.text().await.unwrap())
}

/// The answer text of an OpenAI response (streamed or not).
fn openai_text(body: &str, stream: bool) -> String {
    if !stream {
        let v: Value = serde_json::from_str(body).unwrap();
        return v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_owned();
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect()
}

/// `user`'s chat rows.
fn chats_of(env: &Env, user: &UserId) -> Vec<(String, String, String, String)> {
    env.chat_rows()
        .into_iter()
        .filter(|r| r.1 == user.0)
        .collect()
}

/// `user`'s evidence rows.
fn evidence_of(env: &Env, user: &UserId) -> Vec<(String, String, String, String)> {
    let key = mpa_redact::UserKey::for_user(user).as_str().to_owned();
    env.evidence().into_iter().filter(|r| r.0 == key).collect()
}

async fn user_id(env: &Env, name: &str) -> UserId {
    env.accounts.find(name).await.unwrap().unwrap().id
}

/// Alice's chat `a1` with one exchange, settled in the store and the evidence history.
async fn alices_chat(env: &Env, alice: &str) {
    env.mock.push(MockReply::text("noted, alice"));
    stream_turn(
        env,
        alice,
        json!({"text": "alice's private plan: buy Dune", "session_id": "a1"}),
    )
    .await;
    env.wait_idle(alice, "a1").await;
    env.evidence_settled(2).await;
}

/// Regression (issue 12, item 1): `MPA_ADMIN_TOKEN` — and an admin's login token — on
/// `/v1/chat/completions` (streamed or not) or `/api/v1/agent/stream` with another user's session
/// id continued that user's chat: the model received her messages, her chat and evidence gained
/// the admin's turn. Now these entries act in the caller's own sessions, and another user's id is
/// answered exactly like one never used. (There is no MCP entry in this host.)
#[tokio::test(flavor = "multi_thread")]
async fn protocol_entry_admins_get_no_cross_user_history() {
    let env = Env::start_full().await;
    let alice = env.user("alice", "password-a", false).await;
    let root = env.user("root", "password-r", true).await;
    alices_chat(&env, &alice).await;
    // Two more of hers for the OpenAI endpoint, streamed and not.
    for id in ["a2", "a3"] {
        env.mock.push(MockReply::text("noted, alice"));
        stream_turn(
            &env,
            &alice,
            json!({"text": "alice's other plan", "session_id": id}),
        )
        .await;
        env.wait_idle(&alice, id).await;
    }
    env.evidence_settled(6).await;
    let alice_id = user_id(&env, "alice").await;
    let (rows_before, evidence_before) = (chats_of(&env, &alice_id), evidence_of(&env, &alice_id));
    assert_eq!(rows_before.len(), 3);
    assert_eq!(evidence_before.len(), 6, "{evidence_before:?}");

    for (who, token) in [("static admin token", ADMIN_TOKEN), ("login admin", &root)] {
        // The stream API: alice's id and a never-used id get the same answer, a new session of
        // the caller's whose model request holds only the caller's message.
        let mut answers = Vec::new();
        for id in ["a1", "never-used-1"] {
            let n = env.mock.request_count();
            env.mock.push(MockReply::text("fresh start"));
            let frames = stream_turn(
                &env,
                token,
                json!({"text": "continue it", "session_id": id}),
            )
            .await;
            assert_eq!(frames[0]["session_id"], id, "{who}");
            let reqs = env.mock.requests();
            assert_eq!(reqs.len(), n + 1, "{who}: one model request");
            assert_eq!(
                conversation(&reqs[n]),
                [said("user", "continue it")],
                "{who}: nothing of alice's reached the model"
            );
            answers.push(shape(&frames));
        }
        assert_eq!(answers[0], answers[1], "{who}: same answer as a missing id");
        assert_eq!(
            answers[0],
            (
                vec!["start".into(), "delta".into(), "done".into()],
                "fresh start".into(),
                json!("completed")
            )
        );

        // The OpenAI endpoint, streamed and not.
        for stream in [false, true] {
            let mut answers = Vec::new();
            let hers = if stream { "a3" } else { "a2" };
            for id in [hers, &format!("never-used-{stream}")] {
                let n = env.mock.request_count();
                env.mock.push(MockReply::text("own session"));
                let (status, body) = openai(&env, token, id, "what did she plan?", stream).await;
                let reqs = env.mock.requests();
                assert_eq!(
                    conversation(&reqs[n]),
                    [said("user", "what did she plan?")],
                    "{who} stream={stream}: nothing of alice's reached the model"
                );
                answers.push((status, openai_text(&body, stream)));
            }
            assert_eq!(answers[0], answers[1], "{who} stream={stream}");
            assert_eq!(answers[0], (200, "own session".to_owned()));
        }
        // The web stream's explicit continuation is not the static token's either: its owner
        // field is ignored, the turn lands in its own `a1` (the one made above).
        if token == ADMIN_TOKEN {
            let n = env.mock.request_count();
            env.mock.push(MockReply::text("still mine"));
            stream_turn(
                &env,
                token,
                json!({"text": "again", "session_id": "a1", "user_id": alice_id.0}),
            )
            .await;
            let conv = conversation(&env.mock.requests()[n]);
            assert!(
                !conv.iter().any(|(_, t)| t.contains("alice")),
                "static token never reaches alice's chat: {conv:?}"
            );
        }
    }

    // Alice's chat and evidence are exactly as they were; the admins' turns are in their own
    // sessions, which alice does not see.
    env.wait_idle(ADMIN_TOKEN, "a1").await;
    env.wait_idle(&root, "a1").await;
    env.evidence_settled(evidence_before.len()).await;
    assert_eq!(
        chats_of(&env, &alice_id),
        rows_before,
        "alice's chat row unchanged"
    );
    assert_eq!(
        evidence_of(&env, &alice_id),
        evidence_before,
        "alice's evidence unchanged"
    );
    let (_, list) = env.get(&alice, "/api/v1/agent/sessions").await;
    let ids: Vec<&Value> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["session_id"])
        .collect();
    assert_eq!(ids.len(), 3, "{list}");
    let (_, mine) = env.get(&root, "/api/v1/agent/sessions/a1").await;
    assert_eq!(mine["user_id"], user_id(&env, "root").await.0);
    assert_eq!(mine["display_messages"][0]["content"], "continue it");
    env.shutdown().await;
}

/// Issue 12, item 1, the one allowed path: the web page's explicit admin continuation (a login
/// admin naming the owner) continues alice's chat with her history, keeps her the owner, and runs
/// tools as the admin (an admin-only tool works). A non-admin naming an owner gets 404 whether
/// or not the chat exists, and a continuation of a missing chat creates nothing.
#[tokio::test(flavor = "multi_thread")]
async fn web_admin_continuation_keeps_the_owner_and_runs_tools_as_the_admin() {
    let env = Env::start_full().await;
    let alice = env.user("alice", "password-a", false).await;
    let bob = env.user("bob", "password-b", false).await;
    let root = env.user("root", "password-r", true).await;
    alices_chat(&env, &alice).await;
    let alice_id = user_id(&env, "alice").await;

    // Bob naming alice as the owner: 404 for her chat and for a missing one alike, nothing runs.
    let n = env.mock.request_count();
    let mut answers = Vec::new();
    for id in ["a1", "never-used"] {
        let r = env
            .stream(
                &bob,
                json!({"text": "let me in", "session_id": id, "user_id": alice_id.0}),
            )
            .await;
        let s = r.status();
        answers.push((s, r.json::<Value>().await.unwrap()));
        let q = format!("/api/v1/agent/sessions/{id}?user_id={}", alice_id.0);
        answers.push(env.get(&bob, &q).await);
    }
    assert_eq!(answers[0], answers[2]);
    assert_eq!(answers[1], answers[3]);
    assert_eq!(answers[0].0, StatusCode::NOT_FOUND);
    assert_eq!(answers[0].1["error"]["code"], "session_not_found");
    assert_eq!(answers[1].0, StatusCode::NOT_FOUND);
    assert_eq!(env.mock.request_count(), n, "no turn ran");

    // The admin continuing a chat alice does not have: 404, and no chat is created.
    let rows = env.chat_rows();
    let r = env
        .stream(
            &root,
            json!({"text": "hi", "session_id": "never-used", "user_id": alice_id.0}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(env.chat_rows(), rows);

    // The admin opens alice's chat from the page (the list names owner and id) and continues it.
    let (_, all) = env.get(&root, "/api/v1/agent/sessions?all=true").await;
    assert_eq!(all["sessions"][0]["session_id"], "a1");
    assert_eq!(all["sessions"][0]["user_id"], alice_id.0);
    let q = format!("/api/v1/agent/sessions/a1?user_id={}", alice_id.0);
    let (s, seen) = env.get(&root, &q).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(seen["user_id"], alice_id.0);
    assert_eq!(
        seen["display_messages"][0]["content"],
        "alice's private plan: buy Dune"
    );

    let n = env.mock.request_count();
    env.mock.push(MockReply::tool_calls(&[(
        "call_sh",
        "execute_command",
        json!({"action": "run", "command": "echo ran-as-admin"}),
    )]));
    env.mock.push(MockReply::text("done for alice"));
    let frames = stream_turn(
        &env,
        &root,
        json!({"text": "check the box", "session_id": "a1", "user_id": alice_id.0}),
    )
    .await;
    assert_eq!(frames[0]["session_id"], "a1");
    assert_eq!(
        types(&frames),
        ["start", "tool:running", "tool:done", "delta", "done"],
        "{frames:?}"
    );
    assert_eq!(frames[2]["outcome"], "succeeded", "an admin-only tool ran");
    let conv = conversation(&env.mock.requests()[n]);
    assert_eq!(
        conv[..2],
        [
            said("user", "alice's private plan: buy Dune"),
            said("assistant", "noted, alice"),
        ],
        "the continuation carries her history"
    );
    assert_eq!(conv.len(), 3, "{conv:?}");
    assert!(
        conv[2].1.starts_with("check the box") && conv[2].1.contains("run by root (administrator)"),
        "the model is told who runs the turn: {conv:?}"
    );
    let after = env.wait_idle(&alice, "a1").await;
    assert_eq!(after["user_id"], alice_id.0, "alice stays the owner");
    let shown: Vec<&str> = after["display_messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(shown, ["user", "assistant", "user", "tool", "assistant"]);
    // The same tool refuses alice herself: it ran as the admin above, not as the owner.
    env.mock.push(MockReply::tool_calls(&[(
        "call_sh2",
        "execute_command",
        json!({"action": "run", "command": "echo ran-as-alice"}),
    )]));
    env.mock.push(MockReply::text("cannot"));
    let frames = stream_turn(&env, &alice, json!({"text": "me too", "session_id": "a1"})).await;
    let tool = frames
        .iter()
        .find(|f| f["status"] == "error")
        .expect("refused");
    assert_eq!(tool["tool_id"], "call_sh2");
    env.shutdown().await;
}

/// Regression (issue 12, item 2): another user's exact id answered 404 while a missing id created
/// a session (so ids could be probed), and a user could create `telegram-12345` first so its
/// real owner got 404 everywhere. Now ids are derived per user on the server: the same client id
/// names a different session for every user, and a foreign id is a missing one on every route.
#[tokio::test(flavor = "multi_thread")]
async fn session_ids_cannot_be_probed_or_squatted() {
    let env = Env::start_full().await;
    let alice = env.user("alice", "password-a", false).await;
    let bob = env.user("bob", "password-b", false).await;
    let (alice_id, bob_id) = (user_id(&env, "alice").await, user_id(&env, "bob").await);

    // Bob squats the id first.
    env.mock.push(MockReply::text("squatted"));
    stream_turn(
        &env,
        &bob,
        json!({"text": "bob was here first", "session_id": "telegram-12345"}),
    )
    .await;
    env.wait_idle(&bob, "telegram-12345").await;
    env.evidence_settled(2).await;
    let (rows_before, evidence_before) = (chats_of(&env, &bob_id), evidence_of(&env, &bob_id));

    // Probing: every route answers alice the same for bob's id as for one nobody used.
    for path in [
        "/api/v1/agent/sessions/telegram-12345",
        "/api/v1/agent/sessions/nobody-used",
    ] {
        let got = [
            env.get(&alice, path).await,
            env.send(Method::DELETE, &alice, path).await,
            env.send(Method::POST, &alice, &format!("{path}/stop"))
                .await,
        ];
        for (s, v) in &got {
            assert_eq!(*s, StatusCode::NOT_FOUND, "{path}: {v}");
            assert_eq!(v["error"]["code"], "session_not_found", "{path}");
        }
    }
    let missing = env.get(&alice, "/api/v1/agent/sessions/nobody-used").await;
    assert_eq!(
        env.get(&alice, "/api/v1/agent/sessions/telegram-12345")
            .await,
        missing
    );

    // The real owner is not locked out: her `telegram-12345` is her own new session.
    let n = env.mock.request_count();
    env.mock.push(MockReply::text("hello alice"));
    let frames = stream_turn(
        &env,
        &alice,
        json!({"text": "my telegram chat", "session_id": "telegram-12345"}),
    )
    .await;
    assert_eq!(frames[0]["session_id"], "telegram-12345");
    assert_eq!(text_of(&frames), "hello alice");
    assert_eq!(
        conversation(&env.mock.requests()[n]),
        [said("user", "my telegram chat")]
    );
    let hers = env.wait_idle(&alice, "telegram-12345").await;
    assert_eq!(hers["user_id"], alice_id.0);
    assert_eq!(hers["session_id"], "telegram-12345");
    let theirs = env.wait_idle(&bob, "telegram-12345").await;
    assert_eq!(
        theirs["display_messages"][0]["content"],
        "bob was here first"
    );

    // One client id, two sessions: both lists show the id, the store keeps them apart.
    for (token, who) in [(&alice, &alice_id), (&bob, &bob_id)] {
        let (_, list) = env.get(token, "/api/v1/agent/sessions").await;
        assert_eq!(list["sessions"].as_array().unwrap().len(), 1);
        assert_eq!(list["sessions"][0]["session_id"], "telegram-12345");
        assert_eq!(list["sessions"][0]["user_id"], who.0);
    }
    let mut stored: Vec<String> = env.chat_rows().into_iter().map(|r| r.0).collect();
    stored.sort();
    let mut want = vec![
        mpa_core::server_session_id(&alice_id, "telegram-12345"),
        mpa_core::server_session_id(&bob_id, "telegram-12345"),
    ];
    want.sort();
    assert_eq!(stored, want);
    assert_ne!(want[0], want[1]);

    // Deleting her session leaves bob's alone.
    let (s, v) = env
        .send(
            Method::DELETE,
            &alice,
            "/api/v1/agent/sessions/telegram-12345",
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v, json!({"deleted": true, "session_id": "telegram-12345"}));
    env.evidence_settled(evidence_before.len()).await;
    assert_eq!(chats_of(&env, &bob_id), rows_before, "bob's chat unchanged");
    assert_eq!(
        evidence_of(&env, &bob_id),
        evidence_before,
        "bob's evidence unchanged"
    );
    env.shutdown().await;
}

/// Issue 12, item 2, migration: chats stored before ids were derived keep their ids and stay
/// with their owner (found by the old id, continued in place); to anyone else such an id is a
/// missing one, so the old rows can be neither read nor squatted.
#[tokio::test(flavor = "multi_thread")]
async fn chats_stored_under_old_ids_stay_with_their_owner() {
    let env = Env::start().await;
    let alice = env.user("alice", "password-a", false).await;
    let bob = env.user("bob", "password-b", false).await;
    let alice_id = user_id(&env, "alice").await;
    let now = chrono::Utc::now();
    env.store
        .save_chat(mpa_core::Chat {
            session_id: "legacy-7".into(),
            user_id: alice_id.clone(),
            channel: "web".into(),
            title: "old chat".into(),
            agent_messages: vec![
                mpa_protocol::Message::user("an old question"),
                mpa_protocol::Message::assistant("an old answer", vec![]),
            ],
            display_messages: json!([{"role": "user", "content": "an old question"}]),
            message_count: 2,
            session_state: json!({}),
            turn_status: None,
            created_at: now,
            updated_at: now,
        })
        .await
        .unwrap();
    let old_row = env.chat_rows();

    let missing = env.get(&bob, "/api/v1/agent/sessions/never-used").await;
    assert_eq!(
        env.get(&bob, "/api/v1/agent/sessions/legacy-7").await,
        missing
    );
    let n = env.mock.request_count();
    env.mock.push(MockReply::text("bob's own"));
    let frames = stream_turn(
        &env,
        &bob,
        json!({"text": "peek", "session_id": "legacy-7"}),
    )
    .await;
    assert_eq!(frames[0]["session_id"], "legacy-7");
    assert_eq!(
        conversation(&env.mock.requests()[n]),
        [said("user", "peek")]
    );
    env.wait_idle(&bob, "legacy-7").await;
    assert_eq!(
        chats_of(&env, &alice_id),
        old_row,
        "alice's old chat untouched"
    );

    let (s, v) = env.get(&alice, "/api/v1/agent/sessions/legacy-7").await;
    assert_eq!((s, v["title"].clone()), (StatusCode::OK, json!("old chat")));
    let (_, list) = env.get(&alice, "/api/v1/agent/sessions").await;
    assert_eq!(list["sessions"][0]["session_id"], "legacy-7");
    let n = env.mock.request_count();
    env.mock.push(MockReply::text("continued"));
    stream_turn(
        &env,
        &alice,
        json!({"text": "and now?", "session_id": "legacy-7"}),
    )
    .await;
    assert_eq!(
        conversation(&env.mock.requests()[n]),
        [
            said("user", "an old question"),
            said("assistant", "an old answer"),
            said("user", "and now?")
        ]
    );
    let after = env.wait_idle(&alice, "legacy-7").await;
    assert_eq!(after["message_count"], 4);
    assert!(
        env.chat_rows()
            .iter()
            .any(|r| r.0 == "legacy-7" && r.1 == alice_id.0),
        "continued in place under its old id"
    );
    env.shutdown().await;
}

/// Regression (issue 12, item 6): the live SSE `tool` frame showed a result's secrets that the
/// stored chat redacts. Now the live line is the stored line.
#[tokio::test(flavor = "multi_thread")]
async fn live_tool_frames_are_redacted_like_the_stored_result() {
    let env = Env::start().await;
    let alice = env.user("alice", "password-a", false).await;
    let result = format!(
        "{}login ok; my password is hunter2xyz and Authorization: Bearer abcdefgh12345678",
        "x".repeat(150)
    );
    env.mock.push(MockReply::tool_calls(&[(
        "call_r",
        "test_result",
        json!({"content": result}),
    )]));
    env.mock.push(MockReply::text("ok"));
    let frames = stream_turn(&env, &alice, json!({"text": "go", "session_id": "red"})).await;
    let live: Vec<&Value> = frames.iter().filter(|f| f["type"] == "tool").collect();
    assert_eq!(live.len(), 2);
    let all = serde_json::to_string(&frames).unwrap();
    assert!(!all.contains("hunter2xyz"), "{all}");
    assert!(!all.contains("abcdefgh12345678"), "{all}");
    let detail = env.wait_idle(&alice, "red").await;
    let stored = detail["display_messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(
        live[1]["message"], stored["message"],
        "live line = stored line"
    );
    assert!(
        stored["message"]
            .as_str()
            .unwrap()
            .contains("my password is [REDACTED:password]"),
        "{stored}"
    );
    env.shutdown().await;
}

/// Issue 12, item 2: the per-user prefix does not shorten what a client may send — an id of the
/// full 128 characters still works everywhere, a longer one is refused as before.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_id_of_128_characters_still_works() {
    let env = Env::start().await;
    let alice = env.user("alice", "password-a", false).await;
    let long = "L".repeat(mpa_core::MAX_CLIENT_SESSION_ID);
    env.mock.push(MockReply::text("fits"));
    let frames = stream_turn(&env, &alice, json!({"text": "hi", "session_id": long})).await;
    assert_eq!(frames[0]["session_id"], long.as_str());
    let detail = env.wait_idle(&alice, &long).await;
    assert_eq!(detail["session_id"], long.as_str());
    let r = env
        .stream(
            &alice,
            json!({"text": "hi", "session_id": format!("{long}L")}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "invalid_session_id"
    );
    env.shutdown().await;
}

/// Regression (issue 24, item 6): `GET /api/v1/agent/sessions?all=true` with `MPA_ADMIN_TOKEN`
/// listed every user's sessions — their titles (the start of their first message), ids and
/// counts. The static token is a protocol entry: it sees only its own sessions, in the list as
/// on every other route; a login admin's list still holds everyone's (the page's continuation).
#[tokio::test(flavor = "multi_thread")]
async fn the_admin_token_lists_only_its_own_sessions() {
    let env = Env::start_full().await;
    let alice = env.user("alice", "password-a", false).await;
    let root = env.user("root", "password-r", true).await;
    alices_chat(&env, &alice).await;
    env.mock.push(MockReply::text("token's own"));
    stream_turn(
        &env,
        ADMIN_TOKEN,
        json!({"text": "automation check", "session_id": "t1"}),
    )
    .await;
    env.wait_idle(ADMIN_TOKEN, "t1").await;

    for path in [
        "/api/v1/agent/sessions?all=true",
        "/api/v1/agent/sessions",
        "/api/v1/agent/sessions?all=true&page=1&count=200",
    ] {
        let (s, list) = env.get(ADMIN_TOKEN, path).await;
        assert_eq!(s, StatusCode::OK, "{path}");
        let rows = list["sessions"].as_array().unwrap();
        let seen: Vec<(&Value, &Value)> = rows
            .iter()
            .map(|r| (&r["session_id"], &r["title"]))
            .collect();
        assert_eq!(
            seen,
            [(&json!("t1"), &json!("automation check"))],
            "{path}: {list}"
        );
        assert!(
            !list.to_string().contains("alice's private plan"),
            "{path}: nothing of alice's: {list}"
        );
    }
    // Her chat stays out of the token's reach on the detail route too (a missing id).
    let missing = env
        .get(ADMIN_TOKEN, "/api/v1/agent/sessions/never-used")
        .await;
    assert_eq!(
        env.get(ADMIN_TOKEN, "/api/v1/agent/sessions/a1").await,
        missing
    );
    // A login admin still lists everyone's (the web page's explicit continuation starts there).
    let (_, all) = env.get(&root, "/api/v1/agent/sessions?all=true").await;
    let ids: Vec<&Value> = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["session_id"])
        .collect();
    assert!(
        ids.contains(&&json!("a1")) && ids.contains(&&json!("t1")),
        "{all}"
    );
    env.shutdown().await;
}
