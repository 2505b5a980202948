//! `mpa-eval` — the evaluation world: the fake MoviePilot, a real HTTP server on MoviePilot's
//! paths that the agent's gateway talks to in tests, in the evaluation harness and in demos
//! (`mpagent dev fake-moviepilot`); and the harness around it (issue 15): scenario files
//! ([`scenario`]), replay trajectories and the scripted model ([`trajectory`], [`scripted`]),
//! the `execute_command` rules ([`guard`]), the final-answer contract ([`answer`]), the generic
//! oracle ([`oracle`]) and one run with its report ([`runner`]). The host under evaluation is
//! given by the caller ([`runner::Subject`]); this crate knows nothing of it.
//!
//! Public API:
//! - [`FakeMoviePilot::start`]`(`[`FakeConfig`]`, `[`WorldState`]`)` → [`FakeHandle`]: `url()`,
//!   `ledger()`, `snapshot()`, `initial_snapshot()`, `set_faults()` / `add_fault()`,
//!   `token_for(user)`, `advance_clock(by)`, `openapi_reads()`, `shutdown()`; [`jwt`]: its token format.
//! - Which server it is ([`recorded`]): [`FakeConfig::openapi`] ([`OpenApiServing`]: a document
//!   generated from the catalogue's routes by default, a given one — the recorded real v2 — that
//!   it also routes by, a given one it routes by without serving, or none) and
//!   [`FakeConfig::answers`] ([`AnswerStyle`]: the world's envelope, or the recorded v2 server's
//!   bare values, 400 `用户权限不足` and plain-text 500s); [`FakeConfig::recorded_v2`] sets both.
//! - [`serve`] and [`load_state_file`]: run it from a state file ([`StateFile`]: `{"config":
//!   {...}, "state": {...}}`); `eval/worlds/demo.json` at the repository root is an example.
//! - State types ([`WorldState`], [`User`], [`Media`], [`Site`], …), faults ([`Fault`],
//!   [`FaultAction`], [`FaultWhen`]), ledger records ([`Attempt`], [`Effect`],
//!   [`Observation`]), [`magnet::infohash`], [`catalog()`] and [`SERVED_OPERATIONS`].
//!
//! Invariants:
//! - Every REST request is one ledger [`Attempt`], refused ones too (unknown route, missing or
//!   bad token, non-superuser, invalid input, unserved operation, a route captured by another,
//!   fault); reads of the OpenAPI document (no REST call, no credentials) are only counted. The
//!   ledger is reachable only through the handle, never over HTTP, and holds no token or
//!   password.
//! - Only records a reply actually carried are [`Observation`]s: a dropped, unsent or
//!   fault-replaced reply has none, while its effects stay recorded.
//! - Serving a call, deduplicating it, applying its effect, deciding post-effect faults and
//!   writing its ledger entry happen under one lock, so parallel calls cannot double-create.
//! - Dedup is by identity: a subscription by media (`media_source`+`media_id`, or v2 `tmdbid`
//!   …) + season + music type; a download by infohash from the magnet, whatever its `dn=` or
//!   hex case. A duplicate never creates and is flagged `duplicate_attempt`.
//! - REST routes accept only HS256 JWT bearers signed with the configured secret (like
//!   MoviePilot): none → 401, a bad/expired token or an API token → 403, a non-superuser on an
//!   admin operation → 403 (400 `用户权限不足` in the recorded v2 style). A wrong password and an
//!   unknown user get the same login error.
//! - A `drop` fault closes the TCP connection without writing a byte, so the client sees a
//!   transport error, never a 5xx.

pub mod answer;
mod auth;
pub mod catalog;
pub mod compare;
pub mod delivery;
mod error;
mod faults;
pub mod guard;
mod handler;
pub mod jwt;
mod ledger;
pub mod magnet;
pub mod matcher;
pub mod oracle;
pub mod page;
pub mod recorded;
pub mod runner;
pub mod scenario;
pub mod scripted;
mod server;
mod state;
pub mod steering;
pub mod tap;
pub mod trajectory;
mod world;

pub use auth::{Claims, LOGIN_PATH, issue_token};
pub use catalog::{Catalog, Operation, catalog};
pub use error::{EvalError, Result};
pub use faults::{Fault, FaultAction, FaultWhen};
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use faults::{CallView, FaultBook};
pub use ledger::{
    AgentHeaders, Attempt, AttemptUser, Effect, Observation, ObservationKind, Refusal, RefusalKind,
    Reply, ToolEvent, ToolScope, WorldLedger,
};
pub use recorded::{AnswerStyle, OpenApiServing};
pub use server::{FakeConfig, FakeHandle, FakeMoviePilot, ToolRecorder, load_state_file, serve};
pub use state::{
    ConfigSection, DownloadPath, Downloader, DuplicateSubscription, LastSearch, LibraryItem, Media,
    Restrictions, Row, SchedulerJob, Site, StateFile, Torrent, User, WorldState,
};
pub use world::SERVED_OPERATIONS;
