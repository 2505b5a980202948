//! Skills: public read-only skills plus each user's personal skills — listing, viewing, the
//! batched [`Skills::manage`], ownership, archive, pins and crash recovery.
//!
//! [`Skills`] is the entry point; requests are [`ManageOp`]s, results [`SkillList`],
//! [`SkillFile`], [`ManageReport`] / [`ManageFailure`].

mod archive;
mod catalog;
mod commands;
mod journal;
mod manage;
mod ownership;
mod plan;
mod recovery;
mod reply;
mod request;
mod validate;
mod view;

pub use catalog::SkillSource;
pub use journal::CommitHook;
pub use ownership::CreatedBy;
pub use reply::{ManageFailure, ManageReport, OpResult, SkillFile, SkillList, SkillSummary};
pub use request::{ManageOp, Patch};
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use validate::{FileTarget, check_file_path, check_name, check_skill_md};
pub use validate::{MAX_CONTENT_CHARS, MAX_FILE_BYTES, NEW_DESCRIPTION_CHARS, SUPPORT_DIRS};

use crate::ActorKey;
use crate::{ReviewToken, WriteOrigin};
use mpa_protocol::Actor;
use mpa_redact::UserKey;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Most operations in one batch.
pub const MAX_OPS: usize = 20;

/// (user key, review id or "foreground") → path → SHA-256 of the content last viewed.
type ReadMarks = HashMap<(String, String), HashMap<PathBuf, String>>;

/// Skills of every user. Cheap to clone.
#[derive(Clone)]
pub struct Skills {
    data_dir: PathBuf,
    read_marks: Arc<Mutex<ReadMarks>>,
    commit_hook: Option<CommitHook>,
}

impl std::fmt::Debug for Skills {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skills")
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

impl Skills {
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            data_dir,
            read_marks: Arc::new(Mutex::new(HashMap::new())),
            commit_hook: None,
        }
    }

    /// Test seam: called with the number of journaled steps applied so far during a commit
    /// (lets a crash test kill the process at a known point).
    #[doc(hidden)]
    pub fn with_commit_hook(mut self, hook: CommitHook) -> Self {
        self.commit_hook = Some(hook);
        self
    }

    /// A background review ended: drop its read-before-write marks.
    pub fn end_review(&self, actor: &Actor, token: &ReviewToken) {
        let key = mark_key(
            &actor.user_key(),
            &WriteOrigin::BackgroundReview(token.clone()),
        );
        if let Ok(mut marks) = self.read_marks.lock() {
            marks.remove(&key);
        }
    }

    pub(crate) fn public_root(&self) -> PathBuf {
        self.data_dir.join("agent").join("skills")
    }

    pub(crate) fn users_root(&self) -> PathBuf {
        self.data_dir
            .join("agent")
            .join("runtime")
            .join("learning")
            .join("users")
    }

    /// `…/learning/users/<key>`: holds the lock and the batch journal.
    pub(crate) fn learning_root(&self, key: &UserKey) -> PathBuf {
        self.users_root().join(key.as_str())
    }

    pub(crate) fn personal_root(&self, key: &UserKey) -> PathBuf {
        self.learning_root(key).join("skills")
    }

    /// Remember that `origin` viewed `path` with this content hash.
    pub(crate) fn record_read(
        &self,
        key: &UserKey,
        origin: &WriteOrigin,
        path: &Path,
        hash: String,
    ) {
        if let Ok(mut marks) = self.read_marks.lock() {
            marks
                .entry(mark_key(key, origin))
                .or_default()
                .insert(path.to_path_buf(), hash);
        }
    }

    /// The hash recorded by the last view of `path` under `origin`.
    pub(crate) fn read_mark(
        &self,
        key: &UserKey,
        origin: &WriteOrigin,
        path: &Path,
    ) -> Option<String> {
        self.read_marks
            .lock()
            .ok()?
            .get(&mark_key(key, origin))?
            .get(path)
            .cloned()
    }

    pub(crate) fn hook(&self, step: usize) {
        if let Some(h) = &self.commit_hook {
            h(step);
        }
    }
}

fn mark_key(key: &UserKey, origin: &WriteOrigin) -> (String, String) {
    match origin {
        WriteOrigin::Foreground => (key.as_str().to_string(), "foreground".into()),
        WriteOrigin::BackgroundReview(t) => {
            (key.as_str().to_string(), format!("review:{}", t.id()))
        }
    }
}
