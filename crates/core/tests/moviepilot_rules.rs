//! The business-rules layer of the host prompt (seed `agent.md`, 提示词与任务边界): present, as
//! one byte-stable block, exactly when the MoviePilot gateway is configured; its text is
//! snapshotted so a change to what the model is told is reviewed.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::{Gateway, mock_model, open_host};
use mpa_core::moviepilot::rules::BUSINESS_RULES;
use mpa_test_support::{MockModelServer, MockReply};
use std::time::Duration;

async fn system_prompts(gateway: bool, sessions: &[&str]) -> Vec<String> {
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    // Only configured, never called here: nothing listens on this port.
    let gateway = gateway.then(|| Gateway {
        url: "http://127.0.0.1:9".into(),
        secret: "k".into(),
        identity: None,
    });
    let host = open_host(dir.path(), mock_model(&mock), gateway).await;
    let actor = host.local_actor("alice", false).await.unwrap();
    for (i, s) in sessions.iter().enumerate() {
        mock.push(MockReply::text("ok"));
        let mut rx = host
            .agent()
            .submit(&actor, s, "cli", "你好".into(), vec![])
            .await
            .unwrap();
        while let Some(ev) = rx.recv().await {
            if matches!(ev, mpa_protocol::Event::TurnEnded { .. }) {
                break;
            }
        }
        assert!(mock.wait_for_requests(i + 1, Duration::from_secs(30)).await);
    }
    mock.requests()
        .iter()
        .map(|r| r["messages"][0]["content"].as_str().unwrap().to_string())
        .collect()
}

fn rules_block(prompt: &str) -> Option<&str> {
    let start = prompt.find("<moviepilot_rules>")?;
    let end = prompt.find("</moviepilot_rules>")? + "</moviepilot_rules>".len();
    Some(&prompt[start..end])
}

#[test]
fn business_rules_layer() {
    insta::assert_snapshot!("business_rules_layer", BUSINESS_RULES);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rules_are_one_stable_layer_only_with_the_gateway() {
    let with = system_prompts(true, &["s1", "s2"]).await;
    assert_eq!(with.len(), 2);
    for p in &with {
        assert_eq!(rules_block(p), Some(BUSINESS_RULES), "{p}");
        assert_eq!(p.matches("<moviepilot_rules>").count(), 1);
    }
    let without = system_prompts(false, &["s1"]).await;
    assert_eq!(rules_block(&without[0]), None, "{}", without[0]);
}
