//! Login tokens. Only a hash of each token is stored (computed by the caller), so a copy of the
//! database grants no session; a token dies with its user (`ON DELETE CASCADE`).

use crate::users::{By, User, query_user};
use crate::{Result, Store, now, ts};
use chrono::{DateTime, Utc};
use mpa_protocol::UserId;
use rusqlite::{OptionalExtension, params};

/// What a token lookup found.
enum Lookup {
    Unknown,
    Expired,
    Valid(Option<User>),
}

impl Store {
    pub async fn insert_token(
        &self,
        token_hash: String,
        user: &UserId,
        expires_at: DateTime<Utc>,
    ) -> Result<()> {
        let user = user.0.clone();
        self.run(move |c| {
            c.execute(
                "INSERT INTO auth_tokens (token_hash, user_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
                params![token_hash, user, now(), expires_at.to_rfc3339()],
            )?;
            Ok(())
        })
        .await
    }

    /// The user owning an unexpired token. A read: it never waits for the writer (a long chat
    /// snapshot). An expired token is refused at once and deleted by the writer in its turn.
    pub async fn token_user(&self, token_hash: String) -> Result<Option<User>> {
        let hash = token_hash.clone();
        let found = self
            .read(move |c| {
                let row: Option<(String, String)> = c
                    .query_row(
                        "SELECT user_id, expires_at FROM auth_tokens WHERE token_hash = ?1",
                        params![hash],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()?;
                Ok(match row {
                    None => Lookup::Unknown,
                    Some((_, expires)) if ts(expires.clone())? <= Utc::now() => Lookup::Expired,
                    Some((user_id, _)) => Lookup::Valid(query_user(c, By::Id, &user_id)?),
                })
            })
            .await?;
        match found {
            Lookup::Valid(user) => Ok(user),
            Lookup::Unknown => Ok(None),
            Lookup::Expired => {
                self.run_later(move |c| {
                    c.execute(
                        "DELETE FROM auth_tokens WHERE token_hash = ?1",
                        params![token_hash],
                    )?;
                    Ok(())
                });
                Ok(None)
            }
        }
    }

    /// Deletes every login token of `user`; returns how many there were.
    pub async fn delete_user_tokens(&self, user: &UserId) -> Result<usize> {
        let user = user.0.clone();
        self.run(move |c| {
            Ok(c.execute("DELETE FROM auth_tokens WHERE user_id = ?1", params![user])?)
        })
        .await
    }

    pub async fn delete_token(&self, token_hash: String) -> Result<bool> {
        self.run(move |c| {
            Ok(c.execute(
                "DELETE FROM auth_tokens WHERE token_hash = ?1",
                params![token_hash],
            )? > 0)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;
    use chrono::Utc;

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
            Err(crate::StoreError::NoSuchUser(_))
        ));
    }
}
