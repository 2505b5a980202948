//! The agent runtime of moviepilot-agent.
//!
//! Public API:
//! - [`Agent`]: shared services (model client, main store, tool registry) and the live session
//!   actors; [`Agent::accounts`] is the [`Accounts`] facade (users, passwords, tokens, login) that
//!   front ends use instead of the store. [`Agent::session`] loads or creates a session for an [`Actor`](mpa_protocol::Actor)
//!   (another user's session is "not found"); [`SessionHandle::submit`] queues a turn and returns
//!   that turn's [`Event`](mpa_protocol::Event) stream; [`SessionHandle::stop`] stops it;
//!   [`Agent::run_tool`] runs one tool exactly as a turn would; [`Agent::shutdown`] stops all turns
//!   and waits for their snapshots.
//! - [`tools`]: the typed tool registry ([`tools::TypedTool`], [`tools::ToolRegistry`], the
//!   layered [`tools::registry::Tools`]), the call-gate chain ([`tools::gate`]) and the built-in
//!   tools; [`capability`]: capability lifecycles, [`capability::standard`] registers them;
//!   [`handle::AgentHandle`]: what a tool may do with the agent that called it.
//! - [`eval::run_task`]: one evaluation task through a fresh host (the harness's subject).
//!
//! Invariants: every tool call gets exactly one result message; a stop dispatches no further tool
//! call and answers unfinished calls "result unknown: interrupted"; a timeout is `unknown`, never
//! "nothing happened"; the chat snapshot is written at the end of every turn, stopped or not.

pub mod accounts;
pub(crate) mod admission;
pub(crate) mod agent;
pub mod capability;
pub mod code;
pub(crate) mod config;
pub mod disk;
pub(crate) mod error;
pub mod eval;
pub mod eyes;
pub mod file_boundary;
pub mod handle;
pub(crate) mod heap;
pub mod history;
pub(crate) mod host;
pub mod mcp;
pub mod moviepilot;
pub mod net_guard;
pub(crate) mod outcome;
pub(crate) mod plan;
pub(crate) mod prompt;
pub mod redaction;
pub mod result_cap;
pub mod retention;
pub mod review;
pub(crate) mod services;
pub mod session;
pub mod subagent;
pub(crate) mod sync;
pub mod tools;
pub mod transcript;
pub mod turn;
pub mod vision;
pub mod web;

pub use accounts::{Account, Accounts, AccountsConfig, IssuedToken, Tokens};
pub use agent::{
    Agent, AgentBuilder, MAX_CLIENT_SESSION_ID, SessionRef, SessionScope, client_session_id,
    new_session_id, server_session_id, valid_session_id,
};
pub use config::AgentConfig;
pub use error::{CoreError, Result};
pub use host::{BrowserHostConfig, Host, HostConfig, MoviePilotHostConfig};
pub use mpa_redact::UserKey;
pub use mpa_store::{Chat, ChatSummary};
pub use prompt::SUMMARY_PROMPT;
pub use services::Services;

/// What front ends configure the model client with (they depend on `mpa-core` alone).
pub mod model {
    pub use mpa_model::{DEFAULT_MAX_OUTPUT_TOKENS, ModelConfig, effective_max_output_tokens};
}

/// Makes this process a child subreaper and starts reaping adopted orphans, so a killed process
/// tree never leaves zombies (call once, at start, from the binary).
pub fn become_subreaper() -> std::io::Result<()> {
    mpa_exec::become_subreaper().map_err(|e| std::io::Error::other(e.to_string()))
}
pub use capability::{Capabilities, Capability, RegistryOptions};
pub use review::ReviewState;
pub use session::{QueueStatus, SessionHandle, Steered};
pub use sync::Slots;

/// The standard tool set with the given capabilities (without the write-receipts tool, which
/// needs the main store): the tools of [`capability::standard`].
pub fn default_registry(
    opts: &RegistryOptions,
    caps: Capabilities,
) -> error::Result<tools::ToolRegistry> {
    let mut a = capability::Assembly::new(None, None, opts, caps);
    capability::standard(&mut a)?;
    Ok(capability::registry_of(&a.finish()))
}
