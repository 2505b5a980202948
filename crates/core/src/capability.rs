//! Capability lifecycles. A capability (terminals, memory and skills, conversation recall, the
//! MoviePilot gateway, …) is one [`Capability`] value built from its configuration, registered
//! once in [`standard`]: its tools, its block of the session's system prompt, its per-session
//! state (a typed slot of [`SessionState`], saved with the chat or not), what it does when a
//! session closes and when the host shuts down.
//!
//! Adding a capability: its crate (the domain), its tool files in `tools/`, a type implementing
//! [`Capability`] (here or next to its tools), and one line in [`standard`].

use crate::services::Capabilities;
use crate::tools::{SessionState, ToolRegistry, typed};
use async_trait::async_trait;
use mpa_protocol::{Actor, UserId};
use std::sync::Arc;

/// The session a lifecycle hook is about.
#[derive(Debug, Clone, Copy)]
pub struct SessionInfo<'a> {
    pub session_id: &'a str,
    /// The original owner (an admin continuing the chat never changes it).
    pub owner: &'a UserId,
}

#[async_trait]
pub trait Capability: Send + Sync + 'static {
    /// A stable name: the key its saved slot has in the chat's session state.
    fn name(&self) -> &'static str;

    /// Registers its tools (the registry's built-in layer).
    fn tools(&self, _tools: &mut ToolRegistry) {}

    /// At the start of every user turn, before the system prompt is built. Runs on a blocking
    /// thread (file I/O is fine).
    fn begin_turn(&self, _actor: &Actor) {}

    /// Its blocks of the session's system prompt, built once at the session's first turn and
    /// frozen with the chat (in registration order). Runs on a blocking thread.
    fn prompt_blocks(&self, _actor: &Actor) -> Vec<String> {
        Vec::new()
    }

    /// A session is opened (loaded or new): set up its slot. `saved` is what [`Capability::save`]
    /// returned when the chat was last written (`None` for a new chat, or nothing saved).
    fn open_session(
        &self,
        _session: SessionInfo<'_>,
        _state: &SessionState,
        _saved: Option<&serde_json::Value>,
    ) {
    }

    /// What of its slot is saved with the chat (`None`: nothing, the slot lives in memory only).
    fn save(&self, _state: &SessionState) -> Option<serde_json::Value> {
        None
    }

    /// A user turn of the session ended (its loop finished, before its snapshot is written):
    /// what the turn started and left unfinished is wound up here.
    async fn end_turn(&self, _session: SessionInfo<'_>, _state: &SessionState) {}

    /// The host begins to shut down: called for every capability before anything is awaited,
    /// so nothing new starts while sessions close.
    fn begin_shutdown(&self) {}

    /// The session is closed on request (its chat deleted, or the host shutting down) — not
    /// when an idle actor is reclaimed, which leaves what belongs to the conversation running.
    async fn close_session(&self, _session: SessionInfo<'_>, _state: &SessionState) {}

    /// The host shuts down, after every session closed.
    async fn shutdown(&self) {}
}

/// Options for the standard tool set.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Register the diagnostic `test_*` tools (`MPA_ENABLE_TEST_TOOLS=1`).
    pub diagnostic_tools: bool,
}

/// The host's capabilities for these hubs, in order (the order of their prompt blocks). This
/// list is the one place where a capability is registered. `store` is the main store (the write
/// receipts tool reads it); without one that tool is left out.
pub fn standard(
    caps: &Capabilities,
    opts: &RegistryOptions,
    store: Option<&mpa_store::Store>,
) -> Vec<Arc<dyn Capability>> {
    let mut list: Vec<Arc<dyn Capability>> = vec![Arc::new(Core {
        store: store.cloned(),
    })];
    if let Some(exec) = &caps.exec {
        list.push(Arc::new(Terminals { exec: exec.clone() }));
    }
    if let (Some(memory), Some(skills)) = (&caps.memory, &caps.skills) {
        list.push(Arc::new(Learning {
            memory: memory.clone(),
            skills: skills.clone(),
        }));
    }
    if let Some(access) = &caps.moviepilot {
        list.push(Arc::new(MoviePilot {
            access: access.clone(),
        }));
    }
    if let Some(history) = &caps.history {
        list.push(Arc::new(Recall {
            history: history.clone(),
        }));
    }
    list.push(Arc::new(crate::subagent::Subagents {
        hub: crate::subagent::Hub::new(caps.exec.clone()),
    }));
    if opts.diagnostic_tools {
        list.push(Arc::new(Diagnostics));
    }
    if let Some(hub) = &caps.mcp {
        list.push(Arc::new(crate::mcp::McpServers { hub: hub.clone() }));
    }
    list
}

/// The tools of `capabilities`, in one registry.
pub fn registry_of(capabilities: &[Arc<dyn Capability>]) -> ToolRegistry {
    let mut r = ToolRegistry::new();
    for c in capabilities {
        c.tools(&mut r);
    }
    r
}

/// Every session's basics: the plan, kept over-cap results (a slot per session, memory only),
/// tool discovery (a slot per user request), the write receipts.
struct Core {
    store: Option<mpa_store::Store>,
}

impl Capability for Core {
    fn name(&self) -> &'static str {
        "core"
    }

    fn tools(&self, r: &mut ToolRegistry) {
        use crate::tools::{get_tool_execution, read_tool_result, search_tools, update_plan};
        r.register(typed(update_plan::UpdatePlan));
        r.register(typed(read_tool_result::ReadToolResult));
        // Offered only when LLM_MAX_TOOLS > 0 (see `tools::search_tools::first_call`).
        r.register(typed(search_tools::SearchTools));
        // Every host keeps write receipts, so every host can read them back.
        if let Some(store) = &self.store {
            r.register(typed(get_tool_execution::GetToolExecution {
                store: store.clone(),
            }));
        }
    }
}

/// Terminals (`execute_command`). A conversation's terminal scope outlives its actor (an idle
/// reload finds it again) and closes with the conversation.
struct Terminals {
    exec: mpa_exec::Processes,
}

#[async_trait]
impl Capability for Terminals {
    fn name(&self) -> &'static str {
        "terminals"
    }

    fn tools(&self, r: &mut ToolRegistry) {
        r.register(typed(crate::tools::execute_command::ExecuteCommand {
            processes: self.exec.clone(),
        }));
    }

    async fn close_session(&self, session: SessionInfo<'_>, state: &SessionState) {
        use crate::tools::execute_command::{TerminalScope, scope_label};
        // The owner's scope, found by owner and label even when this actor never used it, plus
        // one an admin opened in this session (tools run as the admin there).
        let mut scopes = vec![self.exec.open_scope(mpa_exec::ScopeOwner {
            user_key: mpa_redact::UserKey::for_user(session.owner),
            label: scope_label(session.session_id),
        })];
        if let Some(s) = state.take::<TerminalScope>().0
            && !scopes.contains(&s)
        {
            scopes.push(s);
        }
        for scope in scopes {
            let report = self.exec.close_scope(&scope).await;
            if !report.is_complete() {
                tracing::warn!(session = %session.session_id, "terminal scope did not fully close");
            }
        }
    }

    async fn shutdown(&self) {
        self.exec.shutdown().await;
    }
}

/// Stable memory and personal skills: the memory snapshot and the skills catalogue frozen into
/// the session's system prompt at its first turn.
struct Learning {
    memory: mpa_learning::Memory,
    skills: mpa_learning::Skills,
}

impl Capability for Learning {
    fn name(&self) -> &'static str {
        "learning"
    }

    fn tools(&self, r: &mut ToolRegistry) {
        use crate::tools::{memory as mem, search_memory, skill_manage, skill_view, skills_list};
        r.register(typed(mem::MemoryTool {
            memory: self.memory.clone(),
        }));
        r.register(typed(search_memory::SearchMemory {
            memory: self.memory.clone(),
        }));
        r.register(typed(skills_list::SkillsList {
            skills: self.skills.clone(),
        }));
        r.register(typed(skill_view::SkillView {
            skills: self.skills.clone(),
        }));
        r.register(typed(skill_manage::SkillManage {
            skills: self.skills.clone(),
        }));
    }

    fn begin_turn(&self, actor: &Actor) {
        self.memory.begin_user_turn(actor);
    }

    fn prompt_blocks(&self, actor: &Actor) -> Vec<String> {
        let mut blocks = vec![self.memory.snapshot(actor).render()];
        let skills = self.skills.prompt_block(actor);
        if !skills.is_empty() {
            blocks.push(skills);
        }
        blocks
    }
}

/// The MoviePilot gateway (`moviepilot_api`): who calls are made as is its identity resolver
/// ([`crate::moviepilot::MoviePilotAccess`]); the business rules join the system prompt.
struct MoviePilot {
    access: crate::moviepilot::MoviePilotAccess,
}

impl Capability for MoviePilot {
    fn name(&self) -> &'static str {
        "moviepilot"
    }

    fn tools(&self, r: &mut ToolRegistry) {
        r.register(typed(crate::tools::moviepilot_api::MoviePilotApi {
            access: self.access.clone(),
        }));
    }

    fn prompt_blocks(&self, _actor: &Actor) -> Vec<String> {
        vec![crate::moviepilot::rules::BUSINESS_RULES.to_string()]
    }
}

/// Conversation recall over the evidence history (`session_search`).
struct Recall {
    history: mpa_history::History,
}

#[async_trait]
impl Capability for Recall {
    fn name(&self) -> &'static str {
        "recall"
    }

    fn tools(&self, r: &mut ToolRegistry) {
        r.register(typed(crate::tools::session_search::SessionSearch {
            history: self.history.clone(),
        }));
    }

    fn prompt_blocks(&self, _actor: &Actor) -> Vec<String> {
        vec![crate::tools::session_search::RECALL_RULES.to_string()]
    }

    async fn shutdown(&self) {
        self.history.shutdown().await;
    }
}

/// The diagnostic `test_*` tools (`MPA_ENABLE_TEST_TOOLS`).
struct Diagnostics;

impl Capability for Diagnostics {
    fn name(&self) -> &'static str {
        "diagnostics"
    }

    fn tools(&self, r: &mut ToolRegistry) {
        use crate::tools::diagnostic;
        r.register(typed(diagnostic::TestEcho));
        r.register(typed(diagnostic::TestSleep));
        r.register(typed(diagnostic::TestResult));
        r.register(typed(diagnostic::TestPanic));
    }
}
