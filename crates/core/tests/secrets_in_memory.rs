//! Regression (issue 24, item 7): "my OpenAI key sk-…" typed in a chat was redacted in the
//! messages but saved verbatim by the `memory` tool to `MEMORY.md`, and from there went into the
//! frozen system prompt of every later session, stored in `chats.session_state` and
//! `chat_journals` (56 hits across 7 files). Now memory and skill writes refuse a credential with
//! a clear message, and what memory shows the model (the frozen prompt, echoed entries) is
//! redacted, so a key saved by an older version stops there too.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::TestHost;
use mpa_core::capability::{Learning, Recall};
use mpa_core::{Agent, Capabilities};
use mpa_protocol::{Actor, Event, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const OPENAI_KEY: &str = "sk-proj-Q3vT9xLmN4pR7sK2wY8zA1bC5dE6fG0h";
/// What an older version saved to the user's MEMORY.md before writes were checked.
const OLD_TOKEN: &str = "ghp_R2d2C3poBb8Yoda4LukeLeia5HanSolo77";

struct Env {
    data: PathBuf,
    agent: Agent,
    actor: Actor,
    _host: TestHost,
}

async fn env(mock: &MockModelServer) -> Env {
    let host = TestHost::builder(mock, "gpt-4o")
        .user("mei")
        .diagnostic_tools(false)
        .config(|c| {
            c.memory_review_interval = 0;
            c.skill_review_interval = 0;
        })
        .caps(|data| {
            Capabilities::default()
                .with(Learning::new(
                    mpa_learning::Memory::new(mpa_learning::MemoryConfig::new(data.to_path_buf())),
                    mpa_learning::Skills::new(data.to_path_buf()),
                ))
                .with(Recall::new(mpa_history::History::new(
                    mpa_history::HistoryConfig::new(data),
                )))
        })
        .build()
        .await;
    Env {
        data: host.data.clone(),
        agent: host.agent.clone(),
        actor: host.actor.clone(),
        _host: host,
    }
}

impl Env {
    async fn turn(&self, session: &str, text: &str) -> (TurnStatus, Vec<Event>) {
        let mut rx = self
            .agent
            .submit(&self.actor, session, "test", text.into(), vec![])
            .await
            .unwrap();
        let mut events = Vec::new();
        while let Some(ev) = rx.recv().await {
            if let Event::TurnEnded { status, .. } = ev {
                return (status, events);
            }
            events.push(ev);
        }
        panic!("no TurnEnded");
    }

    fn user_memory(&self) -> PathBuf {
        self.data
            .join("agent/memory/users")
            .join(mpa_redact::UserKey::for_user(&self.actor.user_id).as_str())
            .join("MEMORY.md")
    }
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(files_containing(&p, needle));
        } else if std::fs::read(&p)
            .unwrap()
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
        {
            out.push(p);
        }
    }
    out
}

fn tool_result<'a>(req: &'a Value, call_id: &str) -> &'a str {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_told_in_chat_never_reaches_memory_or_the_frozen_prompt() {
    let mock = MockModelServer::start().await;
    let e = env(&mock).await;
    std::fs::create_dir_all(e.user_memory().parent().unwrap()).unwrap();
    std::fs::write(
        e.user_memory(),
        format!("Downloader is qBittorrent on the NAS\n§\nGitHub token for MoviePilot plugins: {OLD_TOKEN}\n"),
    )
    .unwrap();

    // The model tries to keep the key: in memory, and in a personal skill.
    let skill = format!(
        "---\nname: openai-setup\ndescription: How the user's OpenAI access is set up\n---\nUse the key {OPENAI_KEY} for the LLM settings.\n"
    );
    mock.push(MockReply::tool_calls(&[
        (
            "m1",
            "memory",
            json!({"action": "add", "target": "memory", "content": format!("User's OpenAI key: {OPENAI_KEY}")}),
        ),
        (
            "s1",
            "skill_manage",
            json!({"operations": [{"action": "create", "name": "openai-setup", "content": skill}]}),
        ),
    ]));
    mock.push(MockReply::text("I will not store the key itself."));
    let (status, _) = e
        .turn(
            "a",
            &format!("my OpenAI key is {OPENAI_KEY}, remember it for next time"),
        )
        .await;
    assert_eq!(status, TurnStatus::Completed);
    let reqs = mock.requests();
    // Both writes were refused with a clear message that names the kind, never the value.
    for call in ["m1", "s1"] {
        let result = tool_result(&reqs[1], call);
        let v: Value = serde_json::from_str(result).unwrap();
        assert_eq!(v["success"], false, "{call}: {result}");
        assert!(result.contains("credential"), "{call}: {result}");
        assert!(result.contains("api_key"), "{call}: {result}");
        assert!(!result.contains(OPENAI_KEY), "{call}: {result}");
    }
    // The frozen prompt of that session did not carry the older key either.
    assert!(
        !reqs[0].to_string().contains(OLD_TOKEN),
        "the snapshot is redacted"
    );

    // A new session: its frozen prompt holds memory, redacted.
    mock.push(MockReply::text("Hello again."));
    let (status, _) = e.turn("b", "hello").await;
    assert_eq!(status, TurnStatus::Completed);
    let system = mock.requests()[2]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("Downloader is qBittorrent on the NAS"),
        "{system}"
    );
    assert!(system.contains("[REDACTED:api_key]"), "{system}");
    assert!(!system.contains(OLD_TOKEN) && !system.contains(OPENAI_KEY));

    // Nothing the host keeps holds the new key; the old one stays only where the user put it.
    for h in ["a", "b"] {
        let live = e.agent.live(h).unwrap();
        assert!(live.wait_idle(std::time::Duration::from_secs(30)).await);
    }
    e.agent.shutdown().await;
    assert_eq!(files_containing(&e.data, OPENAI_KEY), Vec::<PathBuf>::new());
    assert_eq!(files_containing(&e.data, OLD_TOKEN), vec![e.user_memory()]);
}
