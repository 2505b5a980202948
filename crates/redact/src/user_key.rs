//! A user's pseudonym on disk: every per-user directory and file is named after it, never after
//! the user's id or name. Irreversible, and stable for the life of the user (renames never
//! change it) — existing data directories are keyed by these exact bytes.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// Directory-safe, irreversible key for a user's files: the first 32 hex chars of SHA-256 of
/// `"mpa-user:" + stable id`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserKey(String);

impl UserKey {
    /// The key of the user whose stable id (`mpa_protocol::UserId`) is `id`.
    pub fn for_user(id: &(impl AsRef<str> + ?Sized)) -> Self {
        let digest = Sha256::digest(format!("mpa-user:{}", id.as_ref()).as_bytes());
        let mut hex = hex::encode(digest);
        hex.truncate(32);
        Self(hex)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UserKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
