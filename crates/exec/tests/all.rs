//! One integration-test binary for the crate: every module below was a test binary of its
//! own, and linking dominated the build (one binary, one link). Tests that need a process
//! of their own run again in a process of their own, spawned from this binary
//! (`mpa_test_support::in_own_process!`).

mod common;
mod danger;
mod launch;
mod no_zombies;
mod output_log;
mod processes;
mod reaper;
mod reports;
mod requests;
mod utf8_stream;
