//! What the host keeps must not reveal: secrets (redacted) and who a user is (pseudonymised).
//! A leaf crate (no workspace dependency), so every crate that keeps or shows text may use the
//! same rules: the evidence history and chat snapshots (at capture), the model client's error
//! messages, MoviePilot results before the model sees them, and every per-user file's name.
//!
//! Public API:
//! - [`redact`]: text rules — bearer and `Authorization` credentials, cookies, JWTs, PEM private
//!   keys, known API-key shapes, passwords in URLs, passwords told in a sentence (English and
//!   Chinese), and `key=value` / JSON fields named after a secret — each replaced by a stable
//!   `[REDACTED:<kind>]` marker. One linear-time pass (the `regex` crate never backtracks).
//! - [`redact_known`]: the same, after replacing secrets the caller knows verbatim (the model
//!   client's own API key).
//! - [`redact_secrets`] / [`is_secret_key`] / [`REDACTED`]: rules for a JSON *value* (a
//!   MoviePilot result): values of credential keys and setting rows become [`REDACTED`], form
//!   descriptors of credential fields stay readable, and every other string goes through the
//!   text rules.
//! - [`UserKey`]: a user's irreversible on-disk name, derived from the stable user id.
//!
//! Invariants:
//! - Redacting twice changes nothing more (a stored line and a live one read the same).
//! - Counts and limits named after a secret word (`max_tokens`, `token_count`, `passkey_expire`)
//!   and ordinary sentences about passwords are left alone.
//! - Nothing here logs or keeps what it removed.
//! - [`UserKey::for_user`] never changes a byte: data directories are named by it.

mod text;
mod user_key;
mod value;

pub use text::{KnownSecret, redact, redact_known};
pub use user_key::UserKey;
pub use value::{REDACTED, is_secret_key, redact_secrets};
