//! One integration-test binary for the crate: every module below was a test binary of its
//! own, and linking dominated the build (one binary, one link). Tests that need a process
//! of their own stay separate targets (see Cargo.toml).

mod accounts_standing;
mod architecture;
mod common;
mod context_budget;
mod context_compaction;
mod context_discovery;
mod context_results;
mod extending;
mod guardrails;
mod honest_endings;
mod llama_cpp_turn;
mod mcp;
mod moviepilot_rules;
mod moviepilot_server;
mod regressions;
mod review;
mod secret_read;
mod secrets_in_memory;
mod session;
mod session_search;
mod subagent_lifecycle;
mod subagents;
mod tool_browse_webpage;
mod tool_execute_code;
mod tool_execute_command;
mod tool_memory;
mod tool_moviepilot_api;
mod tool_skills;
mod tool_specs;
mod tool_visibility;
mod turn_status;
mod vision;
mod write_ledger;
