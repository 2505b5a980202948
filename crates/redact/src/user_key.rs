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

#[cfg(test)]
mod tests {
    use super::*;

    /// Data directories written before the key moved here (from `mpa-protocol`) are named by
    /// these: the derivation must never change a byte.
    #[test]
    fn keys_are_byte_identical_to_the_stored_ones() {
        for (id, key) in [
            ("42", "fab0a8e0dab62cfe3d8df37119958bde"),
            ("1", "1a055316bcf257d4cb75c1df7393ca1a"),
            ("alice", "cdd7afc5bcea5d8a77df841037c5780a"),
            ("system", "9a46ac033b90164c92038c64dfa92dfd"),
            ("", "542e2cdb8d53a84b7e78e9ed0291640c"),
            ("用户", "bc7d7b6d1e4273027117b78c6dbdc9e1"),
        ] {
            assert_eq!(UserKey::for_user(id).as_str(), key, "id {id:?}");
        }
    }

    #[test]
    fn user_key_is_stable_and_irreversible() {
        let k = UserKey::for_user("42");
        assert_eq!(k.as_str().len(), 32);
        assert_eq!(k, UserKey::for_user(&String::from("42")));
        assert_ne!(k, UserKey::for_user("43"));
        assert_eq!(serde_json::to_value(&k).unwrap(), k.as_str());
    }
}
