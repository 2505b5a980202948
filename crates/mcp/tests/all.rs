//! The crate's one integration-test binary.

mod config;
mod http_client;
