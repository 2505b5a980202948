//! One integration-test binary for the crate: every module below was a test binary of its
//! own, and linking dominated the build (one binary, one link). Tests that need a process
//! of their own stay separate targets (see Cargo.toml).

mod answer;
mod catalog;
mod compare;
mod delivery;
mod fake_moviepilot;
mod faults;
mod magnet;
mod matcher;
mod model_tap;
mod oracle_world;
mod recorded;
mod scenario_files;
mod scripted_model;
mod steering;
mod trajectory;
