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
//! - [`tools`]: the typed tool registry ([`tools::TypedTool`], [`tools::ToolRegistry`]) and the
//!   built-in tools; [`default_registry`] builds the standard set.
//! - [`outcome::classify`]: the host-wide outcome rules.
//! - [`eval::run_task`]: one evaluation task through a fresh host (the harness's subject).
//!
//! Invariants: every tool call gets exactly one result message; a stop dispatches no further tool
//! call and answers unfinished calls "result unknown: interrupted"; a timeout is `unknown`, never
//! "nothing happened"; the chat snapshot is written at the end of every turn, stopped or not.

pub mod accounts;
pub mod admission;
pub mod agent;
pub mod config;
pub mod disk;
pub mod error;
pub mod eval;
pub mod history;
pub mod host;
pub mod moviepilot;
pub mod outcome;
pub mod plan;
pub mod prompt;
pub mod redaction;
pub mod result_cap;
pub mod review;
pub mod services;
pub mod session;
pub mod tools;
pub mod transcript;
pub mod turn;

pub use accounts::{Account, Accounts, AccountsConfig, IssuedToken, Tokens};
pub use agent::{
    Agent, MAX_CLIENT_SESSION_ID, SessionRef, SessionScope, client_session_id, new_session_id,
    server_session_id, valid_session_id,
};
pub use config::AgentConfig;
pub use error::{CoreError, Result};
pub use host::{Host, HostConfig, MoviePilotHostConfig};
pub use mpa_store::{Chat, ChatSummary};
pub use services::{Capabilities, Services};

/// What front ends configure the model client with (they depend on `mpa-core` alone).
pub mod model {
    pub use mpa_model::{DEFAULT_MAX_OUTPUT_TOKENS, ModelConfig, effective_max_output_tokens};
}

/// Makes this process a child subreaper and starts reaping adopted orphans, so a killed process
/// tree never leaves zombies (call once, at start, from the binary).
pub fn become_subreaper() -> std::io::Result<()> {
    mpa_exec::become_subreaper().map_err(|e| std::io::Error::other(e.to_string()))
}
pub use session::SessionHandle;

/// Options for the standard tool set.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Register the diagnostic `test_*` tools (`MPA_ENABLE_TEST_TOOLS=1`).
    pub diagnostic_tools: bool,
}

/// The standard tool set for the given capabilities.
pub fn default_registry(opts: &RegistryOptions, caps: &Capabilities) -> tools::ToolRegistry {
    use tools::{diagnostic, execute_command, typed, update_plan};
    let mut r = tools::ToolRegistry::new();
    r.register(typed(update_plan::UpdatePlan));
    r.register(typed(tools::read_tool_result::ReadToolResult));
    // Offered only when LLM_MAX_TOOLS > 0 (see `turn::begin::tool_selection`).
    r.register(typed(tools::search_tools::SearchTools));
    if let Some(processes) = &caps.exec {
        r.register(typed(execute_command::ExecuteCommand {
            processes: processes.clone(),
        }));
    }
    if let Some(history) = &caps.history {
        r.register(typed(tools::session_search::SessionSearch {
            history: history.clone(),
        }));
    }
    if let (Some(memory), Some(skills)) = (&caps.memory, &caps.skills) {
        use tools::{memory as mem, search_memory, skill_manage, skill_view, skills_list};
        r.register(typed(mem::MemoryTool {
            memory: memory.clone(),
        }));
        r.register(typed(search_memory::SearchMemory {
            memory: memory.clone(),
        }));
        r.register(typed(skills_list::SkillsList {
            skills: skills.clone(),
        }));
        r.register(typed(skill_view::SkillView {
            skills: skills.clone(),
        }));
        r.register(typed(skill_manage::SkillManage {
            skills: skills.clone(),
        }));
    }
    if let Some(access) = &caps.moviepilot {
        r.register(typed(tools::moviepilot_api::MoviePilotApi {
            access: access.clone(),
        }));
    }
    if opts.diagnostic_tools {
        r.register(typed(diagnostic::TestEcho));
        r.register(typed(diagnostic::TestSleep));
        r.register(typed(diagnostic::TestResult));
        r.register(typed(diagnostic::TestPanic));
    }
    r
}
