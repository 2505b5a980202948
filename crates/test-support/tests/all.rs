//! One integration-test binary for the crate: every module below was a test binary of its
//! own, and linking dominated the build (one binary, one link). Tests that need a process
//! of their own run again in a process of their own (`in_own_process!`). The leaf crates
//! `mpa-protocol` and `mpa-redact` have no test binary: their tests are modules here.

mod doubles;
mod floors;
mod mock_server;
mod protocol_data;
mod redaction;
