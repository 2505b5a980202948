//! [`Skills::manage`]: one ordered batch of 1–20 operations, all or nothing. The order of checks
//! is part of the contract: batch limits, then the lock, then each operation in turn.

use super::Skills;
use super::ownership;
use super::plan::Plan;
use super::reply::{ManageFailure, ManageReport};
use super::request::{ManageOp, check_batch};
use crate::ActorKey;
use crate::durable_fs::MutationLock;
use crate::{Error, WriteOrigin};
use mpa_protocol::Actor;

impl Skills {
    /// Plan every operation, then commit them together under the user's lock (a delete is
    /// alone in its batch). A background review may only maintain the skills it created.
    pub fn manage(
        &self,
        actor: &Actor,
        origin: &WriteOrigin,
        ops: Vec<ManageOp>,
    ) -> Result<ManageReport, ManageFailure> {
        check_batch(&ops).map_err(ManageFailure::new)?;
        if ops.iter().any(ManageOp::is_delete) && ops.len() > 1 {
            return Err(ManageFailure::new(
                "delete must be the only operation in its batch.",
            ));
        }
        let cancelled = || matches!(origin, WriteOrigin::BackgroundReview(t) if t.is_cancelled());
        if cancelled() {
            return Err(ManageFailure::new(Error::Cancelled.to_string()));
        }
        let key = actor.user_key();
        let _guard = MutationLock::acquire(&self.learning_root(&key)).map_err(|e| {
            ManageFailure::new(if e.kind() == std::io::ErrorKind::WouldBlock {
                Error::Busy { store: "skills" }.to_string()
            } else {
                format!("cannot lock the skill store: {e}")
            })
        })?;
        let mut sidecar = ownership::load(&self.personal_root(&key))
            .map_err(|e| ManageFailure::new(e.to_string()))?;
        if let [
            ManageOp::Delete {
                name,
                absorbed_into,
            },
        ] = ops.as_slice()
        {
            return self
                .delete(&key, origin, name, absorbed_into.as_deref(), &mut sidecar)
                .map_err(|f| f.into_failure(1));
        }
        let mut plan = Plan::default();
        for (i, op) in ops.iter().enumerate() {
            if cancelled() {
                return Err(ManageFailure::new(Error::Cancelled.to_string()));
            }
            self.plan_op(&key, origin, op, &mut plan, &mut sidecar)
                .map_err(|f| f.into_failure(i + 1))?;
        }
        match self.commit(&key, origin, &plan, &sidecar) {
            Ok(()) => Ok(ManageReport {
                success: true,
                applied: ops.len(),
                skills: plan.skills,
                results: plan.results,
                cleanup_pending: None,
            }),
            Err(e) => Err(ManageFailure::new(format!(
                "{e}. No files were changed (the batch was rolled back)."
            ))),
        }
    }
}
