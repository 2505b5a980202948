//! One integration-test binary for the crate: every module below was a test binary of its
//! own, and linking dominated the build (one binary, one link). Tests that need a process
//! of their own stay separate targets (see Cargo.toml).

mod assembly;
mod catalogue;
mod chunk;
mod classify;
mod client;
mod client_config;
mod common;
mod completion;
mod decoder;
mod error;
mod estimate;
mod llama_cpp_server;
mod local_servers;
mod output_limit;
mod recorded_streams;
mod sse;
mod tokens;
mod wire;
