//! One integration-test binary for the crate: every module below was a test binary of its
//! own, and linking dominated the build (one binary, one link). Tests that need a process
//! of their own stay separate targets (see Cargo.toml).

mod adopted_context;
mod attachments;
mod bad_input;
mod common;
mod compacted_display;
mod extract;
mod http;
mod locale;
mod login_limits;
mod markdown;
mod message_limits;
mod openai;
mod plan_panel;
mod session_api;
mod session_ids;
mod settings;
mod slow_clients;
mod sse;
mod steering;
mod storage_failures;
mod turn_status;
mod web_page;
mod web_tool_lines;
