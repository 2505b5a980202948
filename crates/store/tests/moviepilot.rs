//! MoviePilot sign-ins: one account per MoviePilot user, across renames.

use mpa_store::{MoviePilotLink, MoviePilotSignIn, Store, StoreError};

fn sign_in(id: &str, name: &str, super_user: bool, token: &str) -> MoviePilotSignIn {
    MoviePilotSignIn {
        user_id: id.into(),
        user_name: name.into(),
        super_user,
        token: token.into(),
    }
}

#[tokio::test]
async fn a_moviepilot_user_keeps_one_account_across_renames_and_takes_over_nobody() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    // A local account that happens to share the MoviePilot name is not taken over.
    let local = store.create_user("alice", true, None).await.unwrap();
    let a = store
        .adopt_moviepilot_user(sign_in("2", "alice", false, "t1"))
        .await
        .unwrap();
    assert_ne!(a.id, local.id);
    assert_eq!((a.name.as_str(), a.is_admin), ("alice-mp2", false));
    assert_eq!(
        store.moviepilot_token(&a.id).await.unwrap().as_deref(),
        Some("t1")
    );
    assert_eq!(store.moviepilot_token(&local.id).await.unwrap(), None);
    // Renamed in MoviePilot and made a superuser: same account, new name, new flag, new token.
    let b = store
        .adopt_moviepilot_user(sign_in("2", "alice smith", true, "t2"))
        .await
        .unwrap();
    assert_eq!(b.id, a.id);
    assert_eq!((b.name.as_str(), b.is_admin), ("alice_smith", true));
    assert_eq!(
        store.moviepilot_token(&b.id).await.unwrap().as_deref(),
        Some("t2")
    );
    let link = store.moviepilot_link(&b.id).await.unwrap().unwrap();
    assert_eq!(
        (link.user_id.as_str(), link.user_name.as_str()),
        ("2", "alice smith")
    );
    // An account an admin linked beforehand is the one a sign-in finds.
    store
        .set_moviepilot_link(
            &local.id,
            Some(MoviePilotLink {
                user_id: "7".into(),
                user_name: "carol".into(),
            }),
        )
        .await
        .unwrap();
    let c = store
        .adopt_moviepilot_user(sign_in("7", "carol", false, "t3"))
        .await
        .unwrap();
    assert_eq!(c.id, local.id);
    assert_eq!((c.name.as_str(), c.is_admin), ("carol", false));
    // Names no account can have fall back to the id.
    let d = store
        .adopt_moviepilot_user(sign_in("9", "///", false, "t4"))
        .await
        .unwrap();
    assert_eq!(d.name, "mp9");
    assert!(matches!(
        store
            .adopt_moviepilot_user(sign_in("x1", "eve", false, "t5"))
            .await,
        Err(StoreError::InvalidName(_))
    ));
    assert!(!format!("{:?}", sign_in("1", "a", false, "secret-token")).contains("secret-token"));
}
