//! `check` / `check --repair`: a deliberately corrupted FTS shadow table is detected and rebuilt
//! from the message rows with zero message loss.

use super::common::SessionSearchExt;
use mpa_history::{CapturedMessage, History, HistoryConfig, Provenance, Role, SessionMeta};
use mpa_protocol::UserId;
use mpa_redact::UserKey;
use serde_json::json;

fn msg(i: usize, text: &str) -> CapturedMessage {
    CapturedMessage {
        message_uid: format!("m{i}"),
        role: if i.is_multiple_of(2) {
            Role::User
        } else {
            Role::Assistant
        },
        content: text.to_string(),
        tool_name: None,
        tool_call_id: None,
        tool_calls: None,
        ts: None,
        provenance: Provenance::Observed,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupted_fts_index_is_detected_and_rebuilt_without_losing_messages() {
    let dir = tempfile::tempdir().unwrap();
    let hub = History::new(HistoryConfig::new(dir.path()));
    let user = UserKey::for_user(&UserId("checker".into()));
    let msgs: Vec<CapturedMessage> = (0..60)
        .map(|i| {
            msg(
                i,
                &format!("Interstellar 星际穿越 download number {i} finished"),
            )
        })
        .collect();
    let meta = SessionMeta {
        session_id: "s1".into(),
        source: "cli".into(),
        ..Default::default()
    };
    hub.append(&user, meta, msgs).await.unwrap();
    let healthy = hub.check(&user, false).await.unwrap();
    assert!(healthy.healthy(), "{healthy:?}");
    assert_eq!(healthy.messages, 60);

    // Corrupt the unicode61 index's largest data block.
    {
        let c = rusqlite::Connection::open(hub.db_path(&user)).unwrap();
        c.execute(
            "UPDATE messages_fts_data SET block = zeroblob(length(block)) \
             WHERE id = (SELECT max(id) FROM messages_fts_data)",
            [],
        )
        .unwrap();
    }
    let broken = hub.check(&user, false).await.unwrap();
    assert!(!broken.healthy());
    let fts = &broken.indexes[0];
    assert_eq!(fts.index, "messages_fts");
    assert!(!fts.ok && fts.error.is_some() && !fts.rebuilt, "{fts:?}");
    assert!(broken.indexes[1].ok && broken.indexes[2].ok);

    let repaired = hub.check(&user, true).await.unwrap();
    assert!(
        repaired.indexes[0].rebuilt && repaired.indexes[0].ok,
        "{repaired:?}"
    );
    assert_eq!(repaired.messages, 60, "no message lost");
    assert!(hub.check(&user, false).await.unwrap().healthy());
    let found = hub
        .session_search(&user, &Default::default(), json!({"query": "Interstellar"}))
        .await;
    assert_eq!(found["success"], true, "{found}");
    assert!(found.to_string().contains("s1"));
}
