//! The typed tool registry. Every tool lives in its own module here: an argument struct (serde +
//! schemars, so the schema the model sees is generated), a description, metadata the policy reads
//! ([`ToolMeta`]), a handler and a result type serialised once into a [`ToolOutput`] that carries
//! the handler's own [`Outcome`]. The type-erased [`Tool`] trait lets built-in and (later) external
//! tools share one registry and one call path ([`invoke`]).
//!
//! Adding a tool: write `tools/<name>.rs` with a [`TypedTool`] impl, register it in its
//! capability's `tools` ([`crate::capability`]), and accept the schema snapshot it adds
//! (`cargo insta review`). A tool known only by its JSON schema (an external server's) is a
//! [`JsonTool`]; both go through the one call path ([`invoke`]) and its gates ([`gate`]).

pub mod answer;
pub mod args;
pub mod browse_webpage;
pub mod diagnostic;
pub mod execute_code;
pub mod execute_command;
pub mod gate;
pub mod get_tool_execution;
pub mod guardrails;
pub mod invoke;
pub mod ledger;
pub mod line;
pub mod memory;
pub mod moviepilot_api;
pub mod policy;
pub mod read_file;
pub mod read_tool_result;
pub mod recognize_captcha;
pub mod registry;
pub mod search_memory;
pub mod search_tools;
pub mod search_web;
pub mod session_search;
pub mod skill_manage;
pub mod skill_view;
pub mod skills_list;
pub mod subagent_task;
pub mod task;
pub mod terminal_sessions;
pub mod update_plan;
pub mod view_image;

use async_trait::async_trait;
use mpa_protocol::{Actor, EffectClass, Outcome, ToolSpec};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// When the background learning review may run a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewUse {
    /// Never: the review gets the whitelist refusal.
    Never,
    /// In every review (skills tools).
    Always,
    /// Only when the memory review is due (`memory`).
    WhenMemoryDue,
}

/// What the policy knows about a tool before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolMeta {
    /// The tool's effect; a tool may refine it per call ([`PreparedCall::effect`]).
    pub effect: EffectClass,
    /// Only admins may run it (and only admins are shown it).
    pub requires_admin: bool,
    /// Host-internal: never published over MCP or the OpenAI endpoint.
    pub internal: bool,
    /// Sizes its results for the model itself; the generic cap must not truncate them again.
    pub self_capped: bool,
    pub review: ReviewUse,
    /// At most one call of this tool per model response (e.g. `update_plan` replaces the plan).
    pub once_per_response: bool,
    /// How the loop guardrails treat repeated calls ([`guardrails::LoopClass`]).
    pub loop_class: guardrails::LoopClass,
    /// Another program's tool (an external MCP server's): its effect is what that program
    /// claims, so read-only origins never call it.
    pub external: bool,
    /// Keeps its own time limit (the Python kernel's cell timeout): the call path's
    /// `LLM_TOOL_TIMEOUT` does not cut it off.
    pub own_timeout: bool,
}

impl ToolMeta {
    pub const fn new(effect: EffectClass) -> Self {
        Self {
            effect,
            requires_admin: false,
            internal: false,
            self_capped: false,
            review: ReviewUse::Never,
            once_per_response: false,
            loop_class: guardrails::LoopClass::PLAIN,
            external: false,
            own_timeout: false,
        }
    }

    /// A plain read anybody may run.
    pub const fn read() -> Self {
        Self::new(EffectClass::SafeRead)
    }

    pub const fn admin(mut self) -> Self {
        self.requires_admin = true;
        self
    }

    pub const fn internal(mut self) -> Self {
        self.internal = true;
        self
    }

    pub const fn self_capped(mut self) -> Self {
        self.self_capped = true;
        self
    }

    pub const fn review(mut self, review: ReviewUse) -> Self {
        self.review = review;
        self
    }

    pub const fn once_per_response(mut self) -> Self {
        self.once_per_response = true;
        self
    }

    pub const fn loop_class(mut self, class: guardrails::LoopClass) -> Self {
        self.loop_class = class;
        self
    }

    pub const fn external(mut self) -> Self {
        self.external = true;
        self
    }

    pub const fn own_timeout(mut self) -> Self {
        self.own_timeout = true;
        self
    }
}

/// Session state a tool may read or change (owned by the session actor): one typed slot per
/// concern — the plan (`plan::PlanState`), the terminal scope, the result store, the
/// discovery state, a pending secret read — each defined next to the code that uses it.
pub type SessionState = crate::sync::Slots;

/// Everything a tool call may know about its caller. Built by the host, never from tool JSON.
#[derive(Clone)]
pub struct ToolContext {
    pub actor: Actor,
    /// The session whose data the call belongs to (its owner may differ from the actor when an
    /// admin continues another user's chat from the web page).
    pub session_id: String,
    /// The session's channel (`web`, `cli`, `openai`, …), sent to MoviePilot as context.
    pub channel: String,
    pub call_id: String,
    /// One explicit user request (a turn): identical MoviePilot writes inside it are one write.
    pub request_id: String,
    pub cancel: CancellationToken,
    pub session: Arc<SessionState>,
    /// State of this agent loop's run (a turn, a review, a nested loop): gates count here.
    pub turn: Arc<crate::sync::Slots>,
    /// Set when the call belongs to a background review (writes are guarded or staged).
    pub review: Option<mpa_learning::ReviewToken>,
    /// The calling agent: its services, tools and event stream (see [`crate::handle`]).
    pub agent: crate::handle::AgentHandle,
}

impl ToolContext {
    /// A context outside any session (tests of single tools, `mpagent tool` before a session
    /// exists): fresh state, no agent behind it.
    pub fn detached(actor: Actor, session_id: &str, call_id: &str) -> Self {
        Self {
            actor,
            session_id: session_id.to_string(),
            channel: "test".into(),
            call_id: call_id.to_string(),
            request_id: format!("request-{call_id}"),
            cancel: CancellationToken::new(),
            session: Arc::new(SessionState::new()),
            turn: Arc::new(crate::sync::Slots::new()),
            review: None,
            agent: crate::handle::AgentHandle::detached(),
        }
    }

    /// Who writes: the foreground turn, or a background review with its cancel flag. Decided by
    /// the host (the review sets [`ToolContext::review`]), never by tool arguments.
    pub fn write_origin(&self) -> mpa_learning::WriteOrigin {
        match &self.review {
            Some(token) => mpa_learning::WriteOrigin::BackgroundReview(token.clone()),
            None => mpa_learning::WriteOrigin::Foreground,
        }
    }
}

/// The field of a JSON result (and, until it is rendered, of the host metadata) that holds the
/// host notes ([`ToolOutput::add_note`]).
pub const HOST_NOTES_KEY: &str = "_host_notes";

/// What a tool returns: the text the model sees (serialised once), the outcome the handler
/// decided, and host metadata for the tool message (never sent to the model).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: String,
    pub outcome: Outcome,
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// The stable error code of a refusal or failure (the `error` field of its JSON), so the host
    /// never parses a result to learn it.
    pub error: Option<Box<str>>,
    /// `Some(false)` for a write that succeeded without changing anything (a duplicate entry, a
    /// proposal staged for approval), so the background review does not report it as an action
    /// without parsing the result; `None` when the tool does not say.
    pub changed: Option<bool>,
    /// Images for the model's eyes (a viewed image, a screenshot), beside the text: never cut by
    /// the result cap, never in a receipt, the evidence or a snapshot. They ride on the tool
    /// message in memory until the turn ends ([`crate::vision`]).
    images: Vec<mpa_protocol::ImageBlock>,
}

impl ToolOutput {
    /// A serialisable result with the outcome its handler decided.
    pub fn json<T: Serialize + ?Sized>(value: &T, outcome: Outcome) -> Self {
        let content = serde_json::to_string(value).unwrap_or_else(|e| {
            serde_json::json!({"success": false, "error": "result_unserialisable",
                "message": format!("the tool's result could not be serialised: {e}")})
            .to_string()
        });
        Self {
            content,
            outcome,
            metadata: serde_json::Map::new(),
            error: None,
            changed: None,
            images: Vec::new(),
        }
    }

    /// A JSON object built by the host: its `error` field, when a string, is the stable code
    /// ([`ToolOutput::error`]), read from the object before it is serialised.
    pub fn object(v: serde_json::Map<String, serde_json::Value>, outcome: Outcome) -> Self {
        let code = v
            .get("error")
            .and_then(serde_json::Value::as_str)
            .map(Box::from);
        let mut out = Self::json(&v, outcome);
        out.error = code;
        out
    }

    /// A typed result: serialised once, outcome from the result itself.
    pub fn result<R: ToolResult + ?Sized>(result: &R) -> Self {
        let mut out = Self::json(result, result.outcome());
        out.metadata = result.metadata();
        out
    }

    /// A failure the model should read: `{success:false, error, message}`.
    pub fn failure(code: &str, message: impl Into<String>) -> Self {
        Self::json(
            &serde_json::json!({"success": false, "error": code, "message": message.into()}),
            Outcome::Failed,
        )
        .with_error(code)
    }

    /// Adds a host note for the model (a loop warning). Notes wait in the host metadata until
    /// the result joins the conversation ([`ToolOutput::render_notes`]): never cut off by the
    /// result cap, never part of the result's evidence, never mistaken for a change of the
    /// result itself.
    pub fn add_note(&mut self, note: String) {
        let notes = self
            .metadata
            .entry(HOST_NOTES_KEY)
            .or_insert_with(|| serde_json::Value::Array(Vec::new()));
        if let serde_json::Value::Array(list) = notes {
            list.push(note.into());
        }
    }

    pub fn has_notes(&self) -> bool {
        self.metadata.contains_key(HOST_NOTES_KEY)
    }

    /// Moves the host notes into what the model reads: a JSON object result gets them as its
    /// last field, `_host_notes` (it stays one JSON object, as the ledger's `_tool_execution`
    /// does); any other text gets each after a blank line.
    pub fn render_notes(&mut self) {
        let Some(serde_json::Value::Array(notes)) = self.metadata.remove(HOST_NOTES_KEY) else {
            return;
        };
        if let Ok(serde_json::Value::Object(mut v)) =
            serde_json::from_str::<serde_json::Value>(&self.content)
        {
            v.insert(HOST_NOTES_KEY.into(), notes.into());
            self.content = serde_json::Value::Object(v).to_string();
            return;
        }
        for note in notes.iter().filter_map(serde_json::Value::as_str) {
            self.content.push_str("\n\n");
            self.content.push_str(note);
        }
    }

    /// Adds an image for the model to look at (see [`ToolOutput::images`]).
    pub fn with_image(mut self, image: mpa_protocol::ImageBlock) -> Self {
        self.images.push(image);
        self
    }

    /// The images for the model's eyes (see [`ToolOutput::with_image`]).
    pub fn images(&self) -> &[mpa_protocol::ImageBlock] {
        &self.images
    }

    /// Moves the images out (onto the tool message).
    pub fn take_images(&mut self) -> Vec<mpa_protocol::ImageBlock> {
        std::mem::take(&mut self.images)
    }

    /// Records the stable error code of this result (see [`ToolOutput::error`]).
    pub fn with_error(mut self, code: &str) -> Self {
        self.error = Some(code.into());
        self
    }

    /// The effect may or may not have happened: `{success:false, execution_outcome:"unknown", …}`.
    pub fn unknown(code: &str, message: impl Into<String>) -> Self {
        Self::json(
            &serde_json::json!({"success": false, "execution_outcome": "unknown",
                "error": code, "message": message.into()}),
            Outcome::Unknown,
        )
        .with_error(code)
    }

    /// A result whose outcome the host cannot know from a type: text from an external tool,
    /// classified by the host-wide rules (spec runtime.md §4.1).
    pub fn classified(content: String, status_error: bool) -> Self {
        let outcome = crate::outcome::classify(&content, status_error);
        Self {
            content,
            outcome,
            metadata: serde_json::Map::new(),
            error: None,
            changed: None,
            images: Vec::new(),
        }
    }
}

/// A typed tool result.
pub trait ToolResult: Serialize {
    fn outcome(&self) -> Outcome {
        Outcome::Succeeded
    }

    /// Host metadata to attach to the tool message.
    fn metadata(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }
}

/// A tool call whose arguments were parsed: the policy reads its effect, then it runs.
#[async_trait]
pub trait PreparedCall: Send {
    fn effect(&self) -> EffectClass;
    /// Whether this call needs an administrator (beyond the tool's own `requires_admin`).
    fn requires_admin(&self) -> bool {
        false
    }
    /// What needs the administrator, when it is one part of a tool others may use (a
    /// MoviePilot operation): the refusal names it instead of the whole tool.
    fn admin_subject(&self) -> Option<String> {
        None
    }
    /// The digest of the call's canonical arguments when the tool normalises them itself (e.g.
    /// defaults applied); the host digests the raw arguments otherwise.
    fn canonical_digest(&self) -> Option<String> {
        None
    }
    /// Identical calls within one user request are one write (`moviepilot_api`); otherwise each
    /// call id is its own.
    fn shares_identity(&self) -> bool {
        false
    }
    /// How to verify read-only whether this write is in effect, should its outcome be unknown
    /// (taken before the call runs).
    fn read_back_check(&self) -> Option<Box<dyn ledger::ReadBackCheck>> {
        None
    }
    async fn run(self: Box<Self>, ctx: ToolContext) -> ToolOutput;
}

/// The type-erased tool the registry holds.
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    fn meta(&self) -> ToolMeta;
    /// A description that follows the world (e.g. what the user's MoviePilot serves), read
    /// each time specs are offered; `None` keeps the registered one.
    fn live_description(&self) -> Option<String> {
        None
    }
    /// The sub-operations (id, category) a multiplexing tool offers this actor, for tool
    /// search; `None` when it has none.
    fn offered_operations(&self, _actor: &Actor) -> Option<Vec<(&'static str, &'static str)>> {
        None
    }
    /// Parses the arguments object; invalid arguments are answered without running anything.
    fn prepare(&self, args: serde_json::Value) -> Result<Box<dyn PreparedCall>, ToolOutput>;
}

/// A tool with a typed argument struct. Wrap it with [`typed`] to register it.
#[async_trait]
pub trait TypedTool: Send + Sync + 'static {
    type Args: DeserializeOwned + JsonSchema + Send + 'static;
    const NAME: &'static str;
    fn description(&self) -> String;
    fn meta(&self) -> ToolMeta;

    /// The effect of this call (e.g. `moviepilot_api` decides by operation); the tool's own by
    /// default.
    fn effect(&self, _args: &Self::Args) -> EffectClass {
        self.meta().effect
    }

    /// Whether this call needs an administrator (e.g. an admin-only MoviePilot operation).
    fn requires_admin(&self, _args: &Self::Args) -> bool {
        self.meta().requires_admin
    }

    /// See [`PreparedCall::admin_subject`].
    fn admin_subject(&self, _args: &Self::Args) -> Option<String> {
        None
    }

    /// See [`PreparedCall::canonical_digest`].
    fn canonical_digest(&self, _args: &Self::Args) -> Option<String> {
        None
    }

    /// See [`PreparedCall::shares_identity`].
    fn shares_identity(&self) -> bool {
        false
    }

    /// See [`PreparedCall::read_back_check`].
    fn read_back_check(&self, _args: &Self::Args) -> Option<Box<dyn ledger::ReadBackCheck>> {
        None
    }

    /// See [`Tool::live_description`].
    fn live_description(&self) -> Option<String> {
        None
    }

    /// See [`Tool::offered_operations`].
    fn offered_operations(&self, _actor: &Actor) -> Option<Vec<(&'static str, &'static str)>> {
        None
    }

    /// The reply to arguments that do not deserialise (nothing runs). A tool whose replies have
    /// their own error shape (`execute_command`) answers in that shape.
    fn invalid_arguments(&self, _args: &serde_json::Value, error: serde_json::Error) -> ToolOutput {
        ToolOutput::failure(
            "invalid_arguments",
            format!("invalid arguments for {}: {error}", Self::NAME),
        )
    }

    async fn run(&self, ctx: ToolContext, args: Self::Args) -> ToolOutput;
}

struct Typed<T>(Arc<T>);

struct TypedCall<T: TypedTool> {
    tool: Arc<T>,
    args: T::Args,
    effect: EffectClass,
    requires_admin: bool,
}

#[async_trait]
impl<T: TypedTool> PreparedCall for TypedCall<T> {
    fn effect(&self) -> EffectClass {
        self.effect
    }

    fn requires_admin(&self) -> bool {
        self.requires_admin
    }

    fn admin_subject(&self) -> Option<String> {
        self.tool.admin_subject(&self.args)
    }

    fn canonical_digest(&self) -> Option<String> {
        self.tool.canonical_digest(&self.args)
    }

    fn shares_identity(&self) -> bool {
        self.tool.shares_identity()
    }

    fn read_back_check(&self) -> Option<Box<dyn ledger::ReadBackCheck>> {
        self.tool.read_back_check(&self.args)
    }

    async fn run(self: Box<Self>, ctx: ToolContext) -> ToolOutput {
        self.tool.run(ctx, self.args).await
    }
}

/// Type-erases a [`TypedTool`].
pub fn typed<T: TypedTool>(tool: T) -> Arc<dyn Tool> {
    Arc::new(Typed(Arc::new(tool)))
}

/// JSON schema of an argument struct, in the shape OpenAI function parameters expect: one
/// self-contained object (no `$ref`s, which small local models and some servers do not follow),
/// optional fields simply not required (no `null` alternatives, which some servers refuse).
pub fn schema_of<A: JsonSchema>() -> serde_json::Value {
    let settings = schemars::generate::SchemaSettings::draft07().with(|s| {
        s.inline_subschemas = true;
    });
    let schema = settings.into_generator().into_root_schema_for::<A>();
    let mut v = serde_json::to_value(schema).unwrap_or_default();
    if let Some(obj) = v.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
        obj.remove("definitions");
        obj.remove("$defs");
    }
    strip_null_alternatives(&mut v);
    v
}

/// `Option<T>` fields come out as `type: [T, "null"]`, `anyOf: [T, {type: null}]` or (for a
/// string enum) `enum: [..., null]`; an omitted field already means "none", so the `null`
/// alternative is dropped everywhere.
fn strip_null_alternatives(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Object(obj) => {
            if let Some(Value::Array(types)) = obj.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    obj.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(values)) = obj.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
            for key in ["anyOf", "oneOf"] {
                if let Some(Value::Array(alts)) = obj.get_mut(key) {
                    alts.retain(|a| a.get("type").and_then(Value::as_str) != Some("null"));
                    if alts.len() == 1 {
                        let only = alts.remove(0);
                        obj.remove(key);
                        if let Value::Object(inner) = only {
                            for (k, val) in inner {
                                obj.entry(k).or_insert(val);
                            }
                        }
                    }
                }
            }
            if obj.get("default") == Some(&Value::Null) {
                obj.remove("default");
            }
            for (_, child) in obj.iter_mut() {
                strip_null_alternatives(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_null_alternatives),
        _ => {}
    }
}

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

    fn live_description(&self) -> Option<String> {
        self.0.live_description()
    }

    fn offered_operations(&self, actor: &Actor) -> Option<Vec<(&'static str, &'static str)>> {
        self.0.offered_operations(actor)
    }

    fn prepare(&self, args: serde_json::Value) -> Result<Box<dyn PreparedCall>, ToolOutput> {
        // Deserialised from a borrow so the raw arguments are still there for the error reply.
        match T::Args::deserialize(&args) {
            Ok(args) => {
                let effect = self.0.effect(&args);
                let requires_admin = self.0.requires_admin(&args);
                Ok(Box::new(TypedCall {
                    tool: Arc::clone(&self.0),
                    args,
                    effect,
                    requires_admin,
                }))
            }
            Err(e) => Err(self.0.invalid_arguments(&args, e)),
        }
    }
}

/// A tool that takes its arguments as plain JSON (external tools, whose schema is not a Rust type).
#[async_trait]
pub trait JsonTool: Send + Sync + 'static {
    fn spec(&self) -> ToolSpec;
    fn meta(&self) -> ToolMeta;
    async fn call(&self, ctx: ToolContext, args: serde_json::Value) -> ToolOutput;
}

struct Json<T>(Arc<T>);

struct JsonCall<T> {
    tool: Arc<T>,
    args: serde_json::Value,
    effect: EffectClass,
}

#[async_trait]
impl<T: JsonTool> PreparedCall for JsonCall<T> {
    fn effect(&self) -> EffectClass {
        self.effect
    }

    async fn run(self: Box<Self>, ctx: ToolContext) -> ToolOutput {
        self.tool.call(ctx, self.args).await
    }
}

impl<T: JsonTool> Tool for Json<T> {
    fn spec(&self) -> ToolSpec {
        self.0.spec()
    }

    fn meta(&self) -> ToolMeta {
        self.0.meta()
    }

    fn prepare(&self, args: serde_json::Value) -> Result<Box<dyn PreparedCall>, ToolOutput> {
        Ok(Box::new(JsonCall {
            tool: Arc::clone(&self.0),
            args,
            effect: self.0.meta().effect,
        }))
    }
}

/// Type-erases a [`JsonTool`].
pub fn json_tool<T: JsonTool>(tool: T) -> Arc<dyn Tool> {
    Arc::new(Json(Arc::new(tool)))
}

/// One registered tool: its spec is computed once (schemas are generated, not free).
#[derive(Clone)]
pub struct RegisteredTool {
    pub spec: ToolSpec,
    pub meta: ToolMeta,
    pub tool: Arc<dyn Tool>,
}

impl RegisteredTool {
    /// The spec as offered now: the registered one, with the tool's live description if it
    /// has one ([`Tool::live_description`]).
    pub fn current_spec(&self) -> ToolSpec {
        let mut spec = self.spec.clone();
        if let Some(d) = self.tool.live_description() {
            spec.description = d;
        }
        spec
    }
}

/// The set of tools a session can call, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, RegisteredTool>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let spec = tool.spec();
        let meta = tool.meta();
        self.tools
            .insert(spec.name.clone(), RegisteredTool { spec, meta, tool });
    }

    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.tools.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.values()
    }

    /// Specs of the tools this actor may see (admin-only tools are hidden from non-admins).
    pub fn specs_for(&self, actor: &Actor) -> Vec<ToolSpec> {
        self.tools
            .values()
            .filter(|t| policy::visible(actor, &t.meta))
            .map(RegisteredTool::current_spec)
            .collect()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub fn remove(&mut self, name: &str) -> Option<RegisteredTool> {
        self.tools.remove(name)
    }
}
