//! Accounts: stable random ids, unique names, an optional password hash (computed by the caller;
//! this crate never sees a password).

use crate::{Result, Store, StoreError, is_unique_violation, now, ts};
use chrono::{DateTime, Utc};
use mpa_protocol::UserId;
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: UserId,
    pub name: String,
    pub is_admin: bool,
    #[serde(skip)]
    pub password_hash: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// Whether `name` can be a user name: 1-64 letters, digits, '.', '_', '-' or '@'.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= 64
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
}

fn checked_name(name: &str) -> Result<String> {
    if valid_name(name) {
        Ok(name.to_string())
    } else {
        Err(StoreError::InvalidName(name.to_string()))
    }
}

impl Store {
    pub async fn create_user(
        &self,
        name: &str,
        is_admin: bool,
        password_hash: Option<String>,
    ) -> Result<User> {
        let name = checked_name(name)?;
        self.run(move |c| insert_user(c, &name, is_admin, password_hash))
            .await
    }

    /// Returns the user named `name`, creating a non-admin local user on first use. Local CLI use is
    /// trusted: whoever can run the binary owns the data directory.
    pub async fn ensure_local_user(&self, name: &str) -> Result<User> {
        let name = checked_name(name)?;
        self.run(move |c| {
            if let Some(u) = query_user(c, By::Name, &name)? {
                return Ok(u);
            }
            insert_user(c, &name, false, None)
        })
        .await
    }

    pub async fn user_by_name(&self, name: &str) -> Result<Option<User>> {
        let name = name.to_string();
        self.read(move |c| query_user(c, By::Name, &name)).await
    }

    pub async fn user_by_id(&self, id: &UserId) -> Result<Option<User>> {
        let id = id.0.clone();
        self.read(move |c| query_user(c, By::Id, &id)).await
    }

    pub async fn list_users(&self) -> Result<Vec<User>> {
        self.read(|c| {
            let mut stmt = c.prepare(
                "SELECT id, name, is_admin, password_hash, created_at FROM users ORDER BY name",
            )?;
            let rows = stmt.query_map([], user_row)?;
            let mut out = Vec::new();
            for r in rows {
                out.push(finish_user(r?)?);
            }
            Ok(out)
        })
        .await
    }

    pub async fn rename_user(&self, id: &UserId, new_name: &str) -> Result<()> {
        let new_name = checked_name(new_name)?;
        let id = id.0.clone();
        self.run(move |c| {
            match c.execute(
                "UPDATE users SET name = ?1 WHERE id = ?2",
                params![new_name, id],
            ) {
                Ok(0) => Err(StoreError::NoSuchUser(id)),
                Ok(_) => Ok(()),
                Err(e) if is_unique_violation(&e) => Err(StoreError::NameTaken(new_name)),
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    /// Sets the password hash of `id`; with `revoke_tokens` its login tokens are deleted in the
    /// same transaction (so no token issued under the old password outlives the change). Returns
    /// how many tokens were revoked.
    pub async fn set_password_hash(
        &self,
        id: &UserId,
        hash: String,
        revoke_tokens: bool,
    ) -> Result<usize> {
        let id = id.0.clone();
        self.run(move |c| {
            let tx = c.transaction()?;
            if tx.execute(
                "UPDATE users SET password_hash = ?1 WHERE id = ?2",
                params![hash, id],
            )? == 0
            {
                return Err(StoreError::NoSuchUser(id));
            }
            let revoked = if revoke_tokens {
                tx.execute("DELETE FROM auth_tokens WHERE user_id = ?1", params![id])?
            } else {
                0
            };
            tx.commit()?;
            Ok(revoked)
        })
        .await
    }

    pub async fn set_admin(&self, id: &UserId, is_admin: bool) -> Result<()> {
        let id = id.0.clone();
        self.run(move |c| {
            match c.execute(
                "UPDATE users SET is_admin = ?1 WHERE id = ?2",
                params![is_admin, id],
            )? {
                0 => Err(StoreError::NoSuchUser(id)),
                _ => Ok(()),
            }
        })
        .await
    }

    /// Deletes the account and (by cascade) its login tokens. Its chats stay under its id, which
    /// is never reused, so no later account can see them. `false` when there was no such user.
    pub async fn delete_user(&self, id: &UserId) -> Result<bool> {
        let id = id.0.clone();
        self.run(move |c| Ok(c.execute("DELETE FROM users WHERE id = ?1", params![id])? > 0))
            .await
    }
}

type UserRow = (String, String, bool, Option<String>, String);

fn user_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<UserRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

fn finish_user((id, name, is_admin, password_hash, created): UserRow) -> Result<User> {
    Ok(User {
        id: UserId(id),
        name,
        is_admin,
        password_hash,
        created_at: ts(created)?,
    })
}

/// The column a user is looked up by.
#[derive(Clone, Copy)]
pub(crate) enum By {
    Id,
    Name,
}

pub(crate) fn query_user(c: &Connection, by: By, value: &str) -> Result<Option<User>> {
    let sql = match by {
        By::Id => "SELECT id, name, is_admin, password_hash, created_at FROM users WHERE id = ?1",
        By::Name => {
            "SELECT id, name, is_admin, password_hash, created_at FROM users WHERE name = ?1"
        }
    };
    c.query_row(sql, params![value], user_row)
        .optional()?
        .map(finish_user)
        .transpose()
}

pub(crate) fn insert_user(
    c: &Connection,
    name: &str,
    is_admin: bool,
    password_hash: Option<String>,
) -> Result<User> {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let created = now();
    match c.execute(
        "INSERT INTO users (id, name, is_admin, password_hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![id, name, is_admin, password_hash, created],
    ) {
        Ok(_) => {}
        Err(e) if is_unique_violation(&e) => return Err(StoreError::NameTaken(name.to_string())),
        Err(e) => return Err(e.into()),
    }
    finish_user((id, name.to_string(), is_admin, password_hash, created))
}
