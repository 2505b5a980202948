//! One integration-test binary for the crate (real `python3` processes, real Unix sockets).

mod common;
mod kernels;
