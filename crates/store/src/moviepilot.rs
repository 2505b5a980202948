//! The MoviePilot identity of each account: the MoviePilot user it acts as (linked by an admin,
//! or adopted when signing in with MoviePilot) and that user's own sign-in token. The token is
//! stored only here (the database file is 0600), never logged, and never in a chat, an error or
//! evidence.

use crate::users::{By, User, insert_user, query_user, valid_name};
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

/// What MoviePilot's sign-in said about a user.
#[derive(Clone, PartialEq, Eq)]
pub struct MoviePilotSignIn {
    /// MoviePilot's user id (decimal): the identity, unchanged by renames.
    pub user_id: String,
    pub user_name: String,
    pub super_user: bool,
    /// The user's own MoviePilot token.
    pub token: String,
}

impl std::fmt::Debug for MoviePilotSignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MoviePilotSignIn")
            .field("user_id", &self.user_id)
            .field("user_name", &self.user_name)
            .field("super_user", &self.super_user)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// The host name for a MoviePilot user name: characters a host name cannot have become `_`,
/// at most 64 characters; an empty result falls back to `mp<ID>`.
pub fn host_name_for(mp_name: &str, mp_id: &str) -> String {
    let cleaned: String = mp_name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '@') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if valid_name(&cleaned) && cleaned.chars().any(|c| c != '_') {
        cleaned
    } else {
        format!("mp{mp_id}")
    }
}

/// `name` with `-mp<ID>` appended, kept within 64 characters.
fn disambiguated(name: &str, mp_id: &str) -> String {
    let suffix = format!("-mp{mp_id}");
    let keep = 64usize.saturating_sub(suffix.chars().count());
    let mut out: String = name.chars().take(keep).collect();
    out.push_str(&suffix);
    out
}

fn name_free(c: &rusqlite::Connection, name: &str, except: Option<&str>) -> Result<bool> {
    let owner: Option<String> = c
        .query_row("SELECT id FROM users WHERE name = ?1", params![name], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(match owner {
        None => true,
        Some(id) => except == Some(id.as_str()),
    })
}

impl Store {
    /// The account of a MoviePilot user who just signed in, in one transaction: found by the
    /// MoviePilot user id (so a rename in MoviePilot keeps the same account and data), else
    /// created. Its admin flag becomes MoviePilot's superuser flag and the token is stored. The
    /// name follows MoviePilot's when it is free; an unrelated account of that name is never
    /// taken over (the new account is then `NAME-mp<ID>`; an administrator can link an existing
    /// local account beforehand with `mpagent user link`).
    pub async fn adopt_moviepilot_user(&self, s: MoviePilotSignIn) -> Result<User> {
        if s.user_id.is_empty() || !s.user_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(StoreError::InvalidName(format!(
                "MoviePilot user id {:?}",
                s.user_id
            )));
        }
        self.run(move |c| {
            let tx = c.transaction()?;
            let wanted = host_name_for(&s.user_name, &s.user_id);
            let existing: Option<String> = tx
                .query_row(
                    "SELECT id FROM users WHERE moviepilot_user_id = ?1",
                    params![s.user_id],
                    |r| r.get(0),
                )
                .optional()?;
            let id = match existing {
                Some(id) => {
                    let current: String = tx.query_row(
                        "SELECT name FROM users WHERE id = ?1",
                        params![id],
                        |r| r.get(0),
                    )?;
                    // Follow a rename in MoviePilot when the new name is free here.
                    if current != wanted && name_free(&tx, &wanted, Some(&id))? {
                        tx.execute(
                            "UPDATE users SET name = ?1 WHERE id = ?2",
                            params![wanted, id],
                        )?;
                    }
                    id
                }
                None => {
                    let name = if name_free(&tx, &wanted, None)? {
                        wanted
                    } else {
                        disambiguated(&wanted, &s.user_id)
                    };
                    insert_user(&tx, &name, s.super_user, None)?.id.0
                }
            };
            tx.execute(
                "UPDATE users SET is_admin = ?1, moviepilot_user_id = ?2, moviepilot_user_name = ?3, \
                 moviepilot_token = ?4 WHERE id = ?5",
                params![s.super_user, s.user_id, s.user_name, s.token, id],
            )?;
            let user = query_user(&tx, By::Id, &id)?.ok_or(StoreError::NoSuchUser(id))?;
            tx.commit()?;
            Ok(user)
        })
        .await
    }

    /// Links (or, with `None`, unlinks) an account; one MoviePilot user links to one account.
    pub async fn set_moviepilot_link(
        &self,
        user: &UserId,
        link: Option<MoviePilotLink>,
    ) -> Result<()> {
        let id = user.0.clone();
        self.run(move |c| set_link(c, &id, link.as_ref())).await
    }

    /// Creates an account already linked to a MoviePilot user, in one transaction: a name or a
    /// link that is taken creates nothing.
    pub async fn create_linked_user(
        &self,
        name: &str,
        is_admin: bool,
        password_hash: Option<String>,
        link: MoviePilotLink,
    ) -> Result<User> {
        if !crate::users::valid_name(name) {
            return Err(StoreError::InvalidName(name.to_string()));
        }
        let name = name.to_string();
        self.run(move |c| {
            let tx = c.transaction()?;
            let user = crate::users::insert_user(&tx, &name, is_admin, password_hash)?;
            set_link(&tx, &user.id.0, Some(&link))?;
            tx.commit()?;
            Ok(user)
        })
        .await
    }

    pub async fn moviepilot_link(&self, user: &UserId) -> Result<Option<MoviePilotLink>> {
        let id = user.0.clone();
        self.read(move |c| {
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
        self.read(move |c| {
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
        self.read(move |c| {
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

/// Sets or clears one account's link; a MoviePilot user linked elsewhere names that account.
fn set_link(c: &rusqlite::Connection, id: &str, link: Option<&MoviePilotLink>) -> Result<()> {
    let (mp_id, mp_name) = match link {
        Some(l) => (Some(l.user_id.as_str()), Some(l.user_name.as_str())),
        None => (None, None),
    };
    let changed = match c.execute(
        "UPDATE users SET moviepilot_user_id = ?1, moviepilot_user_name = ?2, \
         moviepilot_token = NULL WHERE id = ?3",
        params![mp_id, mp_name, id],
    ) {
        Ok(n) => n,
        Err(e) if is_unique_violation(&e) => {
            let mp = mp_id.unwrap_or_default().to_string();
            let account: Option<String> = c
                .query_row(
                    "SELECT name FROM users WHERE moviepilot_user_id = ?1",
                    params![mp],
                    |r| r.get(0),
                )
                .optional()?;
            return Err(StoreError::AlreadyLinked {
                moviepilot_user: mp,
                account: account.unwrap_or_else(|| "another account".into()),
            });
        }
        Err(e) => return Err(e.into()),
    };
    if changed == 0 {
        return Err(StoreError::NoSuchUser(id.to_string()));
    }
    Ok(())
}
