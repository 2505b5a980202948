//! Steering over HTTP (issue 28, spec runtime.md §2): a message sent while the user's turn runs
//! is queued in the turn's inbox, joins the very next model request (after the tool results,
//! never before), and is acknowledged `applied` on the original stream with both segment ids.
//! The tool a turn waits on here is a gate the test opens, so "while a tool runs" is a fact, not
//! a timing.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::gate::{GATE_TOOL, Gate};
use crate::common::{Env, Frames, text_of, types};
use mpa_test_support::MockReply;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::Semaphore;

async fn gated() -> (Env, Arc<Semaphore>) {
    let gate = Arc::new(Semaphore::new(0));
    let env = Env::start_tools(vec![mpa_core::tools::json_tool(Gate(Arc::clone(&gate)))]).await;
    (env, gate)
}

fn gate_call() -> MockReply {
    MockReply::tool_calls(&[("call_gate", GATE_TOOL, json!({}))])
}

/// The steering blocks (the JSON the model reads) of a request's user messages, in order.
fn steering_blocks(req: &Value) -> Vec<Value> {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| serde_json::from_str::<Value>(m["content"].as_str()?).ok())
        .filter(|v| v["input"]["steering"] == true)
        .collect()
}

/// Roles of a request's messages, the system message left out.
fn roles(req: &Value) -> Vec<String> {
    req["messages"].as_array().unwrap()[1..]
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_string())
        .collect()
}

/// Sends a message on the stream endpoint and reads its whole (short) answer: the `queued`
/// acknowledgement when it steered the running turn.
async fn steer(env: &Env, token: &str, session: &str, text: &str) -> Vec<Value> {
    Frames::new(
        env.stream(token, json!({"text": text, "session_id": session}))
            .await,
    )
    .all()
    .await
}

fn queued_id(frames: &[Value]) -> String {
    assert_eq!(types(frames), ["start", "steering", "done"], "{frames:?}");
    assert_eq!(frames[1]["status"], "queued", "{frames:?}");
    assert_eq!(frames[2]["status"], "queued");
    let id = frames[1]["message_id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32);
    id
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_sent_while_a_tool_runs_joins_the_next_model_request_after_the_tool_result() {
    let (env, gate) = gated().await;
    let alice = env.user("alice", "password", false).await;
    env.mock.push(gate_call());
    env.mock
        .push(MockReply::text("Only the 4K releases, as you asked."));
    let mut turn = Frames::new(
        env.stream(
            &alice,
            json!({"text": "find the new releases", "session_id": "s"}),
        )
        .await,
    );
    let head = turn.until("tool").await;
    let first_segment = head[0]["assistant_message_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(head.last().unwrap()["status"], "running");

    let ack = steer(&env, &alice, "s", "只要 4K 的").await;
    let id = queued_id(&ack);
    assert_eq!(ack[0]["session_id"], "s");
    assert_eq!(ack[1]["content"], "只要 4K 的");
    let (_, detail) = env.get(&alice, "/api/v1/agent/sessions/s").await;
    assert_eq!(detail["steering_pending"], 1, "{detail}");
    gate.add_permits(1);

    let rest = turn.until("done").await;
    assert_eq!(
        types(&rest),
        ["tool:done", "steering", "delta", "done"],
        "{rest:?}"
    );
    let applied = &rest[1];
    assert_eq!(applied["status"], "applied");
    assert_eq!(applied["message_id"], id.as_str());
    assert_eq!(applied["content"], "只要 4K 的");
    assert_eq!(applied["assistant_message_id"], first_segment.as_str());
    let continuation = applied["continuation_message_id"].as_str().unwrap();
    assert!(continuation.len() == 32 && continuation != first_segment);
    assert_eq!(
        applied["display_message"],
        json!({"role": "user", "content": "只要 4K 的", "steering_message_id": id})
    );
    // Before the boundary the tool belonged to the first segment; after it, the text to the
    // continuation.
    assert_eq!(rest[0]["assistant_message_id"], first_segment.as_str());
    assert_eq!(rest[2]["assistant_message_id"], continuation);
    assert_eq!(text_of(&rest), "Only the 4K releases, as you asked.");
    assert_eq!(rest.last().unwrap()["status"], "completed");

    // The model saw the message in the very next request, right after the tool result.
    let reqs = env.mock.requests();
    assert_eq!(reqs.len(), 2);
    assert!(steering_blocks(&reqs[0]).is_empty());
    assert_eq!(roles(&reqs[1]), ["user", "assistant", "tool", "user"]);
    let blocks = steering_blocks(&reqs[1]);
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0]["message"], "只要 4K 的");
    assert_eq!(blocks[0]["input"]["mode"], "text");
    assert_eq!(blocks[0]["input"]["steering_message_id"], id.as_str());
    assert!(
        blocks[0]["continuation_context"]
            .as_str()
            .unwrap()
            .contains("supplement")
    );

    // Stored in the chat at the boundary, with its id; a reload shows the same order.
    let detail = env.wait_idle(&alice, "s").await;
    let shown: Vec<(String, String)> = detail["display_messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["role"].as_str().unwrap().to_string(),
                l["content"]
                    .as_str()
                    .or(l["name"].as_str())
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("user".into(), "find the new releases".into()),
            ("tool".into(), "wait_gate".into()),
            ("user".into(), "只要 4K 的".into()),
            (
                "assistant".into(),
                "Only the 4K releases, as you asked.".into()
            ),
        ]
    );
    assert_eq!(
        detail["display_messages"][2]["steering_message_id"],
        id.as_str()
    );
    assert_eq!(detail["steering_pending"], 0);
    // Captured as evidence like any user message: the user's own words.
    let evidence = env.evidence_settled(4).await;
    let users: Vec<&str> = evidence
        .iter()
        .filter(|(_, _, role, _)| role == "user")
        .map(|(_, _, _, content)| content.as_str())
        .collect();
    assert_eq!(users, ["find the new releases", "只要 4K 的"]);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn nine_rapid_messages_queue_eight_and_the_ninth_runs_as_its_own_turn() {
    let (env, gate) = gated().await;
    let alice = env.user("alice", "password", false).await;
    env.mock.push(gate_call());
    env.mock
        .push(MockReply::text("Took all eight into account."));
    env.mock.push(MockReply::text("And the ninth on its own."));
    let mut turn = Frames::new(
        env.stream(&alice, json!({"text": "start", "session_id": "nine"}))
            .await,
    );
    turn.until("tool").await;
    let mut ids = Vec::new();
    for i in 1..=8 {
        ids.push(queued_id(
            &steer(&env, &alice, "nine", &format!("note {i}")).await,
        ));
    }
    // The ninth does not fit: an ordinary turn, queued behind the running one.
    let ninth = Frames::new(
        env.stream(&alice, json!({"text": "note 9", "session_id": "nine"}))
            .await,
    );
    gate.add_permits(1);
    let rest = turn.until("done").await;
    let applied: Vec<&str> = rest
        .iter()
        .filter(|f| f["type"] == "steering")
        .map(|f| {
            assert_eq!(f["status"], "applied");
            f["message_id"].as_str().unwrap()
        })
        .collect();
    assert_eq!(applied, ids.iter().map(String::as_str).collect::<Vec<_>>());
    // Each closes the segment the one before it opened.
    let steering: Vec<&Value> = rest.iter().filter(|f| f["type"] == "steering").collect();
    for pair in steering.windows(2) {
        assert_eq!(
            pair[1]["assistant_message_id"],
            pair[0]["continuation_message_id"]
        );
    }
    let ninth = ninth.all().await;
    assert_eq!(text_of(&ninth), "And the ninth on its own.");
    assert_eq!(ninth.last().unwrap()["status"], "completed");

    let reqs = env.mock.requests();
    assert_eq!(reqs.len(), 3);
    let blocks: Vec<String> = steering_blocks(&reqs[1])
        .iter()
        .map(|b| b["message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        blocks,
        (1..=8).map(|i| format!("note {i}")).collect::<Vec<_>>()
    );
    assert_eq!(&roles(&reqs[1])[..3], ["user", "assistant", "tool"]);
    assert_eq!(mpa_test_support::last_user_text(&reqs[2]), "note 9");
    // None lost, none twice.
    let detail = env.wait_idle(&alice, "nine").await;
    let users: Vec<&str> = detail["display_messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["role"] == "user")
        .map(|l| l["content"].as_str().unwrap())
        .collect();
    let mut want = vec!["start".to_string()];
    want.extend((1..=9).map(|i| format!("note {i}")));
    assert_eq!(users, want);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_racing_the_turns_end_is_processed_exactly_once() {
    let env = Env::start().await;
    let alice = env.user("alice", "password", false).await;
    env.mock.set_responder(|req| {
        MockReply::text(&format!(
            "answer to {}",
            mpa_test_support::last_user_text(req)
        ))
    });
    let (mut steered, mut queued) = (0, 0);
    for i in 0..200 {
        let session = format!("race-{i}");
        let mut turn = Frames::new(
            env.stream(
                &alice,
                json!({"text": format!("turn {i}"), "session_id": session}),
            )
            .await,
        );
        turn.until("start").await;
        // Sent while the turn's only model call streams or has just ended: whichever side of
        // the turn's end it lands on, it is processed exactly once.
        let race = format!("race {i}");
        let r = env
            .stream(&alice, json!({"text": race, "session_id": session}))
            .await;
        let first = turn.all().await;
        let answer = Frames::new(r).all().await;
        let applied: Vec<&Value> = first.iter().filter(|f| f["type"] == "steering").collect();
        if answer[1]["type"] == "steering" {
            steered += 1;
            let id = queued_id(&answer);
            assert_eq!(applied.len(), 1, "{first:?}");
            assert_eq!(applied[0]["status"], "applied");
            assert_eq!(applied[0]["message_id"], id.as_str());
        } else {
            queued += 1;
            assert!(applied.is_empty(), "{first:?}");
            assert_eq!(answer.last().unwrap()["status"], "completed", "{answer:?}");
        }
        let detail = env.wait_idle(&alice, &session).await;
        let seen = detail["display_messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["role"] == "user" && l["content"] == race.as_str())
            .count();
        assert_eq!(seen, 1, "iteration {i}: {detail}");
    }
    eprintln!("200 races: {steered} joined the running turn, {queued} ran as their own turn");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn another_users_steering_attempt_is_refused_like_a_missing_session() {
    let (env, gate) = gated().await;
    let alice = env.user("alice", "password", false).await;
    let bob = env.user("bob", "password", false).await;
    let carol = env.user("carol", "password", true).await;
    let (_, me) = env.get(&alice, "/api/v1/me").await;
    let alice_id = me["id"].as_str().unwrap().to_string();
    env.mock.set_responder(|req| {
        let last = mpa_test_support::last_user_text(req);
        let text = req.to_string();
        if last == "alice's task" && !text.contains("call_gate") {
            gate_call()
        } else {
            MockReply::text(&format!("answer to {last}"))
        }
    });
    let mut turn = Frames::new(
        env.stream(
            &alice,
            json!({"text": "alice's task", "session_id": "mine"}),
        )
        .await,
    );
    turn.until("tool").await;

    // Bob naming alice's session: his own namespace, exactly like an id nobody used.
    let named = Frames::new(
        env.stream(&bob, json!({"text": "bob steering", "session_id": "mine"}))
            .await,
    )
    .all()
    .await;
    let fresh = Frames::new(
        env.stream(
            &bob,
            json!({"text": "bob fresh", "session_id": "never-used"}),
        )
        .await,
    )
    .all()
    .await;
    assert_eq!(types(&named), types(&fresh));
    assert_eq!(types(&named), ["start", "delta", "done"]);
    assert_eq!(text_of(&named), "answer to bob steering");
    // Naming alice as the owner, as a non-admin: the same 404 as a chat that does not exist.
    let as_owner = env
        .stream(
            &bob,
            json!({"text": "bob again", "session_id": "mine", "user_id": alice_id}),
        )
        .await;
    let missing = env
        .stream(
            &bob,
            json!({"text": "bob again", "session_id": "no-such", "user_id": alice_id}),
        )
        .await;
    assert_eq!(as_owner.status(), StatusCode::NOT_FOUND);
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let (a, b): (Value, Value) = (
        as_owner.json().await.unwrap(),
        missing.json().await.unwrap(),
    );
    assert_eq!(a, b);
    // An admin continuing alice's chat is another user: not steered into her turn, but queued
    // as a turn of its own after it.
    let admin = Frames::new(
        env.stream(
            &carol,
            json!({"text": "carol's note", "session_id": "mine", "user_id": alice_id}),
        )
        .await,
    );
    gate.add_permits(1);
    let rest = turn.until("done").await;
    assert!(rest.iter().all(|f| f["type"] != "steering"), "{rest:?}");
    let admin = admin.all().await;
    assert!(text_of(&admin).starts_with("answer to carol's note"));
    for req in env.mock.requests() {
        let s = req.to_string();
        if s.contains("alice's task") {
            assert!(!s.contains("bob"), "bob's text reached alice's chat: {s}");
            assert!(steering_blocks(&req).is_empty());
        }
    }
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_with_three_queued_messages_applies_none_and_says_so() {
    let (env, gate) = gated().await;
    let alice = env.user("alice", "password", false).await;
    env.mock.push(gate_call());
    env.mock.set_default(MockReply::text("after the stop"));
    let mut turn = Frames::new(
        env.stream(&alice, json!({"text": "long job", "session_id": "st"}))
            .await,
    );
    turn.until("tool").await;
    let mut ids = Vec::new();
    for i in 1..=3 {
        ids.push(queued_id(
            &steer(&env, &alice, "st", &format!("extra {i}")).await,
        ));
    }
    let (s, v) = env
        .send(
            reqwest::Method::POST,
            &alice,
            "/api/v1/agent/sessions/st/stop",
        )
        .await;
    assert_eq!((s, v), (StatusCode::OK, json!({"stopped": true})));
    let rest = turn.until("done").await;
    let said: Vec<(&str, &str)> = rest
        .iter()
        .filter(|f| f["type"] == "steering")
        .map(|f| {
            (
                f["status"].as_str().unwrap(),
                f["message_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        said,
        ids.iter()
            .map(|id| ("discarded", id.as_str()))
            .collect::<Vec<_>>()
    );
    assert_eq!(rest.last().unwrap()["status"], "stopped");
    // Nothing more went to the model, and nothing of them was stored.
    assert_eq!(env.mock.request_count(), 1);
    let detail = env.wait_idle(&alice, "st").await;
    assert!(
        !detail["display_messages"].to_string().contains("extra "),
        "{detail}"
    );
    // The next message is an ordinary turn again.
    let next = Frames::new(
        env.stream(&alice, json!({"text": "next", "session_id": "st"}))
            .await,
    )
    .all()
    .await;
    assert_eq!(text_of(&next), "after the stop");
    drop(gate);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openai_endpoint_steers_only_when_the_client_asks() {
    let (env, gate) = gated().await;
    let alice = env.user("alice", "password", false).await;
    env.mock.push(gate_call());
    env.mock.push(MockReply::text("done with the steer"));
    env.mock.push(MockReply::text("the queued one"));
    let completions = |body: Value| {
        env.http
            .post(env.url("/v1/chat/completions"))
            .bearer_auth(&alice)
            .header("x-session-id", "oa")
            .json(&body)
    };
    let running = tokio::spawn(
        completions(json!({"stream": true,
            "messages": [{"role": "user", "content": "start"}]}))
        .send(),
    );
    // The turn runs once its first model request is out.
    assert!(
        env.mock
            .wait_for_requests(1, std::time::Duration::from_secs(30))
            .await
    );
    let asked = completions(json!({"steer": true,
        "messages": [{"role": "user", "content": "steer me in"}]}))
    .send()
    .await
    .unwrap();
    assert_eq!(asked.status(), StatusCode::OK);
    assert_eq!(asked.headers()["x-session-id"], "oa");
    let asked: Value = asked.json().await.unwrap();
    assert_eq!(asked["object"], "chat.completion");
    assert_eq!(asked["choices"][0]["message"]["content"], "");
    assert_eq!(asked["steering"]["status"], "queued");
    let id = asked["steering"]["message_id"]
        .as_str()
        .unwrap()
        .to_string();
    // Not asked: waits behind the running turn, as before.
    let plain = tokio::spawn(
        completions(json!({"messages": [{"role": "user", "content": "plain one"}]})).send(),
    );
    gate.add_permits(1);
    let body = running.await.unwrap().unwrap().text().await.unwrap();
    let chunks: Vec<Value> = body
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(body.trim_end().ends_with("data: [DONE]"));
    let applied: Vec<&Value> = chunks
        .iter()
        .filter(|c| c.get("steering").is_some())
        .collect();
    assert_eq!(applied.len(), 1, "{chunks:?}");
    assert_eq!(applied[0]["steering"]["status"], "applied");
    assert_eq!(applied[0]["steering"]["message_id"], id.as_str());
    assert_eq!(applied[0]["choices"], json!([]));
    let plain: Value = plain.await.unwrap().unwrap().json().await.unwrap();
    assert_eq!(plain["choices"][0]["message"]["content"], "the queued one");
    let reqs = env.mock.requests();
    assert_eq!(steering_blocks(&reqs[1])[0]["message"], "steer me in");
    assert_eq!(mpa_test_support::last_user_text(&reqs[2]), "plain one");
    assert!(
        steering_blocks(&reqs[2]).len() == 1,
        "the steer stays in the chat"
    );
    env.shutdown().await;
}

/// The web stream's attachments travel with a steering message: the model gets the block (with
/// its image list) and the image itself; the saved chat counts the image on the user's line.
#[tokio::test(flavor = "multi_thread")]
async fn a_steering_message_keeps_its_images() {
    const PIXEL: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==";
    let (env, gate) = gated().await;
    let alice = env.user("alice", "password", false).await;
    env.mock.push(gate_call());
    env.mock.push(MockReply::text("That poster is the 4K one."));
    let mut turn = Frames::new(
        env.stream(
            &alice,
            json!({"text": "find the poster", "session_id": "img"}),
        )
        .await,
    );
    turn.until("tool").await;
    let ack = Frames::new(
        env.stream(
            &alice,
            json!({"text": "这张", "images": [PIXEL], "session_id": "img"}),
        )
        .await,
    )
    .all()
    .await;
    let id = queued_id(&ack);
    gate.add_permits(1);
    let rest = turn.until("done").await;
    assert_eq!(rest.last().unwrap()["status"], "completed", "{rest:?}");

    let reqs = env.mock.requests();
    assert_eq!(reqs.len(), 2);
    let last = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    let parts = last["content"].as_array().expect("text and image parts");
    let block: Value = serde_json::from_str(parts[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(block["message"], "这张");
    assert_eq!(block["input"]["steering_message_id"], id.as_str());
    assert_eq!(block["images"], json!([{"index": 1, "type": "image"}]));
    assert_eq!(parts[1]["type"], "image_url");
    assert_eq!(parts[1]["image_url"]["url"], PIXEL);

    let detail = env.wait_idle(&alice, "img").await;
    let line = detail["display_messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["steering_message_id"] == id.as_str())
        .cloned()
        .unwrap();
    assert_eq!(line["content"], "这张");
    assert_eq!(line["images"], 1);
    env.shutdown().await;
}
