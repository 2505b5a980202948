//! The write path: validate, scan, route (apply, or stage a review's rewrite), apply under the
//! store lock, count consecutive failures.

use super::apply::{Fail, apply_batch, apply_single, has_drift};
use super::entries::usage;
use super::reply::{Applied, WriteFailure, Written};
use super::request::{Change, WriteRequest};
use super::sanitize::sanitized;
use super::store::{Scope, Store, Target};
use super::{FAILURE_CAP, Memory};
use crate::{WriteOrigin, durable_fs, threat};
use mpa_protocol::Actor;

impl Memory {
    /// Apply `req` to one of the caller's stores. A background review's adds apply directly;
    /// its replace/remove changes are staged as a proposal only the user can approve. After
    /// [`FAILURE_CAP`] consecutive failures in a turn the failure becomes terminal
    /// (its `terminal` flag is set): a failed memory side effect must never block the answer.
    pub fn write(
        &self,
        actor: &Actor,
        origin: &WriteOrigin,
        req: WriteRequest,
    ) -> Result<Written, WriteFailure> {
        match self.write_once(actor, origin, req) {
            Ok(w) => {
                self.reset_failures(actor, origin);
                Ok(w)
            }
            Err(f) => {
                let n = self.count_failure(actor, origin);
                Err(if n > FAILURE_CAP {
                    WriteFailure::terminal(n)
                } else {
                    f
                })
            }
        }
    }

    fn write_once(
        &self,
        actor: &Actor,
        origin: &WriteOrigin,
        req: WriteRequest,
    ) -> Result<Written, WriteFailure> {
        let req = req.normalised().map_err(WriteFailure::new)?;
        if req.scope == Scope::Global && !actor.is_admin {
            return Err(WriteFailure::new(
                "Only administrators can write the global MEMORY.md; use scope \"user\" (the default) for your own memory.",
            ));
        }
        if req.scope == Scope::Global && req.target == Target::User {
            return Err(WriteFailure::new(
                "The global scope has only MEMORY.md; use target \"memory\" with scope \"global\".",
            ));
        }
        // Scan before any lock or staging: a poisoned batch is rejected as a whole.
        for (i, op) in req.change.ops().iter().enumerate() {
            if let Some(c) = op.content()
                && let Some(f) = threat::first_block(c)
            {
                let msg = f.block_message();
                return Err(WriteFailure::new(if req.change.is_batch() {
                    format!(
                        "Operation {}: {msg} No operations were applied (batch is all-or-nothing).",
                        i + 1
                    )
                } else {
                    msg
                }));
            }
        }
        let store = self.store(actor, req.scope, req.target);
        if let WriteOrigin::BackgroundReview(token) = origin {
            if token.is_cancelled() {
                return Err(WriteFailure::new(
                    "The background review was cancelled; nothing was written.",
                ));
            }
            if req.scope == Scope::Global {
                return Err(WriteFailure::new(
                    "A background review cannot write the global memory.",
                ));
            }
            if req.change.ops().iter().any(|op| !op.is_add()) {
                return self
                    .stage_proposal(actor, &store, &req, token)
                    .map(Written::Staged);
            }
        }
        self.apply_request(&store, &req, origin)
            .map(Written::Applied)
    }

    /// Apply a request under the store lock and write the result once.
    fn apply_request(
        &self,
        store: &Store,
        req: &WriteRequest,
        origin: &WriteOrigin,
    ) -> Result<Applied, WriteFailure> {
        let (_guard, raw, list) = store.lock_and_read()?;
        let rewrites = req.change.is_batch() || req.change.ops().iter().any(|op| !op.is_add());
        if rewrites && has_drift(&raw, &list, store.limit) {
            return Err(drift_refusal(store, &raw));
        }
        let mut work = list.clone();
        let applied = match &req.change {
            Change::Batch(ops) => apply_batch(&mut work, ops, store, true),
            Change::Single(op) => apply_single(&mut work, op, store),
        }
        .map_err(|fail| failure(store, &list, fail))?;
        if let WriteOrigin::BackgroundReview(token) = origin
            && token.is_cancelled()
        {
            return Err(WriteFailure::new(
                "The background review was cancelled; nothing was written.",
            ));
        }
        if applied.changed {
            store.write(&work)?;
        }
        Ok(Applied::new(
            store.target,
            store.scope,
            &work,
            store.limit,
            applied,
        ))
    }
}

/// A refused operation, with the sanitised entries when they help pick `old_text`.
pub(crate) fn failure(store: &Store, list: &[String], fail: Fail) -> WriteFailure {
    WriteFailure {
        matches: fail.matches,
        current_entries: fail
            .show_entries
            .then(|| sanitized(store.target.file_name(), list)),
        usage: Some(format!("{}/{}", usage(list), store.limit)),
        ..WriteFailure::new(fail.error)
    }
}

/// The file was edited by another writer: back it up and refuse to rewrite it.
fn drift_refusal(store: &Store, raw: &str) -> WriteFailure {
    let bak = store.path.with_file_name(format!(
        "{}.bak.{}",
        store.target.file_name(),
        uuid::Uuid::new_v4().simple()
    ));
    let written = durable_fs::atomic_write(&bak, raw.as_bytes());
    let bak_name = bak
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    WriteFailure::new(match written {
        Ok(()) => format!(
            "{} was edited outside the memory tool (it no longer round-trips, or one entry is larger than the whole {}-char budget), so it was not rewritten. A copy was saved as {bak_name} next to it. Integrate its facts one by one with memory(action=\"add\"), then ask the user to clean up the file.",
            store.label, store.limit
        ),
        Err(e) => format!(
            "{} was edited outside the memory tool and could not be backed up ({e}); the file was left untouched. Ask the user to clean it up.",
            store.label
        ),
    })
}
