//! The evidence history as front ends see it (`mpagent history …`, `mpagent bench history`):
//! mpa-history's public, typed API re-exported, plus [`search_json`], which answers exactly as
//! the `session_search` tool does. Front ends depend on mpa-core only; this module is their door
//! to the history crate.

pub use crate::tools::session_search::search_json;
pub use mpa_history::{
    BackfillOptions, BackfillProgress, BackfillSummary, CheckReport, CleanupReport, DeleteReport,
    History, HistoryConfig, HistoryError, HistoryHealth, SearchContext, SearchRequest,
    SearchResponse, StatusReport, bench, corpus, import, legacy, recall, redact,
};

/// The history's part of the host's health report (`/healthz`): `degraded` while some user's
/// store cannot be read; `None` when the host runs without history.
pub fn health(agent: &crate::Agent) -> Option<HistoryHealth> {
    agent.services().caps.history().map(History::health)
}
