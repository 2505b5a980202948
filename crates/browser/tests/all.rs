//! One integration-test binary for the crate (see the workspace's tests layout).

mod common;
mod egress;
mod navigation;
