//! The user's own MoviePilot as the agent sees it (issue 25): at start the gateway reads the
//! server's OpenAPI and reconciles the catalogue with it (`mpa_gateway::ServerView`), the
//! operation guides are rendered for what it offers, and whenever that changes later (a new
//! server version, a sign-in, a route that answered 404/405) the guides follow. What is known is
//! reported by `/healthz` and `mpagent doctor` ([`health`]).

use super::MoviePilotAccess;
use super::guides;
use mpa_gateway::{AvailabilityCounts, NoOpenApi, ServerKnowledge};
use mpa_protocol::Durability;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long opening a host waits for MoviePilot's OpenAPI; the first call tries again.
const START_WAIT: Duration = Duration::from_secs(5);

/// Reads the server's routes (bounded by [`START_WAIT`]), installs the guides for them, and
/// keeps the guides in step with later changes.
pub async fn start(access: &MoviePilotAccess, skills_root: PathBuf, durability: Durability) {
    let client = access.client.clone();
    let knowledge = match tokio::time::timeout(START_WAIT, client.server().refresh(&client)).await {
        Ok(k) => k,
        Err(_) => {
            tracing::warn!(
                "MoviePilot's OpenAPI was not read within {} s; the first call tries again",
                START_WAIT.as_secs()
            );
            client.server().knowledge()
        }
    };
    install_guides(&skills_root, &knowledge, durability);
    // One install at a time: two quick changes must not interleave their writes.
    let one = Arc::new(Mutex::new(()));
    client.server().on_change(move |k| {
        let k = k.clone();
        let root = skills_root.clone();
        let one = Arc::clone(&one);
        let job = move || {
            let _one = one.lock().unwrap_or_else(PoisonError::into_inner);
            install_guides(&root, &k, durability);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(job)),
            Err(_) => job(),
        }
    });
}

fn install_guides(root: &Path, knowledge: &ServerKnowledge, durability: Durability) {
    match guides::install(root, &guides::for_server(knowledge), durability) {
        Ok(report) => {
            for name in report.kept_edits {
                tracing::info!(skill = %name, "public skill edited by an administrator; left as it is");
            }
        }
        Err(e) => tracing::warn!(error = %e, "MoviePilot operation skills not installed"),
    }
}

/// What is known of the server, as `/healthz` and `mpagent doctor` report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MoviePilotHealth {
    /// `reconciled` (its routes are known), `catalogue_only` (no usable OpenAPI) or
    /// `unchecked` (not read yet).
    pub routes: &'static str,
    /// How the server is named ("MoviePilot (OpenAPI 419600c61744)").
    pub server: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// How many catalogue operations it offers, and why the others are missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operations: Option<AvailabilityCounts>,
    /// Why only the catalogue is used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What is known of the server now (no I/O).
pub fn health(access: &MoviePilotAccess) -> MoviePilotHealth {
    health_of(&access.client.server().knowledge())
}

/// The report for one piece of knowledge.
pub fn health_of(knowledge: &ServerKnowledge) -> MoviePilotHealth {
    match knowledge {
        ServerKnowledge::Reconciled(r) => MoviePilotHealth {
            routes: "reconciled",
            server: r.label().to_owned(),
            version: r.version().map(str::to_owned),
            operations: Some(r.counts()),
            note: None,
        },
        ServerKnowledge::CatalogueOnly(why) => MoviePilotHealth {
            routes: "catalogue_only",
            server: knowledge.label(),
            version: None,
            operations: None,
            note: Some(format!(
                "{why}; every catalogue operation is offered and checked by MoviePilot itself{}",
                match why {
                    NoOpenApi::Unreachable(_) => " (read again on the next call)",
                    NoOpenApi::NotServed(_) => "",
                }
            )),
        },
        ServerKnowledge::Unchecked => MoviePilotHealth {
            routes: "unchecked",
            server: knowledge.label(),
            version: None,
            operations: None,
            note: Some("MoviePilot's routes have not been read yet".to_owned()),
        },
    }
}

/// The report of the agent's MoviePilot, if one is configured.
pub fn agent_health(agent: &crate::Agent) -> Option<MoviePilotHealth> {
    agent
        .services()
        .caps
        .get::<crate::capability::MoviePilot>()
        .map(|m| health(m.access()))
}
