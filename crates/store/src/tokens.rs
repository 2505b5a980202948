//! Login tokens. Only a hash of each token is stored (computed by the caller), so a copy of the
//! database grants no session; a token dies with its user (`ON DELETE CASCADE`).

use crate::users::{By, User, query_user};
use crate::{Result, Store, now, ts};
use chrono::{DateTime, Utc};
use mpa_protocol::UserId;
use rusqlite::{OptionalExtension, params};

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

    /// The user owning an unexpired token (expired tokens are deleted on sight).
    pub async fn token_user(&self, token_hash: String) -> Result<Option<User>> {
        self.run(move |c| {
            let row: Option<(String, String)> = c
                .query_row(
                    "SELECT user_id, expires_at FROM auth_tokens WHERE token_hash = ?1",
                    params![token_hash],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let Some((user_id, expires)) = row else {
                return Ok(None);
            };
            if ts(expires)? <= Utc::now() {
                c.execute(
                    "DELETE FROM auth_tokens WHERE token_hash = ?1",
                    params![token_hash],
                )?;
                return Ok(None);
            }
            query_user(c, By::Id, &user_id)
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
}
