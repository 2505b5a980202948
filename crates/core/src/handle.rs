//! The agent handle a tool gets in its [`ToolContext`]: the host's services (weakly: a tool never
//! keeps the host alive), the registry as the calling loop sees it, and the calling agent's event
//! sink, tagged with its id and origin. With it a tool can
//!
//! - call another tool through the one call path with an origin of its own
//!   ([`AgentHandle::call_tool`]: its own call id, so its own ledger receipt) — a Python kernel's
//!   RPC, an MCP server's `tools/call`;
//! - run the same agent loop nested ([`AgentHandle::run_nested`]): its own origin, transcript,
//!   budget and turn state; its events reach the parent's consumer wrapped in
//!   [`Event::Nested`], which front ends keep off the user's stream — a subagent.

use crate::error::{CoreError, Result};
use crate::services::Services;
use crate::tools::invoke::{Invoked, invoke_one};
use crate::tools::policy::Origin;
use crate::tools::{SessionState, ToolContext};
use crate::transcript::Transcript;
use crate::turn::capture::{self, CaptureTarget};
use crate::turn::steps::{self, Limits, LoopEnd, LoopSetup, NoHooks, Offer, StepHooks};
use crate::turn::tool_calls::ToolStage;
use mpa_protocol::{AgentOrigin, Event, Message, ToolCall, ToolSpec};
use std::sync::{Arc, Weak};
use tokio::sync::mpsc;

/// Where a loop's events go; a consumer that went away is ignored (the loop keeps running). A
/// nested agent's sink wraps each event in [`Event::Nested`] with the agent's id and origin.
#[derive(Clone, Default)]
pub struct EventSink {
    tx: Option<mpsc::UnboundedSender<Event>>,
    tag: Option<Arc<(String, AgentOrigin)>>,
}

impl EventSink {
    pub fn new(tx: mpsc::UnboundedSender<Event>) -> Self {
        Self {
            tx: Some(tx),
            tag: None,
        }
    }

    /// A sink that drops everything (the background review).
    pub fn none() -> Self {
        Self::default()
    }

    pub fn emit(&self, e: Event) {
        let Some(tx) = &self.tx else { return };
        let e = match &self.tag {
            Some(tag) => Event::Nested {
                agent_id: tag.0.clone(),
                origin: tag.1,
                event: Box::new(e),
            },
            None => e,
        };
        let _ = tx.send(e);
    }

    /// The sink of an agent nested under this one: same consumer, events tagged.
    pub fn nested(&self, agent_id: &str, origin: AgentOrigin) -> Self {
        Self {
            tx: self.tx.clone(),
            tag: Some(Arc::new((agent_id.to_string(), origin))),
        }
    }
}

/// The calling agent, as a tool sees it.
#[derive(Clone)]
pub struct AgentHandle {
    services: Weak<Services>,
    id: Arc<str>,
    origin: Origin,
    events: EventSink,
}

/// A loop to run nested under the calling agent.
pub struct Nested {
    pub origin: Origin,
    /// Its own system message.
    pub system: Message,
    /// Its own transcript to start from (usually one user message with the task).
    pub messages: Vec<Message>,
    /// The tools it is offered.
    pub specs: Vec<ToolSpec>,
    pub limits: Limits,
    pub max_parallel: usize,
    /// Whose session state it works in.
    pub state: NestedState,
    /// Its own session id (what MoviePilot and the evidence store know it by); the caller's
    /// when `None`.
    pub session_id: Option<String>,
    /// Where its transcript is kept as evidence, as the loop goes (`None`: not kept).
    pub evidence: Option<Evidence>,
}

/// The session state a nested loop works in.
pub enum NestedState {
    /// The caller's (plan, terminal scope, kept results).
    Shared,
    /// A fresh one.
    Fresh,
    /// One the caller prepared (a subtask's, holding its own terminal scope).
    Own(Arc<SessionState>),
}

/// Where a nested loop's evidence goes: the owner's history, under a session of its own.
pub struct Evidence {
    pub owner: mpa_redact::UserKey,
    pub meta: mpa_history::SessionMeta,
}

/// What a nested loop did.
pub struct NestedRun {
    pub agent_id: String,
    pub end: LoopEnd,
    /// Its whole transcript (the starting messages first).
    pub messages: Vec<Message>,
}

impl AgentHandle {
    pub fn new(services: &Arc<Services>, origin: Origin, id: &str) -> Self {
        Self {
            services: Arc::downgrade(services),
            id: id.into(),
            origin,
            events: EventSink::none(),
        }
    }

    /// A handle with no agent behind it (single tools in tests): nested work is unavailable.
    pub fn detached() -> Self {
        Self {
            services: Weak::new(),
            id: "detached".into(),
            origin: Origin::Direct,
            events: EventSink::none(),
        }
    }

    pub fn with_events(mut self, events: EventSink) -> Self {
        self.events = events;
        self
    }

    /// This agent's id (a turn's request id, a nested agent's own).
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// This agent's event sink (tagged for a nested agent).
    pub fn events(&self) -> &EventSink {
        &self.events
    }

    /// The host's services, while the host runs.
    pub fn services(&self) -> Result<Arc<Services>> {
        self.services.upgrade().ok_or(CoreError::SessionClosed)
    }

    /// The tools the caller's session sees now (all three registry layers).
    pub fn tools(&self, caller: &ToolContext) -> Result<crate::tools::registry::ToolView> {
        Ok(self.services()?.tools.view_for(&caller.session))
    }

    /// Calls tool `name` through the one call path as `origin`, with a call id of its own (so
    /// writes get their own receipt), in the caller's session.
    pub async fn call_tool(
        &self,
        caller: &ToolContext,
        origin: Origin,
        name: &str,
        args: serde_json::Value,
    ) -> Result<Invoked> {
        let services = self.services()?;
        let call = ToolCall {
            id: format!("{}-{}", self.id, uuid::Uuid::new_v4().simple()),
            name: name.to_string(),
            arguments: args.to_string(),
        };
        let mut ctx = caller.clone();
        ctx.call_id = call.id.clone();
        ctx.cancel = caller.cancel.child_token();
        Ok(invoke_one(services.invoker(), ctx, origin, &call).await)
    }

    /// Runs the agent loop nested under the caller: own origin, transcript, limits and turn
    /// state; the caller's actor, session and cancellation; events tagged with the new agent's
    /// id on the caller's sink.
    pub async fn run_nested(&self, caller: &ToolContext, nested: Nested) -> Result<NestedRun> {
        let services = self.services()?;
        let agent_id = format!(
            "{}-{}",
            nested.origin.label(),
            uuid::Uuid::new_v4().simple()
        );
        let events = self.events.nested(&agent_id, nested.origin.agent_origin());
        let handle = AgentHandle {
            services: Weak::clone(&self.services),
            id: agent_id.as_str().into(),
            origin: nested.origin,
            events: events.clone(),
        };
        let session = match nested.state {
            NestedState::Shared => Arc::clone(&caller.session),
            NestedState::Fresh => Arc::new(SessionState::new()),
            NestedState::Own(state) => state,
        };
        let session_id = nested
            .session_id
            .unwrap_or_else(|| caller.session_id.clone());
        let mut transcript = Transcript::fresh(nested.messages);
        let setup = LoopSetup {
            services: &services,
            tools: ToolStage {
                invoker: services.invoker(),
                origin: nested.origin,
                max_parallel: nested.max_parallel,
                actor: &caller.actor,
                session_id: &session_id,
                channel: &caller.channel,
                request_id: &agent_id,
                state: &session,
                review: caller.review.as_ref(),
                handle,
            },
            system: &nested.system,
            offer: Offer::fixed(nested.specs),
            limits: nested.limits,
            budget: services.budget_limits(),
            acting_note: None,
        };
        let cancel = caller.cancel.child_token();
        let capture = match (services.caps.history(), nested.evidence) {
            (Some(history), Some(e)) => Some(CaptureTarget {
                history,
                owner: e.owner,
                meta: e.meta,
            }),
            _ => None,
        };
        let end = match &capture {
            Some(target) => {
                let mut hooks = EvidenceHooks { target };
                let end = steps::run(setup, &mut transcript, &mut hooks, &events, &cancel).await;
                capture::flush(target, &mut transcript).await;
                end
            }
            None => steps::run(setup, &mut transcript, &mut NoHooks, &events, &cancel).await,
        };
        Ok(NestedRun {
            agent_id,
            end,
            messages: transcript.messages().to_vec(),
        })
    }
}

/// A nested loop's evidence capture, as a turn's: after every step, so a crash loses at most
/// the step in flight; compacted-out messages stay searchable.
struct EvidenceHooks<'a> {
    target: &'a CaptureTarget<'a>,
}

#[async_trait::async_trait]
impl StepHooks for EvidenceHooks<'_> {
    fn evidence_watermark(&self, transcript: &Transcript) -> usize {
        transcript.captured()
    }

    async fn on_compacted(&mut self, _transcript: &Transcript, removed: &[Message]) {
        capture::mark_compacted(self.target, removed).await;
    }

    async fn after_step(&mut self, transcript: &mut Transcript) {
        capture::flush(self.target, transcript).await;
    }
}
