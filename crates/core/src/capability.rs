//! Capability lifecycles. A capability (terminals, memory and skills, conversation recall, the
//! MoviePilot gateway, …) is one [`Capability`] value that builds itself from the host's
//! configuration ([`Configure`]) and is registered once, by one line in [`standard`]: its tools,
//! its block of the session's system prompt, its per-session state (a typed slot of
//! [`SessionState`], saved with the chat or not), what it does when the host starts, when a
//! session closes and when the host shuts down. The built capabilities are kept in order in
//! [`Capabilities`]; the few places that need a concrete one look it up by type
//! ([`Capabilities::get`]).
//!
//! Adding a capability: its crate (the domain), its tool files in `tools/`, a type implementing
//! [`Capability`] and [`Configure`] (here or next to its tools), and one line in [`standard`].

use crate::error::Result;
use crate::host::HostConfig;
use crate::tools::{SessionState, ToolRegistry, typed};
use async_trait::async_trait;
use mpa_protocol::{Actor, UserId};
use std::any::Any;
use std::sync::Arc;

/// The session a lifecycle hook is about.
#[derive(Debug, Clone, Copy)]
pub struct SessionInfo<'a> {
    pub session_id: &'a str,
    /// The original owner (an admin continuing the chat never changes it).
    pub owner: &'a UserId,
}

#[async_trait]
pub trait Capability: Any + Send + Sync {
    /// A stable name: the key its saved slot has in the chat's session state.
    fn name(&self) -> &'static str;

    /// The host has been built and is about to serve (before the first session opens).
    async fn start(&self) {}

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

/// How a capability builds itself.
pub trait Configure: Capability + Sized {
    /// The capability for this host, or `None` when it is not configured (an agent assembled
    /// without a host configuration — tests, benchmarks — has only what needs none).
    fn configure(setup: &Setup<'_>) -> Result<Option<Self>>;
}

/// What capabilities are built from.
pub struct Setup<'a> {
    /// The host's configuration (`None` for an agent assembled by hand).
    pub host: Option<&'a HostConfig>,
    /// The main store (`None` for a bare tool registry).
    pub store: Option<&'a mpa_store::Store>,
    pub options: &'a RegistryOptions,
    /// The capabilities built before this one (a capability that builds on another finds it
    /// here by type).
    pub built: &'a Capabilities,
}

/// The host's capabilities, in order (the order of their prompt blocks and lifecycle calls).
#[derive(Clone, Default)]
pub struct Capabilities(Vec<Arc<dyn Capability>>);

impl Capabilities {
    /// Adds a built capability. Given to [`standard`], one of a standard type takes that type's
    /// place instead of being configured; any other comes after the standard ones.
    #[must_use]
    pub fn with(mut self, c: impl Capability) -> Self {
        self.0.push(Arc::new(c));
        self
    }

    pub fn push(&mut self, c: Arc<dyn Capability>) {
        self.0.push(c);
    }

    /// The capability of type `T`, if the host has one.
    pub fn get<T: Capability>(&self) -> Option<&T> {
        self.0
            .iter()
            .find_map(|c| (c.as_ref() as &dyn Any).downcast_ref::<T>())
    }

    /// The evidence history, when conversation recall is configured (evidence capture,
    /// retention and deletion use it).
    pub fn history(&self) -> Option<&mpa_history::History> {
        self.get::<Recall>().map(Recall::history)
    }

    fn take<T: Capability>(&mut self) -> Option<Arc<dyn Capability>> {
        let i = self
            .0
            .iter()
            .position(|c| (c.as_ref() as &dyn Any).is::<T>())?;
        Some(self.0.remove(i))
    }
}

impl std::ops::Deref for Capabilities {
    type Target = [Arc<dyn Capability>];

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// Builds capabilities in order ([`standard`], then a host's own [`Assembly::add`]s): each is
/// configured from the same [`Setup`], unless the caller gave one of its type, which takes its
/// place.
pub struct Assembly<'a> {
    host: Option<&'a HostConfig>,
    store: Option<&'a mpa_store::Store>,
    options: &'a RegistryOptions,
    given: Capabilities,
    built: Capabilities,
}

impl<'a> Assembly<'a> {
    pub fn new(
        host: Option<&'a HostConfig>,
        store: Option<&'a mpa_store::Store>,
        options: &'a RegistryOptions,
        given: Capabilities,
    ) -> Self {
        Assembly {
            host,
            store,
            options,
            given,
            built: Capabilities::default(),
        }
    }

    /// Builds a `T` (or takes the given one) after those built so far.
    pub fn add<T: Configure>(&mut self) -> Result<()> {
        if let Some(c) = self.given.take::<T>() {
            self.built.push(c);
            return Ok(());
        }
        let setup = Setup {
            host: self.host,
            store: self.store,
            options: self.options,
            built: &self.built,
        };
        if let Some(c) = T::configure(&setup)? {
            self.built.push(Arc::new(c));
        }
        Ok(())
    }

    /// The capabilities built, then the given ones no standard type took.
    pub fn finish(self) -> Capabilities {
        let mut list = self.built;
        list.0.extend(self.given.0);
        list
    }
}

/// The host's capabilities, in order. This list is the one place where a capability is
/// registered.
pub fn standard(a: &mut Assembly<'_>) -> Result<()> {
    a.add::<Core>()?;
    a.add::<Terminals>()?;
    a.add::<Learning>()?;
    a.add::<MoviePilot>()?;
    a.add::<Recall>()?;
    a.add::<crate::eyes::Eyes>()?;
    a.add::<crate::tools::browse_webpage::BrowserCapability>()?;
    a.add::<crate::subagent::Subagents>()?;
    a.add::<crate::code::Code>()?;
    a.add::<Diagnostics>()?;
    a.add::<crate::mcp::McpServers>()?;
    Ok(())
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

impl Configure for Core {
    fn configure(setup: &Setup<'_>) -> Result<Option<Self>> {
        Ok(Some(Core {
            store: setup.store.cloned(),
        }))
    }
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
pub struct Terminals {
    exec: mpa_exec::Processes,
}

impl Terminals {
    pub fn new(exec: mpa_exec::Processes) -> Self {
        Terminals { exec }
    }

    pub fn processes(&self) -> &mpa_exec::Processes {
        &self.exec
    }
}

impl Configure for Terminals {
    fn configure(setup: &Setup<'_>) -> Result<Option<Self>> {
        Ok(setup.host.map(|cfg| {
            Terminals::new(mpa_exec::Processes::new(mpa_exec::ExecConfig {
                venv_path: cfg.venv_path.clone(),
                idle_scope_ttl: cfg.terminal_idle_ttl,
                ..mpa_exec::ExecConfig::new(
                    cfg.workdir.clone(),
                    cfg.data_dir.join("agent/runtime/exec/output"),
                )
            }))
        }))
    }
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
pub struct Learning {
    memory: mpa_learning::Memory,
    skills: mpa_learning::Skills,
}

impl Learning {
    pub fn new(memory: mpa_learning::Memory, skills: mpa_learning::Skills) -> Self {
        Learning { memory, skills }
    }

    pub fn memory(&self) -> &mpa_learning::Memory {
        &self.memory
    }

    pub fn skills(&self) -> &mpa_learning::Skills {
        &self.skills
    }
}

impl Configure for Learning {
    fn configure(setup: &Setup<'_>) -> Result<Option<Self>> {
        let Some(cfg) = setup.host else {
            return Ok(None);
        };
        let skills = mpa_learning::Skills::new(cfg.data_dir.clone());
        for line in skills.recover_on_start() {
            tracing::warn!("skills recovery: {line}");
        }
        let memory =
            mpa_learning::Memory::new(mpa_learning::MemoryConfig::new(cfg.data_dir.clone()));
        Ok(Some(Learning::new(memory, skills)))
    }
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
pub struct MoviePilot {
    access: crate::moviepilot::MoviePilotAccess,
    /// The account-standing checks (with MoviePilot sign-in), shared with the accounts.
    standing: Option<Arc<crate::moviepilot::standing::Standing>>,
    /// Where the operation guides are installed, and how hard they sync.
    skills_root: std::path::PathBuf,
    durability: mpa_protocol::Durability,
}

impl MoviePilot {
    pub fn access(&self) -> &crate::moviepilot::MoviePilotAccess {
        &self.access
    }

    pub(crate) fn standing(&self) -> Option<&Arc<crate::moviepilot::standing::Standing>> {
        self.standing.as_ref()
    }
}

impl Configure for MoviePilot {
    fn configure(setup: &Setup<'_>) -> Result<Option<Self>> {
        let (Some(cfg), Some(store)) = (setup.host, setup.store) else {
            return Ok(None);
        };
        let Some(mp) = &cfg.moviepilot else {
            return Ok(None);
        };
        let (access, standing) = crate::host::moviepilot_access(mp, store)?;
        Ok(Some(MoviePilot {
            access,
            standing,
            skills_root: cfg.data_dir.join("agent/skills"),
            durability: cfg.durability,
        }))
    }
}

#[async_trait]
impl Capability for MoviePilot {
    fn name(&self) -> &'static str {
        "moviepilot"
    }

    /// Reads the server's routes and installs the operation guides for them.
    async fn start(&self) {
        crate::moviepilot::live::start(&self.access, self.skills_root.clone(), self.durability)
            .await;
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
pub struct Recall {
    history: mpa_history::History,
}

impl Recall {
    pub fn new(history: mpa_history::History) -> Self {
        Recall { history }
    }

    pub fn history(&self) -> &mpa_history::History {
        &self.history
    }
}

impl Configure for Recall {
    fn configure(setup: &Setup<'_>) -> Result<Option<Self>> {
        Ok(setup.host.map(|cfg| {
            Recall::new(mpa_history::History::new(mpa_history::HistoryConfig {
                durability: cfg.durability,
                ..mpa_history::HistoryConfig::new(cfg.data_dir.clone())
            }))
        }))
    }
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

impl Configure for Diagnostics {
    fn configure(setup: &Setup<'_>) -> Result<Option<Self>> {
        let on = setup.options.diagnostic_tools || setup.host.is_some_and(|h| h.diagnostic_tools);
        Ok(on.then_some(Diagnostics))
    }
}

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
