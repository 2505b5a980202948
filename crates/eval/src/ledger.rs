//! The fake's ledger: one [`Attempt`] per HTTP request, refused ones included, with the effect
//! it applied and the records its reply actually carried. Tests and the oracle read it through
//! the handle, never over HTTP, so the agent cannot see or shape it.

use crate::faults::FaultAction;
use mpa_protocol::Outcome;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One request as the fake saw and answered it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1-based, in arrival order.
    pub sequence: u64,
    pub method: String,
    /// The raw request path.
    pub path: String,
    /// The catalogue operation the request hit; `None` for login and unknown routes.
    pub operation_id: Option<String>,
    /// Decoded path placeholders.
    pub path_params: Map<String, Value>,
    /// Decoded query; a repeated key becomes an array.
    pub query: Map<String, Value>,
    /// The JSON body (a form body as an object, with the password masked).
    pub body: Option<Value>,
    /// Who the bearer token authenticated, if it did.
    pub user: Option<AttemptUser>,
    pub agent: AgentHeaders,
    /// Why the request was refused before being served, if it was.
    pub refusal: Option<Refusal>,
    /// The fault actions that fired for it.
    pub faults: Vec<FaultAction>,
    /// HTTP status sent; `None` when no response was sent.
    pub status: Option<u16>,
    pub reply: Reply,
    /// What the client could conclude: `succeeded` (2xx and not `success:false`), `failed`, or
    /// `unknown` (no response reached it).
    pub outcome: Outcome,
    /// What changed in the world, whether or not the reply got through.
    pub effects: Vec<Effect>,
    /// Records the reply carried; empty when the reply was lost or replaced by a fault.
    pub observations: Vec<Observation>,
    /// A write refused or answered as a duplicate of an existing record.
    pub duplicate_attempt: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptUser {
    pub id: i64,
    pub name: String,
    /// Superuser in the state and in the token.
    pub super_user: bool,
}

/// The `X-MoviePilot-Agent-*` headers the gateway sends (host-assigned, never model-chosen).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentHeaders {
    pub session: Option<String>,
    pub channel: Option<String>,
    pub source: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// Still being handled (a stall in progress).
    InFlight,
    Sent,
    /// The connection was closed on purpose without a response.
    Dropped,
    /// The client went away, or the server shut down, before a response.
    NotSent,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub kind: RefusalKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    NotFound,
    MethodNotAllowed,
    /// Login with a wrong password or an unknown user.
    BadCredentials,
    /// No bearer token.
    Unauthenticated,
    /// A bearer that is not a valid, unexpired JWT of a known active user.
    InvalidToken,
    /// An admin operation without a superuser.
    Forbidden,
    /// Input that fails validation (HTTP 422).
    Invalid,
    /// Outside the world's restrictions.
    Restricted,
    /// A catalogue operation the fake does not serve (HTTP 501).
    NotServed,
    /// A fault answered instead of the operation.
    Fault,
    /// Another route of the served document answered it (a literal segment captured by a
    /// parameterised route), as that server would.
    Captured,
}

/// A change to the world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "snake_case")]
pub enum Effect {
    SubscriptionCreated {
        id: i64,
        record: Value,
    },
    SubscriptionDeleted {
        id: i64,
        record: Value,
    },
    DownloadAdded {
        infohash: String,
        record: Value,
    },
    SettingUpdated {
        key: String,
        op: String,
        before: Option<Value>,
        after: Option<Value>,
    },
    SchedulerJobRun {
        job_id: String,
    },
}

/// A record a read returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub kind: ObservationKind,
    /// Subscription and site ids are numbers; a download's id is its infohash; media and
    /// library items are `source:id`; a resource is its infohash; a setting its key.
    pub id: Value,
    pub record: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservationKind {
    Subscription,
    Download,
    Downloader,
    DownloadPath,
    Site,
    Transfer,
    Resource,
    Media,
    Library,
    Setting,
    SchedulerJob,
}

impl Observation {
    pub(crate) fn new(kind: ObservationKind, id: impl Into<Value>, record: Value) -> Self {
        Observation {
            kind,
            id: id.into(),
            record,
        }
    }
}

/// Who a tool receipt belongs to, assigned by the host (never from model arguments).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolScope {
    /// `conversation`, `subagent`, `scheduled`, …
    pub kind: String,
    /// The conversation or task id.
    pub task_id: String,
}

/// A host tool's receipt written into the world ledger (`execute_command`, `browse_webpage`):
/// refused attempts too, with the receipt the tool returned as the observation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolEvent {
    /// 1-based among tool events.
    pub sequence: u64,
    /// World API attempts recorded before this event (orders the two lists).
    pub after_attempts: u64,
    pub tool: String,
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_text: Option<String>,
    pub arguments: Value,
    pub scope: ToolScope,
    pub outcome: Outcome,
    /// Why the evaluation wrapper refused it, if it did (nothing ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The tool's own receipt (what the model read).
    pub receipt: Value,
}

/// The world ledger as the oracle reads it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorldLedger {
    pub attempts: Vec<Attempt>,
    pub tool_events: Vec<ToolEvent>,
}
