//! Local users: stable ids, unique names.

use mpa_store::{Store, StoreError};

#[tokio::test]
async fn users_have_stable_ids_across_renames_and_names_are_unique() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let alice = store.create_user("alice", false, None).await.unwrap();
    assert!(matches!(
        store.create_user("alice", true, None).await,
        Err(StoreError::NameTaken(_))
    ));
    store.rename_user(&alice.id, "alice2").await.unwrap();
    let again = store.user_by_name("alice2").await.unwrap().unwrap();
    assert_eq!(again.id, alice.id);
    // A re-used name is a new user with a new id.
    let newcomer = store.ensure_local_user("alice").await.unwrap();
    assert_ne!(newcomer.id, alice.id);
    assert!(matches!(
        store.create_user("../x", false, None).await,
        Err(StoreError::InvalidName(_))
    ));
}
