//! Regression (issue 24, item 3): with the data directory on a 2 MiB tmpfs, 13 turns all ended
//! `done: completed` with no error frame while the log said `chat snapshot not saved … database or
//! disk is full`, and after a restart 10 of the 13 were gone. A turn whose snapshot or journal
//! cannot be written now ends `failed` with a `storage_full` (or `storage_error`) frame in the
//! user's language; the session keeps the turn in memory and saves it with its next write.
//!
//! The disk is a real tmpfs when this process may mount one (root); otherwise the failure is
//! injected by holding the main database's write lock from another connection, which fails the
//! host's writes with `SQLITE_BUSY` — a `storage_error` instead of `storage_full`. The test says
//! which it ran.

#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common;

use common::*;
use mpa_test_support::MockReply;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What keeps the host from writing.
enum Squeeze {
    /// A small tmpfs mounted on the data directory; the filler takes its free space.
    Tmpfs { filler: PathBuf },
    /// Another connection holding the database's write lock.
    Lock(rusqlite::Connection),
}

impl Squeeze {
    fn mount(dir: &Path) -> bool {
        std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Takes (nearly) all the room the host writes to.
    fn apply(dir: &Path, mounted: bool) -> Squeeze {
        if mounted {
            let (available, _) = mpa_core::disk::space(dir).unwrap();
            let filler = dir.join("filler");
            // A few pages are left: enough for nothing the size of a turn.
            std::fs::write(
                &filler,
                vec![0u8; available.saturating_sub(16 * 1024) as usize],
            )
            .unwrap();
            return Squeeze::Tmpfs { filler };
        }
        let c = rusqlite::Connection::open(dir.join("agent.db")).unwrap();
        c.execute_batch("BEGIN EXCLUSIVE").unwrap();
        Squeeze::Lock(c)
    }

    /// Gives the room back.
    fn release(self) {
        match self {
            Squeeze::Tmpfs { filler, .. } => std::fs::remove_file(filler).unwrap(),
            Squeeze::Lock(c) => c.execute_batch("ROLLBACK").unwrap(),
        }
    }

    fn code(mounted: bool) -> &'static str {
        if mounted {
            "storage_full"
        } else {
            "storage_error"
        }
    }
}

/// Unmounts the tmpfs when the test ends, however it ends (lazily: the host may still hold
/// files open).
struct Unmount(Option<PathBuf>);

impl Drop for Unmount {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(p)
                .status();
            let _ = std::fs::remove_dir(p);
        }
    }
}

async fn turn(env: &Env, token: &str, text: &str) -> Vec<Value> {
    Frames::new(
        env.stream(token, json!({"text": text, "session_id": "disk"}))
            .await,
    )
    .all()
    .await
}

/// The stored conversation of the session, read from the database file (what a restart loads).
fn stored_texts(env: &Env) -> String {
    env.chat_rows()
        .into_iter()
        .map(|r| r.2)
        .collect::<Vec<_>>()
        .join("\n")
}

fn unsaved(frames: &[Value], mounted: bool) {
    let errors: Vec<&Value> = frames.iter().filter(|f| f["type"] == "error").collect();
    assert_eq!(errors.len(), 1, "{frames:?}");
    assert_eq!(errors[0]["code"], Squeeze::code(mounted), "{frames:?}");
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("本轮对话未能保存"),
        "in the user's language: {frames:?}"
    );
    assert_eq!(frames.last().unwrap()["status"], "failed", "{frames:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_that_cannot_be_saved_ends_failed_and_is_saved_when_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mounted = Squeeze::mount(dir.path());
    let _unmount = Unmount(mounted.then(|| dir.path().to_path_buf()));
    eprintln!(
        "storage failure by {}",
        if mounted {
            "a full 4 MiB tmpfs"
        } else {
            "an injected write lock (mounting a tmpfs is not permitted here)"
        }
    );
    // The free-space floor would refuse these turns before they start; the write path is tested.
    let env = Env::start_in(dir, |cfg| cfg.min_free_bytes = 0).await;
    let token = env.user("alice", "password", false).await;
    // The mock squeezes the disk while it answers when asked to (the turn's first snapshot is
    // written by then; the one after the answer is not).
    let data = env.dir.path().to_path_buf();
    let during_call: Arc<Mutex<Option<Squeeze>>> = Arc::default();
    let squeeze_next = Arc::new(AtomicBool::new(false));
    let (slot, flag) = (Arc::clone(&during_call), Arc::clone(&squeeze_next));
    env.mock.set_responder(move |_| {
        if flag.swap(false, Ordering::SeqCst) {
            *slot.lock().unwrap() = Some(Squeeze::apply(&data, mounted));
        }
        MockReply::text("noted")
    });
    let first = turn(&env, &token, "first: 请记住我喜欢科幻片").await;
    assert_eq!(first.last().unwrap()["status"], "completed");
    env.wait_idle(&token, "disk").await;

    // The disk is full before the turn: nothing is sent to the model, nothing acknowledged.
    let requests = env.mock.request_count();
    let squeeze = Squeeze::apply(env.dir.path(), mounted);
    let marker = "second-turn-marker";
    let text = format!("{marker}: 还要记住我喜欢 4K 片源 {}", "长".repeat(30_000));
    let frames = turn(&env, &token, &text).await;
    unsaved(&frames, mounted);
    assert_eq!(env.mock.request_count(), requests, "no model call");
    assert!(!stored_texts(&env).contains(marker), "not stored");
    squeeze.release();

    // The disk fills while the model answers: the answer streams, but the turn is not
    // acknowledged (no "completed" for what was not stored).
    squeeze_next.store(true, Ordering::SeqCst);
    let frames = turn(&env, &token, "third: 今天有什么新片？").await;
    assert_eq!(text_of(&frames), "noted");
    unsaved(&frames, mounted);
    assert!(
        !stored_texts(&env).contains("third: 今天有什么新片"),
        "not stored"
    );
    // Not over the OpenAI endpoint either, even with an answer.
    let r = env
        .http
        .post(env.url("/v1/chat/completions"))
        .bearer_auth(&token)
        .header("x-session-id", "disk")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "fourth: 还在吗"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), if mounted { 507 } else { 500 });
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], Squeeze::code(mounted), "{v}");
    during_call.lock().unwrap().take().unwrap().release();

    // Space returns: the next turn saves every one of them, and a restart (the file) has them.
    let last = turn(&env, &token, "fifth: any news?").await;
    assert_eq!(last.last().unwrap()["status"], "completed", "{last:?}");
    env.wait_idle(&token, "disk").await;
    let stored = stored_texts(&env);
    for t in [
        "first: 请记住",
        marker,
        "third: 今天有什么新片",
        "fourth: 还在吗",
        "fifth: any news?",
    ] {
        assert!(stored.contains(t), "{t} is stored");
    }
    env.shutdown().await;
}
