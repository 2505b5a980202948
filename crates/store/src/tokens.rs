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

    /// Deletes every login token of `user` and returns their hashes (so a later request with one
    /// can be told why it no longer works).
    pub async fn take_user_tokens(&self, user: &UserId) -> Result<Vec<String>> {
        let user = user.0.clone();
        self.run(move |c| {
            let mut stmt =
                c.prepare("DELETE FROM auth_tokens WHERE user_id = ?1 RETURNING token_hash")?;
            let hashes = stmt
                .query_map(params![user], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(hashes)
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
