//! kill -9 of `mpagent serve` while a MoviePilot write is in flight (the fake MoviePilot holds the
//! request): the chat snapshot written before the call keeps every message up to it with the call
//! marked "result unknown"; after a restart the ledger row is `unknown` under a new claim token,
//! `get_tool_execution` says so, the next "继续" sees the call, the notice and the open receipt,
//! and nothing is sent to MoviePilot again — not even when the model retries the same write.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's panic is its failure report"
)]

use mpa_eval::{FakeConfig, FakeHandle, FakeMoviePilot, Fault, StateFile, WorldState};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncReadExt, BufReader};
use tokio::process::Command;

use crate::common::{self, Serve, chat_messages, next_frame, request};

const SECRET: &str = "fake-moviepilot-secret";
const PASSWORD: &str = "alice-password-1";
const MAGNET: &str = "magnet:?xt=urn:btih:0123456789abcdef0123456789abcdef01234567&dn=Three.Body";

fn download_add() -> Value {
    json!({"operation_id": "download.add", "body": {
        "torrent_in": {"title": "Three Body S01", "enclosure": MAGNET},
        "media_source": "themoviedb", "media_id": "204541"}})
}

fn world() -> WorldState {
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/../../eval/worlds/demo.json");
    StateFile::load(std::path::Path::new(demo)).unwrap().state
}

fn mpagent(data: &Path, mock: &MockModelServer, fake: &FakeHandle) -> Command {
    let mut c = common::mpagent(data, mock);
    c.env("MPA_LISTEN", "127.0.0.1:0")
        .env("MPA_LOG", "info")
        .env("MOVIEPILOT_URL", fake.url())
        .env("MOVIEPILOT_SECRET_KEY", SECRET);
    c
}

async fn serve(data: &Path, mock: &MockModelServer, fake: &FakeHandle) -> Serve {
    common::serve(mpagent(data, mock, fake)).await
}

/// Starts a turn over the streaming endpoint.
async fn stream(addr: &str, token: &str, text: &str) -> BufReader<tokio::net::TcpStream> {
    request(
        addr,
        "POST",
        "/api/v1/agent/stream",
        token,
        &json!({"text": text, "session_id": "crash"}),
    )
    .await
}

async fn login(addr: &str) -> String {
    let mut r = request(
        addr,
        "POST",
        "/api/v1/login",
        "none",
        &json!({"username": "alice", "password": PASSWORD}),
    )
    .await;
    let mut raw = String::new();
    r.read_to_string(&mut raw).await.unwrap();
    let body: Value = serde_json::from_str(raw.split_once("\r\n\r\n").unwrap().1).unwrap();
    body["token"].as_str().expect("login token").to_string()
}

/// The ledger rows of a session: (invocation_id, status, claim_token).
fn rows(data: &Path, session: &str) -> Vec<(String, String, String)> {
    let c = rusqlite::Connection::open(data.join("agent.db")).unwrap();
    let mut st = c
        .prepare(
            "SELECT invocation_id, status, claim_token FROM agent_invocations \
             WHERE session_id = ?1 ORDER BY id",
        )
        .unwrap();
    st.query_map([session], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn posts(fake: &FakeHandle) -> usize {
    fake.ledger()
        .iter()
        .filter(|a| a.operation_id.as_deref() == Some("download.add"))
        .count()
}

/// The text of a request message (string or parts).
fn text_of(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_during_an_in_flight_write_leaves_unknown_and_nothing_is_resent() {
    let fake = FakeMoviePilot::start(FakeConfig::new(SECRET), world())
        .await
        .unwrap();
    // MoviePilot takes the request and never answers it.
    fake.add_fault(
        serde_json::from_value::<Fault>(
            json!({"operation": "download.add", "action": {"kind": "stall"}}),
        )
        .unwrap(),
    );
    let mock = MockModelServer::start().await;
    mock.push(MockReply::text_and_tool_calls(
        "Adding the download.",
        &[("call_dl", "moviepilot_api", download_add())],
    ));
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();

    // alice, linked to the fake's user 2.
    common::add_user(mpagent(data, &mock, &fake), "alice", PASSWORD).await;
    let alice_id = {
        let store = mpa_store::Store::open_in(data).unwrap();
        let alice = store.user_by_name("alice").await.unwrap().unwrap();
        store
            .set_moviepilot_link(
                &alice.id,
                Some(mpa_store::MoviePilotLink {
                    user_id: "2".into(),
                    user_name: "alice".into(),
                }),
            )
            .await
            .unwrap();
        alice.id
    };
    // The chat and its receipts live under the id derived for alice's "crash".
    let crash = mpa_core::server_session_id(&alice_id, "crash");

    let mut srv = serve(data, &mock, &fake).await;
    let token = login(&srv.addr).await;
    let mut r = stream(&srv.addr, &token, "download Three Body S01").await;
    loop {
        let f = next_frame(&mut r).await.expect("stream ended early");
        if f["type"] == "tool" && f["tool_id"] == "call_dl" && f["status"] == "running" {
            break;
        }
    }
    // The request reached MoviePilot and is held there.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while posts(&fake) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the write never reached the fake"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    common::send_signal(&srv.child, libc::SIGKILL);
    let status = tokio::time::timeout(Duration::from_secs(10), srv.child.wait())
        .await
        .expect("serve survived SIGKILL")
        .unwrap();
    assert!(!status.success());
    drop(r);

    // What the killed process left: a running claim, and the snapshot written before the call.
    let before = rows(data, &crash);
    assert_eq!(before.len(), 1, "{before:?}");
    let (invocation_id, status, old_token) = before[0].clone();
    assert_eq!(status, "running");
    let msgs = chat_messages(data, &crash);
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant"],
        "{msgs:#?}"
    );
    assert_eq!(msgs[0]["content"], "download Three Body S01");
    assert_eq!(msgs[1]["content"], "Adding the download.");
    assert_eq!(msgs[1]["tool_calls"][0]["id"], "call_dl");
    assert_eq!(msgs[2]["tool_call_id"], "call_dl");
    assert_eq!(msgs[2]["outcome"], "unknown");
    assert!(
        text_of(&msgs[2]).contains("result unknown"),
        "{:?}",
        msgs[2]
    );
    assert_eq!(msgs[3]["metadata"]["moviepilot_recovery"], true);

    // Restart: the running row becomes unknown under a new token; nothing is replayed.
    mock.push(MockReply::tool_calls(&[(
        "call_retry",
        "moviepilot_api",
        download_add(),
    )]));
    mock.push(MockReply::text(
        "The earlier download may or may not have been added; I did not add it again.",
    ));
    let mut srv = serve(data, &mock, &fake).await;
    let after = rows(data, &crash);
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].0, invocation_id);
    assert_eq!(after[0].1, "unknown");
    assert_ne!(after[0].2, old_token, "a fresh claim token");
    assert!(
        srv.stderr
            .lock()
            .unwrap()
            .contains("writes interrupted by an earlier stop are now recorded as unknown"),
        "the cold start says what it did"
    );

    // get_tool_execution (the same user and session) reports unknown.
    let mut cmd = mpagent(data, &mock, &fake);
    cmd.args([
        "tool",
        "get_tool_execution",
        "--user",
        "alice",
        "--session",
        &crash,
        "--args",
        &json!({"invocation_id": invocation_id}).to_string(),
    ]);
    let out = cmd.output().await.unwrap();
    let found: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(found["success"], true, "{found}");
    assert_eq!(found["execution_status"], "unknown");

    // "继续": the model sees the conversation, the unknown result and the open receipt; its
    // retry of the same write is answered from the record and never sent.
    let requests_before = mock.request_count();
    let token = login(&srv.addr).await;
    let mut r = stream(&srv.addr, &token, "继续").await;
    let mut frames = Vec::new();
    while let Some(f) = next_frame(&mut r).await {
        frames.push(f);
    }
    assert_eq!(frames.last().unwrap()["type"], "done", "{frames:#?}");
    let retry = frames
        .iter()
        .find(|f| f["tool_id"] == "call_retry" && f["status"] != "running")
        .expect("the retry's result");
    assert_eq!(retry["outcome"], "unknown", "{retry}");
    assert_eq!(posts(&fake), 1, "nothing was sent to MoviePilot again");

    let sent = &mock.requests()[requests_before];
    let messages = sent["messages"].as_array().unwrap();
    let texts: Vec<String> = messages.iter().map(text_of).collect();
    assert!(
        texts.iter().any(|t| t.contains("download Three Body S01")),
        "{texts:#?}"
    );
    let unknown_result = messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_dl")
        .expect("the call's result is in the request");
    assert!(text_of(unknown_result).contains("result unknown"));
    let notice = texts
        .iter()
        .find(|t| t.contains("did not finish"))
        .expect("the recovery notice is in the request");
    assert!(
        notice.contains(&invocation_id) && notice.contains("unknown"),
        "{notice}"
    );
    assert_eq!(texts.last().unwrap().split("\n\n").next(), Some("继续"));
    let system = texts[0].clone();
    assert!(
        system.contains("get_tool_execution") && system.contains("result unknown"),
        "the host prompt says how to handle a missing receipt"
    );

    // The recovery form is history now: continued, no longer hidden from a running turn's page.
    let saved = chat_messages(data, &crash);
    assert_eq!(saved[2]["metadata"]["moviepilot_recovery"], "continued");
    assert_eq!(saved[3]["metadata"]["moviepilot_recovery"], "continued");
    assert!(text_of(&saved[3]).contains(&invocation_id));

    // The receipt stays unknown (the model cannot resolve it by retrying).
    let last = rows(data, &crash);
    assert_eq!(last.len(), 1, "{last:?}");
    assert_eq!(last[0].1, "unknown");
    srv.child.start_kill().unwrap();
    let _ = srv.child.wait().await;
}
