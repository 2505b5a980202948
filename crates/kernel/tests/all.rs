//! One integration-test binary for the crate (real `python3` processes, real Unix sockets).
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

mod capture;
mod common;
mod helpers;
mod kernels;
mod rpc;
