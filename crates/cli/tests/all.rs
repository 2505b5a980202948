//! One integration-test binary for the crate: every module below was a test binary of its
//! own, and linking dominated the build (one binary, one link). Tests that need a process
//! of their own run again in a process of their own, spawned from this binary
//! (`mpa_test_support::in_own_process!`).

mod chat_e2e;
mod common;
mod crash_recovery;
mod doctor;
mod eval_cli;
mod eval_regressions;
mod history_cli;
mod history_serve;
mod legacy_cli;
mod mcp_cli;
mod moviepilot_chat;
mod moviepilot_serve;
mod serve_e2e;
mod steering_cli;
mod tool_lines;
