//! Steering in an evaluation run (evaluation.md, `steering_*` scenarios): after the Nth
//! successful call of an operation the harness sends a message into the running turn's steering
//! inbox, exactly as a user typing it would ([`crate::SessionHandle::steer`]). The trigger is a
//! wrapper around `moviepilot_api` that injects before the call's result returns, so the message
//! waits in the inbox when the turn reaches its next model call: it is applied there, at a real
//! tool-receipt boundary, in every run alike.

use crate::agent::Agent;
use crate::session::Steered;
use crate::sync::lock;
use crate::tools::{PreparedCall, Tool, ToolContext, ToolMeta, ToolOutput};
use async_trait::async_trait;
use mpa_protocol::{EffectClass, Outcome, SteeringStatus, ToolSpec};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The tool whose results trigger injections.
pub const TRIGGER_TOOL: &str = "moviepilot_api";

/// "After the Nth successful `after_operation` reply, send `message`."
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteeringInjection {
    pub after_operation: String,
    pub nth: u64,
    pub message: String,
}

/// One steering event of the run, in the order it happened: `queued` when the harness sent the
/// message (the inbox's acknowledgement), `applied` / `discarded` from the turn's stream.
/// `fallback` when no running turn took the message (it became an ordinary turn).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteeringSeen {
    pub kind: String,
    pub message_id: String,
}

/// The run's injections and what became of them.
#[derive(Default)]
pub(super) struct Injector {
    injections: Vec<SteeringInjection>,
    /// Successful calls so far, by operation.
    counts: Mutex<HashMap<String, u64>>,
    /// Set once the host is open (the tools are registered before it exists).
    agent: OnceLock<Agent>,
    pub seen: Mutex<Vec<SteeringSeen>>,
}

impl Injector {
    pub fn new(injections: Vec<SteeringInjection>) -> Self {
        Self {
            injections,
            ..Self::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.injections.is_empty()
    }

    pub fn connect(&self, agent: Agent) {
        let _ = self.agent.set(agent);
    }

    /// A turn's stream said what became of a message.
    pub fn record(&self, status: SteeringStatus, message_id: &str) {
        lock(&self.seen).push(SteeringSeen {
            kind: status.as_str().to_string(),
            message_id: message_id.to_string(),
        });
    }

    /// A call of `operation` succeeded in `ctx`'s session: sends the messages due now.
    fn after_success(&self, operation: &str, actor: &mpa_protocol::Actor, session_id: &str) {
        let n = {
            let mut counts = lock(&self.counts);
            let n = counts.entry(operation.to_string()).or_insert(0);
            *n += 1;
            *n
        };
        let due = self
            .injections
            .iter()
            .filter(|i| i.after_operation == operation && i.nth == n);
        for injection in due {
            let Some(handle) = self.agent.get().and_then(|a| a.live(session_id)) else {
                tracing::warn!(session = %session_id, "no live session to steer");
                continue;
            };
            let seen = match handle.steer(actor, injection.message.clone(), Vec::new()) {
                Ok(Steered::Queued { message_id, .. }) => SteeringSeen {
                    kind: SteeringStatus::Queued.as_str().to_string(),
                    message_id,
                },
                Ok(Steered::Turn(_)) => SteeringSeen {
                    kind: "fallback".to_string(),
                    message_id: String::new(),
                },
                Err(e) => {
                    tracing::warn!(error = %e, "steering message not sent");
                    continue;
                }
            };
            lock(&self.seen).push(seen);
        }
    }
}

/// `moviepilot_api` with the injections after its successful calls.
pub(super) struct Triggering {
    pub inner: Arc<dyn Tool>,
    pub injector: Arc<Injector>,
}

struct TriggeringCall {
    inner: Box<dyn PreparedCall>,
    operation: Option<String>,
    injector: Arc<Injector>,
}

impl Tool for Triggering {
    fn spec(&self) -> ToolSpec {
        self.inner.spec()
    }

    fn meta(&self) -> ToolMeta {
        self.inner.meta()
    }

    fn prepare(&self, args: Value) -> std::result::Result<Box<dyn PreparedCall>, ToolOutput> {
        let operation = args
            .get("operation_id")
            .and_then(Value::as_str)
            .map(str::to_string);
        let inner = self.inner.prepare(args)?;
        Ok(Box::new(TriggeringCall {
            inner,
            operation,
            injector: Arc::clone(&self.injector),
        }))
    }
}

#[async_trait]
impl PreparedCall for TriggeringCall {
    fn effect(&self) -> EffectClass {
        self.inner.effect()
    }

    fn requires_admin(&self) -> bool {
        self.inner.requires_admin()
    }

    fn canonical_digest(&self) -> Option<String> {
        self.inner.canonical_digest()
    }

    fn shares_identity(&self) -> bool {
        self.inner.shares_identity()
    }

    fn read_back_check(&self) -> Option<Box<dyn crate::tools::ledger::ReadBackCheck>> {
        self.inner.read_back_check()
    }

    async fn run(self: Box<Self>, ctx: ToolContext) -> ToolOutput {
        let (actor, session_id) = (ctx.actor.clone(), ctx.session_id.clone());
        let TriggeringCall {
            inner,
            operation,
            injector,
        } = *self;
        let out = inner.run(ctx).await;
        if out.outcome == Outcome::Succeeded
            && let Some(op) = &operation
        {
            injector.after_success(op, &actor, &session_id);
        }
        out
    }
}
