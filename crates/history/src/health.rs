//! Which users' stores cannot be used right now (a damaged or unreadable file), for the host's
//! health report and for the log: a damaged store fails every capture and search of its user,
//! so it is logged once when found, then at most once an hour while it lasts (not once a turn),
//! and once when it works again. Nothing is repaired here: damaged files are never reset or
//! deleted (spec §12.2); restoring the file from a backup fixes them.

use crate::error::{FailureClass, HistoryError};
use mpa_redact::UserKey;
use serde::Serialize;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often a store that stays unavailable is logged again.
pub const LOG_EVERY: Duration = Duration::from_secs(3600);

struct Damage {
    since: chrono::DateTime<chrono::Utc>,
    reason: String,
    logged_at: Instant,
}

#[derive(Default)]
pub struct HealthBook {
    damaged: HashMap<UserKey, Damage>,
}

/// What [`HealthBook::failed`] and [`HealthBook::succeeded`] ask the caller to log.
#[derive(Debug, PartialEq, Eq)]
pub enum Report {
    Nothing,
    Unavailable,
    Recovered,
}

/// Whether an error means the user's store itself is unusable (not the query, not the caller).
pub(crate) fn is_store_damage(e: &HistoryError) -> bool {
    e.classify() == FailureClass::Storage && !matches!(e, HistoryError::InvalidUser)
}

impl HealthBook {
    /// Records a failed operation; says whether to log it now.
    pub fn failed(&mut self, user: &UserKey, e: &HistoryError, now: Instant) -> Report {
        if !is_store_damage(e) {
            return Report::Nothing;
        }
        let reason = e.to_string();
        match self.damaged.get_mut(user) {
            Some(d) if now.saturating_duration_since(d.logged_at) < LOG_EVERY => {
                d.reason = reason;
                Report::Nothing
            }
            Some(d) => {
                d.reason = reason;
                d.logged_at = now;
                Report::Unavailable
            }
            None => {
                self.damaged.insert(
                    user.clone(),
                    Damage {
                        since: chrono::Utc::now(),
                        reason,
                        logged_at: now,
                    },
                );
                Report::Unavailable
            }
        }
    }

    /// Records an operation that reached the store; says whether it had been unavailable.
    pub fn succeeded(&mut self, user: &UserKey) -> Report {
        match self.damaged.remove(user) {
            Some(_) => Report::Recovered,
            None => Report::Nothing,
        }
    }

    pub fn summary(&self) -> HistoryHealth {
        let since = self.damaged.values().map(|d| d.since).min();
        HistoryHealth {
            status: if self.damaged.is_empty() {
                "ok"
            } else {
                "degraded"
            },
            stores_unavailable: self.damaged.len(),
            unavailable_since: since,
            reason: self
                .damaged
                .values()
                .min_by_key(|d| d.since)
                .map(|d| d.reason.clone()),
        }
    }
}

/// The history's part of the host's health report. User keys are not listed (the report may be
/// public); the log names them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryHealth {
    /// `ok`, or `degraded` while some user's store is unavailable.
    pub status: &'static str,
    /// Users whose store failed with `storage_unavailable` on its last use.
    pub stores_unavailable: usize,
    /// When the oldest of them was found unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable_since: Option<chrono::DateTime<chrono::Utc>>,
    /// Why the oldest of them failed (no message content, no path beyond the store's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
