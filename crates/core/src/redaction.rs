//! Secrets are redacted once, at capture (evidence history, chat snapshots, plans), with
//! `mpa-redact`'s single-pass text rules — the ones the evidence store applies — so every copy
//! the host keeps is scrubbed the same way.

pub use mpa_redact::redact;
