//! Secrets are redacted once, at capture (evidence history, chat snapshots, plans), with the
//! evidence store's single-pass redactor, so every copy the host keeps is scrubbed the same way.

pub use mpa_history::redact;
