//! Login tokens: expiry, revocation on a password change, a deleted user's tokens.

use chrono::Utc;
use mpa_store::Store;

#[tokio::test]
async fn expired_tokens_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let u = store.ensure_local_user("carol").await.unwrap();
    store
        .insert_token("h1".into(), &u.id, Utc::now() + chrono::Duration::hours(1))
        .await
        .unwrap();
    store
        .insert_token(
            "h2".into(),
            &u.id,
            Utc::now() - chrono::Duration::seconds(1),
        )
        .await
        .unwrap();
    assert_eq!(
        store.token_user("h1".into()).await.unwrap().unwrap().id,
        u.id
    );
    assert!(store.token_user("h2".into()).await.unwrap().is_none());
    assert!(store.delete_token("h1".into()).await.unwrap());
    assert!(store.token_user("h1".into()).await.unwrap().is_none());
}

#[tokio::test]
async fn a_password_change_revokes_tokens_unless_kept_and_a_deleted_user_keeps_none() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let u = store.ensure_local_user("dan").await.unwrap();
    let other = store.ensure_local_user("eve").await.unwrap();
    let later = Utc::now() + chrono::Duration::hours(1);
    for (h, who) in [("d1", &u.id), ("d2", &u.id), ("e1", &other.id)] {
        store.insert_token(h.into(), who, later).await.unwrap();
    }
    assert_eq!(
        store
            .set_password_hash(&u.id, "x".into(), false)
            .await
            .unwrap(),
        0
    );
    assert!(store.token_user("d1".into()).await.unwrap().is_some());
    assert_eq!(
        store
            .set_password_hash(&u.id, "y".into(), true)
            .await
            .unwrap(),
        2
    );
    assert!(store.token_user("d1".into()).await.unwrap().is_none());
    assert!(
        store.token_user("e1".into()).await.unwrap().is_some(),
        "others keep theirs"
    );

    store.insert_token("d3".into(), &u.id, later).await.unwrap();
    assert_eq!(store.delete_user_tokens(&u.id).await.unwrap(), 1);
    store.insert_token("d4".into(), &u.id, later).await.unwrap();
    assert!(store.delete_user(&u.id).await.unwrap());
    assert!(!store.delete_user(&u.id).await.unwrap());
    assert!(store.token_user("d4".into()).await.unwrap().is_none());
    assert!(store.user_by_id(&u.id).await.unwrap().is_none());
    assert!(matches!(
        store.set_password_hash(&u.id, "z".into(), true).await,
        Err(mpa_store::StoreError::NoSuchUser(_))
    ));
}
