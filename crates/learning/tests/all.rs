//! One integration-test binary for the crate: every module below was a test binary of its
//! own, and linking dominated the build (one binary, one link). Tests that need a process
//! of their own stay separate targets (see Cargo.toml).

mod difflib_parity;
mod memory_api;
mod memory_entries;
mod memory_snapshot;
mod patch_matcher;
mod skills_api;
mod skills_crash_recovery;
mod skills_validate;
mod threat;
