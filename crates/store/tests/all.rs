//! One integration-test binary for the crate: every module below was a test binary of its
//! own, and linking dominated the build (one binary, one link). Tests that need a process
//! of their own stay separate targets (see Cargo.toml).

mod chat_owner;
mod chats;
mod concurrency;
mod ledger;
mod migrations;
mod moviepilot;
mod tokens;
mod users;
