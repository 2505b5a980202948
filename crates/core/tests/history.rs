//! The evidence history through the `session_search` tool's JSON (moved here from mpa-history
//! when the tool moved to core): query language and modes, store rules, backfill and recovery,
//! legacy imports, integrity checks, the mixed-corpus recall test and the query fuzzer. Each
//! module is one former test file; they share one binary to keep link time down.
#![expect(clippy::unwrap_used, reason = "test assertions")]

pub mod backfill;
pub mod check;
pub mod common;
pub mod fuzz;
pub mod legacy_import;
pub mod recall;
pub mod search;
pub mod store;
