//! The hourly retention pass (`DATA_CLEANUP_ENABLE`, `DATA_CLEANUP_AGENT_CHAT_DAYS`; 0 days keeps
//! everything): chat evidence by each history store's own last activity, and write receipts that
//! were settled (`succeeded`, `failed`, `pending`) before the cut-off. An open receipt
//! (`running`/`unknown`) is never expired by age: it is what a later turn must verify before
//! retrying the write (spec runtime.md §6.8).

use crate::Agent;

/// What one pass removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// History stores that were swept.
    pub history_users: usize,
    /// Settled receipts removed.
    pub receipts_removed: usize,
}

impl Agent {
    /// One retention pass over everything older than `days` days; `0` does nothing. Failures are
    /// logged and the rest of the pass still runs.
    pub async fn retention_pass(&self, days: u32) -> RetentionReport {
        let mut report = RetentionReport::default();
        if days == 0 {
            return report;
        }
        if let Some(history) = self.services().caps.history() {
            for user in history.known_users() {
                match history.cleanup(&user, days).await {
                    Ok(r) => {
                        report.history_users += 1;
                        tracing::info!(report = ?r, "history retention pass");
                    }
                    Err(e) => tracing::warn!(error = %e, "history retention pass failed"),
                }
            }
        }
        let cutoff = chrono::Utc::now() - chrono::Duration::days(i64::from(days));
        match self.services().store.ledger_cleanup(cutoff).await {
            Ok(n) => report.receipts_removed = n,
            Err(e) => tracing::warn!(error = %e, "receipt retention pass failed"),
        }
        tracing::info!(
            days,
            receipts_removed = report.receipts_removed,
            "retention pass"
        );
        report
    }
}
