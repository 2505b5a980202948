//! Ownership is checked before a chat is read: `chat_owner` reads one column, so a session id can
//! be refused (or accepted) without loading — or failing to parse — another user's chat.

use mpa_protocol::UserId;
use mpa_store::Store;
use rusqlite::Connection;

#[tokio::test]
async fn the_owner_is_read_without_reading_the_chat() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let store = Store::open(&path).unwrap();
    let c = Connection::open(&path).unwrap();
    // A chat whose transcript no longer parses: reading it fails, its owner is still known.
    c.execute(
        "INSERT INTO chats (session_id, user_id, channel, title, agent_messages, display_messages, \
         message_count, created_at, updated_at) VALUES ('old-id', 'bob', 'web', 't', 'not json', \
         '[]', 1, '2025-01-02T03:04:05+00:00', '2025-01-02T03:04:05+00:00')",
        [],
    )
    .unwrap();
    assert!(store.chat("old-id").await.is_err());
    assert_eq!(
        store.chat_owner("old-id").await.unwrap(),
        Some(UserId("bob".into()))
    );
    assert_eq!(store.chat_owner("missing").await.unwrap(), None);
}
