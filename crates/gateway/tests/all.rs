//! One integration-test binary for the crate: every module below was a test binary of its
//! own, and linking dominated the build (one binary, one link). Tests that need a process
//! of their own run again in a process of their own, spawned from this binary
//! (`mpa_test_support::in_own_process!`).

mod answer;
mod catalogue;
mod client;
mod common;
mod contract;
mod env_proxy;
mod identity;
mod jwt;
mod openapi;
mod reconcile;
mod request;
mod route;
mod routes;
mod suggest;
mod validation;
