//! The evidence history inside a running `mpagent serve`: a runaway `session_search` neither
//! outlives its answer nor holds up SIGTERM, and a damaged history file shows in `/healthz`
//! (logged once, not once a turn) while turns keep completing. Real process, real sockets, the
//! mock model server.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's panic is its failure report"
)]

use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::AsyncReadExt;

use crate::common;
use common::{ADMIN_TOKEN, Serve, chat_messages, next_frame, request, serve_command};

/// The admin token's own history file (its user is `admin-token`).
fn admin_history(data: &Path) -> PathBuf {
    let key = mpa_core::UserKey::for_user(&mpa_protocol::UserId("admin-token".into()));
    data.join("agent/runtime/history/users")
        .join(key.as_str())
        .join("state.db")
}

/// Starts a turn in `session` and returns the response stream.
async fn turn(
    srv: &Serve,
    session: &str,
    text: &str,
) -> tokio::io::BufReader<tokio::net::TcpStream> {
    request(
        &srv.addr,
        "POST",
        "/api/v1/agent/stream",
        ADMIN_TOKEN,
        &json!({"text": text, "session_id": session}),
    )
    .await
}

/// Reads frames until `done` (30 s at most); returns them.
async fn until_done(r: &mut tokio::io::BufReader<tokio::net::TcpStream>) -> Vec<Value> {
    tokio::time::timeout(Duration::from_secs(30), async {
        let mut frames = Vec::new();
        while let Some(f) = next_frame(r).await {
            let done = f["type"] == "done";
            frames.push(f);
            if done {
                return frames;
            }
        }
        panic!("the stream ended without done: {frames:?}")
    })
    .await
    .expect("the turn did not finish in 30 s")
}

/// CPU ticks (user + system) a process has used so far.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

async fn get_json(addr: &str, path: &str) -> Value {
    let mut r = request(addr, "GET", path, ADMIN_TOKEN, &json!({})).await;
    let mut raw = String::new();
    r.read_to_string(&mut raw).await.unwrap();
    let body = raw.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {raw}"))
}

/// Regression (issue 24, "session_search outruns its deadline"): a stored message of 3,000
/// repeated words and a 201-term OR query used to run for hours in one step SQLite's deadline
/// never saw, keep a core busy after the tool gave up, and make the host ignore SIGTERM for
/// minutes. Now the search answers (`query_too_complex`), nothing keeps running after the
/// answer, and SIGTERM during the turn ends the process within 5 s.
#[tokio::test(flavor = "multi_thread")]
async fn session_search_outruns_its_deadline_sigterm_during_the_turn_exits_within_5s() {
    let mock = MockModelServer::start().await;
    mock.push(MockReply::text("noted"));
    let query = vec!["a"; 201].join(" OR ");
    mock.push(MockReply::tool_calls(&[
        ("call_search", "session_search", json!({"query": query})),
        ("call_sleep", "test_sleep", json!({"ms": 600_000})),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let mut srv = common::serve(serve_command(dir.path(), &mock)).await;
    let words = vec!["a"; 3000].join(" ");
    until_done(&mut turn(&srv, "one", &words).await).await;

    let mut r = turn(&srv, "two", "what did I say before?").await;
    tokio::time::timeout(Duration::from_secs(30), async {
        let (mut searched, mut sleeping) = (false, false);
        while !(searched && sleeping) {
            let f = next_frame(&mut r).await.expect("stream ended early");
            if f["type"] == "tool" {
                // A failed search (`query_too_complex`) ends with status `error`.
                searched |= f["tool_id"] == "call_search" && f["status"] != "running";
                sleeping |= f["tool_id"] == "call_sleep" && f["status"] == "running";
            }
        }
    })
    .await
    .expect("session_search did not answer within 30 s");

    // The search answered; the turn now only waits for the sleeping tool: the process is idle.
    let pid = srv.child.id().unwrap();
    let before = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let used = cpu_ticks(pid) - before;
    assert!(
        used <= 10,
        "{used} ticks of CPU in the second after the answer"
    );

    common::send_signal(&srv.child, libc::SIGTERM);
    let status = tokio::time::timeout(Duration::from_secs(5), srv.child.wait())
        .await
        .expect("serve did not exit within 5 s of SIGTERM")
        .unwrap();
    assert!(status.success(), "exit status {status:?}");

    let stored = mpa_core::server_session_id(&mpa_protocol::UserId("admin-token".into()), "two");
    let msgs = chat_messages(dir.path(), &stored);
    let result = msgs
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_search")
        .expect("the search's result is stored");
    let content = result["content"].as_str().unwrap_or_default();
    assert!(content.contains("query_too_complex"), "{content}");
}

/// Regression (issue 24, "a truncated history file is reported as `cjk_unicode61: FTS5
/// unavailable` and evidence then silently stops being recorded, one WARN per turn"): with the
/// file really truncated, turns still complete, `/healthz` says the history is degraded, and
/// the log has one line for that user, not one per turn.
#[tokio::test(flavor = "multi_thread")]
async fn truncated_history_file_shows_in_healthz_and_is_logged_once_not_per_turn() {
    let mock = MockModelServer::start().await;
    for i in 0..4 {
        mock.push(MockReply::text(&format!("answer {i}")));
    }
    let dir = tempfile::tempdir().unwrap();
    let mut srv = common::serve(serve_command(dir.path(), &mock)).await;
    let long = "evidence worth keeping ".repeat(4000);
    until_done(&mut turn(&srv, "one", &long).await).await;
    common::send_signal(&srv.child, libc::SIGTERM);
    srv.child.wait().await.unwrap();

    let db = admin_history(dir.path());
    let intact = std::fs::read(&db).unwrap();
    assert!(intact.len() > 64 * 1024, "{}", intact.len());
    std::fs::write(&db, &intact[..intact.len() / 2]).unwrap();

    let mut srv = common::serve(serve_command(dir.path(), &mock)).await;
    let mut health = get_json(&srv.addr, "/healthz").await;
    assert!(health["disk"].is_object(), "{health}");
    health.as_object_mut().unwrap().remove("disk");
    assert_eq!(
        health,
        json!({"status": "ok", "history": {"status": "ok", "stores_unavailable": 0}})
    );
    for session in ["two", "three", "four"] {
        let frames = until_done(&mut turn(&srv, session, "hello again").await).await;
        assert!(
            frames.iter().any(|f| f["type"] == "delta"),
            "the turn still answers: {frames:?}"
        );
    }
    let health = get_json(&srv.addr, "/healthz").await;
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["history"]["status"], "degraded", "{health}");
    assert_eq!(health["history"]["stores_unavailable"], 1, "{health}");
    assert!(
        health["history"]["reason"]
            .as_str()
            .unwrap()
            .contains("damaged"),
        "{health}"
    );
    common::send_signal(&srv.child, libc::SIGTERM);
    srv.child.wait().await.unwrap();
    let log = srv.stderr.lock().unwrap().clone();
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("history storage unavailable"))
            .count(),
        1,
        "one line for the user, not one per turn or step: {log}"
    );
    assert!(!log.contains("evidence not captured"), "{log}");
    assert!(!log.contains("FTS5 unavailable"), "{log}");
}
