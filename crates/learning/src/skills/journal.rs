//! The write-ahead journal of a skill batch: back up every path the plan touches, write the
//! manifest, apply the writes in plan order, drop the journal. A failure restores every path
//! in reverse order; a crash leaves the journal for [`Skills::recover_on_start`] to roll back.

use super::Skills;
use super::ownership::{self, Sidecar};
use super::plan::Plan;
use crate::{Error, Result, WriteOrigin, durable_fs};
use mpa_redact::UserKey;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Test seam called after each journaled commit step (see [`Skills::with_commit_hook`]).
pub type CommitHook = Arc<dyn Fn(usize) + Send + Sync>;

/// Directory (under the user's learning root) holding one sub-directory per open batch.
pub(crate) const TXN_DIR: &str = ".skills-txn";

#[derive(Debug, Serialize, Deserialize)]
struct JournalEntry {
    path: PathBuf,
    existed: bool,
    backup: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub id: String,
    entries: Vec<JournalEntry>,
    /// Directories created by the batch, outermost first.
    new_dirs: Vec<PathBuf>,
}

impl Manifest {
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

fn io(context: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(context, e)
}

impl Skills {
    /// Journaled commit of `plan` plus the ownership sidecar (written last).
    pub(crate) fn commit(
        &self,
        key: &UserKey,
        origin: &WriteOrigin,
        plan: &Plan,
        sidecar: &Sidecar,
    ) -> Result<()> {
        let personal = self.personal_root(key);
        let mut writes: Vec<(PathBuf, Option<Vec<u8>>)> = plan
            .order
            .iter()
            .map(|p| {
                (
                    p.clone(),
                    plan.staged
                        .get(p)
                        .cloned()
                        .flatten()
                        .map(String::into_bytes),
                )
            })
            .collect();
        writes.push((
            personal.join(ownership::SIDECAR),
            Some(ownership::encode(sidecar)?),
        ));

        let id = uuid::Uuid::new_v4().simple().to_string();
        let txn = self.learning_root(key).join(TXN_DIR).join(&id);
        durable_fs::ensure_dir(&txn).map_err(io("cannot create the batch journal"))?;
        let mut entries = Vec::new();
        for (n, (path, _)) in writes.iter().enumerate() {
            let existed = fs::symlink_metadata(path).is_ok_and(|m| m.is_file());
            let backup = if existed {
                let name = format!("orig-{n}");
                let bytes = fs::read(path).map_err(io("cannot back up a skill file"))?;
                durable_fs::atomic_write(&txn.join(&name), &bytes)
                    .map_err(io("cannot back up a skill file"))?;
                Some(name)
            } else {
                None
            };
            entries.push(JournalEntry {
                path: path.clone(),
                existed,
                backup,
            });
        }
        let mut new_dirs: Vec<PathBuf> = Vec::new();
        for (path, _) in &writes {
            let mut missing = Vec::new();
            let mut cur = path.parent();
            while let Some(d) = cur {
                if d.exists() || !d.starts_with(&personal) {
                    break;
                }
                missing.push(d.to_path_buf());
                cur = d.parent();
            }
            for d in missing.into_iter().rev() {
                if !new_dirs.contains(&d) {
                    new_dirs.push(d);
                }
            }
        }
        let manifest = Manifest {
            id: id.clone(),
            entries,
            new_dirs,
        };
        let bytes = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| Error::Invalid(format!("cannot encode the batch journal: {e}")))?;
        durable_fs::atomic_write(&txn.join("manifest.json"), &bytes)
            .map_err(io("cannot write the batch journal"))?;

        let applied = (|| -> Result<()> {
            for (step, (path, content)) in writes.iter().enumerate() {
                if let WriteOrigin::BackgroundReview(t) = origin
                    && t.is_cancelled()
                {
                    return Err(Error::Cancelled);
                }
                match content {
                    Some(bytes) => durable_fs::atomic_write(path, bytes)
                        .map_err(io("cannot write a skill file"))?,
                    None => {
                        fs::remove_file(path).map_err(io("cannot remove a skill file"))?;
                        if let Some(parent) = path.parent() {
                            // An emptied support directory goes too (non-empty ones stay).
                            let _ = fs::remove_dir(parent);
                        }
                    }
                }
                self.hook(step + 1);
            }
            Ok(())
        })();
        match applied {
            Ok(()) => {
                let _ = fs::remove_dir_all(&txn);
                Ok(())
            }
            Err(e) => {
                rollback(&txn, &manifest);
                Err(e)
            }
        }
    }
}

/// The manifest of an interrupted batch, if its journal directory has a readable one.
pub(crate) fn read_manifest(txn: &Path) -> Option<Manifest> {
    fs::read(txn.join("manifest.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
}

/// Restore every journaled path in reverse order, remove directories the batch created,
/// then drop the journal. Each restore is itself an atomic write.
pub(crate) fn rollback(txn: &Path, m: &Manifest) {
    for e in m.entries.iter().rev() {
        match (&e.backup, e.existed) {
            (Some(b), true) => {
                if let Ok(bytes) = fs::read(txn.join(b)) {
                    let _ = durable_fs::atomic_write(&e.path, &bytes);
                }
            }
            _ => {
                let _ = fs::remove_file(&e.path);
            }
        }
    }
    for d in m.new_dirs.iter().rev() {
        let _ = fs::remove_dir(d);
    }
    let _ = fs::remove_dir_all(txn);
}
