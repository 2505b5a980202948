//! One integration-test binary for the crate: every module below was a test binary of its
//! own, and linking dominated the build (one binary, one link). Tests that need a process
//! of their own stay separate targets (see Cargo.toml). The history's domain tests live here
//! and use the typed API; the `session_search` tool's arguments and JSON are mpa-core's.

mod backfill;
mod budget;
mod cancellation;
mod check;
mod common;
mod corpus;
mod deadline;
mod fuzz;
mod health;
mod legacy_import;
mod query;
mod rank;
mod recall;
mod recall_at_scale;
mod search;
mod store;
mod store_registry;
mod tokenizer;
