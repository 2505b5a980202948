//! The typed tool registry. Each tool is an argument struct (serde + schemars for the JSON schema),
//! a handler and metadata; the type-erased [`ToolRegistry`] dispatches built-in tools and, later,
//! external ones through the same [`Tool`] trait.

pub mod diagnostic;
pub mod execute_command;
pub mod learning;
pub mod session_search;
pub mod update_plan;

use crate::plan::Plan;
use async_trait::async_trait;
use mpa_protocol::{Actor, Outcome, ToolSpec};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// What a tool does to the world; drives policy (admin checks, ledger, read-only subagents).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolTag {
    Read,
    Write,
    Admin,
    Command,
    Memory,
    Planning,
}

#[derive(Debug, Clone)]
pub struct ToolMeta {
    pub tags: &'static [ToolTag],
    /// Only admins may run it; others get a permission-denied result.
    pub requires_admin: bool,
    /// Host-internal tools are never published over MCP or the OpenAI endpoint.
    pub internal: bool,
    /// The tool returns results sized for the model itself; the generic large-result cap must not
    /// truncate them again.
    pub self_capped: bool,
}

impl ToolMeta {
    pub const fn read() -> Self {
        Self {
            tags: &[ToolTag::Read],
            requires_admin: false,
            internal: false,
            self_capped: false,
        }
    }
}

/// Session state a tool may read or change (owned by the session actor).
#[derive(Debug, Default)]
pub struct SessionState {
    pub plan: Option<Plan>,
    /// The session's terminal scope, opened on first use and closed with the session.
    pub exec_scope: Option<mpa_exec::ScopeId>,
    /// The memory snapshot frozen at the session's first turn (system-prompt text).
    pub memory_snapshot: Option<String>,
}

/// Everything a tool call may know about its caller. Built by the host, never from tool JSON.
#[derive(Clone)]
pub struct ToolContext {
    pub actor: Actor,
    pub session_id: String,
    pub call_id: String,
    pub cancel: CancellationToken,
    pub session: Arc<Mutex<SessionState>>,
    /// Set when the call belongs to a background review (writes are guarded or staged).
    pub review: Option<mpa_protocol::ReviewToken>,
}

/// What a tool returns: the text the model sees, plus what the host knows about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: String,
    /// The tool reported an error status (classified `failed` unless the content says otherwise).
    pub is_error: bool,
    /// Host metadata to attach to the tool message (e.g. the plan snapshot).
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

impl ToolOutput {
    pub fn json(value: &serde_json::Value) -> Self {
        Self {
            content: value.to_string(),
            is_error: false,
            metadata: serde_json::Map::new(),
        }
    }

    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: text.into(),
            is_error: false,
            metadata: serde_json::Map::new(),
        }
    }

    /// A failure the model should read: `{success:false, error, message}`.
    pub fn failure(code: &str, message: impl Into<String>) -> Self {
        let v = serde_json::json!({"success": false, "error": code, "message": message.into()});
        Self {
            content: v.to_string(),
            is_error: true,
            metadata: serde_json::Map::new(),
        }
    }
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    fn meta(&self) -> ToolMeta;
    async fn call(&self, ctx: ToolContext, args: serde_json::Value) -> ToolOutput;
}

/// A tool with a typed argument struct. Wrap it with [`typed`] to register it.
#[async_trait]
pub trait TypedTool: Send + Sync + 'static {
    type Args: DeserializeOwned + JsonSchema + Send;
    const NAME: &'static str;
    fn description(&self) -> String;
    fn meta(&self) -> ToolMeta;
    async fn run(&self, ctx: ToolContext, args: Self::Args) -> ToolOutput;
}

struct Typed<T>(T);

/// Type-erases a [`TypedTool`].
pub fn typed<T: TypedTool>(tool: T) -> Arc<dyn Tool> {
    Arc::new(Typed(tool))
}

/// JSON schema of an argument struct, in the shape OpenAI function parameters expect.
pub fn schema_of<A: JsonSchema>() -> serde_json::Value {
    let mut v = serde_json::to_value(schemars::schema_for!(A)).unwrap_or_default();
    if let Some(obj) = v.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
    }
    v
}

#[async_trait]
impl<T: TypedTool> Tool for Typed<T> {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: T::NAME.to_string(),
            description: self.0.description(),
            parameters: schema_of::<T::Args>(),
        }
    }

    fn meta(&self) -> ToolMeta {
        self.0.meta()
    }

    async fn call(&self, ctx: ToolContext, args: serde_json::Value) -> ToolOutput {
        match serde_json::from_value::<T::Args>(args) {
            Ok(a) => self.0.run(ctx, a).await,
            Err(e) => ToolOutput::failure(
                "invalid_arguments",
                format!("invalid arguments for {}: {e}", T::NAME),
            ),
        }
    }
}

/// The set of tools a session can call, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.spec().name, tool);
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.get(name).cloned()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// Specs of the tools this actor may see (admin-only tools are hidden from non-admins).
    pub fn specs_for(&self, actor: &Actor) -> Vec<ToolSpec> {
        self.tools
            .values()
            .filter(|t| actor.is_admin || !t.meta().requires_admin)
            .map(|t| t.spec())
            .collect()
    }
}

/// Outcome helper re-exported for adapters.
pub fn outcome_of(out: &ToolOutput) -> Outcome {
    crate::outcome::classify(&out.content, out.is_error)
}
