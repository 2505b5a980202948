//! Steering from the terminal (issue 28): in `mpagent chat`'s REPL, a line typed while a turn
//! streams joins that turn at its next model call. The turn waits on a real command reading a
//! FIFO the test writes to, so "mid-turn" is a fact, not a timing.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::{chat_messages, mpagent};

const WAIT: Duration = Duration::from_secs(60);

/// Reads lines until one contains `needle`; fails the test when the stream ends or `WAIT`
/// passes first.
async fn line_with<R: tokio::io::AsyncBufRead + Unpin>(
    lines: &mut tokio::io::Lines<R>,
    needle: &str,
    seen: &mut String,
) {
    tokio::time::timeout(WAIT, async {
        while let Some(l) = lines.next_line().await.unwrap() {
            seen.push_str(&l);
            seen.push('\n');
            if l.contains(needle) {
                return;
            }
        }
        panic!("no line with {needle:?}: {seen}");
    })
    .await
    .unwrap_or_else(|_| panic!("no line with {needle:?} in time: {seen}"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_line_typed_mid_turn_in_the_repl_reaches_the_next_model_request() {
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("release.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let command = format!("cat {}", fifo.display());
    mock.push(MockReply::tool_calls(&[(
        "call_wait",
        "execute_command",
        json!({"action": "run", "command": command}),
    )]));
    mock.push(MockReply::text("Understood: only 4K."));
    let mut cmd = mpagent(dir.path(), &mock);
    cmd.args(["chat", "--user", "root", "--admin", "--session", "repl"])
        .stdin(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
    let (mut seen_out, mut seen_err) = (String::new(), String::new());

    stdin.write_all(b"list the new releases\n").await.unwrap();
    line_with(&mut out, "running", &mut seen_out).await;
    // Typed while the command runs: it joins the running turn.
    stdin.write_all(b"only 4K please\n").await.unwrap();
    line_with(&mut err, "(queued", &mut seen_err).await;
    let release = fifo.clone();
    tokio::task::spawn_blocking(move || std::fs::write(release, b"go\n"))
        .await
        .unwrap()
        .unwrap();
    line_with(
        &mut err,
        "(added to the running task: only 4K please)",
        &mut seen_err,
    )
    .await;
    line_with(&mut out, "Understood: only 4K.", &mut seen_out).await;
    drop(stdin);
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("the REPL ends at the end of its input")
        .unwrap();
    assert!(status.success(), "{seen_out}\n{seen_err}");

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    let messages = reqs[1]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages[1..]
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user"]);
    let block: Value =
        serde_json::from_str(messages.last().unwrap()["content"].as_str().unwrap()).unwrap();
    assert_eq!(block["message"], "only 4K please");
    assert_eq!(block["input"]["steering"], true);
    assert!(!reqs[0].to_string().contains("only 4K please"));
    // Stored in the chat with its id, where it joined.
    let msgs = chat_messages(dir.path(), "repl");
    let steering = &msgs[3];
    assert_eq!(steering["role"], "user");
    assert_eq!(
        steering["metadata"]["moviepilot_steering_message_id"],
        block["input"]["steering_message_id"]
    );
}
