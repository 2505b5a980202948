//! Chat snapshots and the turn journal that follows them.

use chrono::Utc;
use mpa_protocol::{Message, UserId};
use mpa_store::{Chat, Store, StoreError, TurnJournal};

fn chat(sid: &str, user: &UserId) -> Chat {
    Chat {
        session_id: sid.into(),
        user_id: user.clone(),
        channel: "cli".into(),
        title: "t".into(),
        agent_messages: vec![Message::user("hello")],
        display_messages: serde_json::json!([{"role": "user", "content": "hello"}]),
        message_count: 1,
        session_state: serde_json::json!({"frozen_memory": "m", "review": {"turns": 3}}),
        turn_status: None,
        created_at: Utc::now(),
        updated_at: Utc::now(),
    }
}

#[tokio::test]
async fn a_turn_journal_follows_the_full_snapshot_until_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let u = store.ensure_local_user("a").await.unwrap();
    store.save_chat(chat("s1", &u.id)).await.unwrap();
    let journal = TurnJournal {
        messages: vec![Message::user("step"), Message::assistant("partial", vec![])],
        display: vec![serde_json::json!({"role": "user", "content": "step"})],
    };
    let state = serde_json::json!({"review": {"turns": 4}});
    // The base must be exactly what the full snapshot holds.
    assert!(
        !store
            .update_turn_journal("s1", 2, &journal, &state, Utc::now())
            .await
            .unwrap()
    );
    assert!(
        !store
            .update_turn_journal("missing", 0, &journal, &state, Utc::now())
            .await
            .unwrap()
    );
    assert!(
        store
            .update_turn_journal("s1", 1, &journal, &state, Utc::now())
            .await
            .unwrap()
    );
    let got = store.chat("s1").await.unwrap().unwrap();
    let texts: Vec<String> = got.agent_messages.iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["hello", "step", "partial"]);
    assert_eq!(got.message_count, 3);
    assert_eq!(got.display_messages.as_array().unwrap().len(), 2);
    assert_eq!(got.session_state, state);
    // A full snapshot replaces the journal.
    store.save_chat(chat("s1", &u.id)).await.unwrap();
    let got = store.chat("s1").await.unwrap().unwrap();
    assert_eq!(got.agent_messages.len(), 1);
    // A first save with a journal: the base and the journal at once.
    store
        .save_chat_with_journal(chat("s2", &u.id), &journal)
        .await
        .unwrap();
    assert_eq!(
        store
            .chat("s2")
            .await
            .unwrap()
            .unwrap()
            .agent_messages
            .len(),
        3
    );
}

#[tokio::test]
async fn chat_snapshot_roundtrip_keeps_owner_and_created_at() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let u = store.ensure_local_user("bob").await.unwrap();
    let c1 = chat("s1", &u.id);
    store.save_chat(c1.clone()).await.unwrap();
    let mut c2 = c1.clone();
    c2.user_id = UserId("someone-else".into());
    c2.message_count = 2;
    c2.session_state = serde_json::json!({"review": {"turns": 4}});
    store.save_chat(c2).await.unwrap();
    let got = store.chat("s1").await.unwrap().unwrap();
    assert_eq!(got.user_id, u.id);
    assert_eq!(got.message_count, 2);
    assert_eq!(got.agent_messages, c1.agent_messages);
    assert_eq!(
        got.session_state,
        serde_json::json!({"review": {"turns": 4}})
    );
    assert_eq!(store.list_chats(Some(&u.id), 1, 30).await.unwrap().len(), 1);
    assert!(store.delete_chat("s1").await.unwrap());
    assert!(store.chat("s1").await.unwrap().is_none());
}

#[tokio::test]
async fn a_session_state_that_is_not_an_object_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let u = store.ensure_local_user("bob").await.unwrap();
    let mut c = chat("s1", &u.id);
    c.session_state = serde_json::json!(["not", "an", "object"]);
    assert!(matches!(
        store.save_chat(c).await,
        Err(StoreError::SessionStateNotObject)
    ));
    assert!(store.chat("s1").await.unwrap().is_none());
}

#[test]
fn a_chat_serialised_without_session_state_reads_back_with_an_empty_object() {
    let mut v = serde_json::to_value(chat("s1", &UserId("u".into()))).unwrap();
    v.as_object_mut().unwrap().remove("session_state");
    let back: Chat = serde_json::from_value(v).unwrap();
    assert_eq!(back.session_state, serde_json::json!({}));
}
