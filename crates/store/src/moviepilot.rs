//! The MoviePilot identity of each account: the MoviePilot user it acts as (linked by an admin,
//! or adopted when signing in with MoviePilot) and that user's own sign-in token. The token is
//! stored only here (the database file is 0600) and never logged.

use crate::users::{By, User, query_user};
use crate::{Result, Store, StoreError, is_unique_violation};
use mpa_protocol::UserId;
use rusqlite::{OptionalExtension, params};

/// The MoviePilot user an account acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoviePilotLink {
    /// MoviePilot's user id (decimal, as in its tokens' `sub`).
    pub user_id: String,
    pub user_name: String,
}

impl Store {
    /// Links (or, with `None`, unlinks) an account; one MoviePilot user links to one account.
    pub async fn set_moviepilot_link(
        &self,
        user: &UserId,
        link: Option<MoviePilotLink>,
    ) -> Result<()> {
        let id = user.0.clone();
        self.run(move |c| {
            let (mp_id, mp_name) = match &link {
                Some(l) => (Some(l.user_id.clone()), Some(l.user_name.clone())),
                None => (None, None),
            };
            let changed = c
                .execute(
                    "UPDATE users SET moviepilot_user_id = ?1, moviepilot_user_name = ?2, \
                     moviepilot_token = NULL WHERE id = ?3",
                    params![mp_id, mp_name, id],
                )
                .map_err(|e| {
                    if is_unique_violation(&e) {
                        StoreError::NameTaken(format!(
                            "MoviePilot user {}",
                            link.as_ref().map_or("", |l| l.user_id.as_str())
                        ))
                    } else {
                        e.into()
                    }
                })?;
            if changed == 0 {
                return Err(StoreError::NoSuchUser(id));
            }
            Ok(())
        })
        .await
    }

    pub async fn moviepilot_link(&self, user: &UserId) -> Result<Option<MoviePilotLink>> {
        let id = user.0.clone();
        self.run(move |c| {
            let row: Option<(Option<String>, Option<String>)> = c
                .query_row(
                    "SELECT moviepilot_user_id, moviepilot_user_name FROM users WHERE id = ?1",
                    params![id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            Ok(match row {
                Some((Some(user_id), name)) => Some(MoviePilotLink {
                    user_name: name.unwrap_or_default(),
                    user_id,
                }),
                _ => None,
            })
        })
        .await
    }

    /// The account linked to MoviePilot user `mp_user_id`.
    pub async fn user_by_moviepilot_id(&self, mp_user_id: &str) -> Result<Option<User>> {
        let mp = mp_user_id.to_string();
        self.run(move |c| {
            let id: Option<String> = c
                .query_row(
                    "SELECT id FROM users WHERE moviepilot_user_id = ?1",
                    params![mp],
                    |r| r.get(0),
                )
                .optional()?;
            match id {
                Some(id) => query_user(c, By::Id, &id),
                None => Ok(None),
            }
        })
        .await
    }

    pub async fn set_moviepilot_token(&self, user: &UserId, token: Option<String>) -> Result<()> {
        let id = user.0.clone();
        self.run(move |c| {
            c.execute(
                "UPDATE users SET moviepilot_token = ?1 WHERE id = ?2",
                params![token, id],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn moviepilot_token(&self, user: &UserId) -> Result<Option<String>> {
        let id = user.0.clone();
        self.run(move |c| {
            Ok(c.query_row(
                "SELECT moviepilot_token FROM users WHERE id = ?1",
                params![id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten())
        })
        .await
    }
}
