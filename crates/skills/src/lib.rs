//! The skill library of moviepilot-agent: public read-only skills plus each user's personal
//! skills, `skills_list` / `skill_view` / `skill_manage`, the 9-strategy [`patch_matcher`],
//! ownership, archive, pins and crash recovery.
//!
//! Public API (core's tool adapters stay thin: JSON in, JSON out):
//! - [`SkillHub::new`]`(data_dir)`: public skills in `agent/skills/`, personal skills in
//!   `agent/runtime/learning/users/<user-key>/skills/` (DESIGN.md §3).
//! - [`SkillHub::skills_list`], [`SkillHub::skill_view`] (512 KiB cap; records a content hash
//!   for read-before-write), [`SkillHub::skill_manage`] (batch `{operations: [...]}`, 1–20 ops).
//! - [`SkillHub::user_command`]: `/skills restore|adopt|pin|unpin NAME`, from the user's own text.
//! - [`SkillHub::prompt_block`]: the `<personal_skills>` system-prompt block.
//! - [`SkillHub::recover_on_start`]: rolls back interrupted batches, cleans quarantine dirs.
//! - [`patch_matcher::apply`] / [`patch_matcher::ratio`] (== difflib `SequenceMatcher.ratio`).
//! - [`WriteOrigin`] / [`ReviewToken`]: foreground vs background-review writes.
//!
//! Invariants:
//! - public skills are never written; a personal skill can never shadow a public name;
//! - `.ownership.json` is written only by the host; tool paths can never name it (support
//!   files live under `references/`, `templates/`, `scripts/`, `assets/` only);
//! - a background review only touches skills it created (`created_by: agent`) that are not
//!   pinned, only after `skill_view` of the exact current content, and deletes only by
//!   archiving into `.archive/` with an `absorbed_into` target;
//! - a batch is planned fully in memory, then committed under the user's `.mutation.lock`
//!   with a write-ahead journal: every file is written atomically, a failure restores every
//!   touched path in reverse order, and a crash is rolled back by `recover_on_start`.

mod catalog;
mod commands;
pub mod difflib;
#[path = "../../memory/src/durable_fs.rs"]
mod durable_fs;
mod manage;
mod ownership;
pub mod patch_matcher;
#[path = "../../memory/src/threat.rs"]
pub mod threat;
mod validate;

pub use catalog::{
    SkillSource, skill_manage_description, skill_manage_schema, skill_view_description,
    skill_view_schema, skills_list_description, skills_list_schema,
};
pub use manage::CommitHook;

use mpa_protocol::UserKey;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub use mpa_protocol::{ReviewToken, WriteOrigin};

/// Errors of the skill store. Shown to models and users; never contain file contents.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("skills are busy: another write is in progress, retry shortly")]
    Busy,
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Refused(String),
    #[error("the skill batch was cancelled; nothing was changed")]
    Cancelled,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// (user key, review id or "foreground") → path → SHA-256 of the content last viewed.
type ReadMarks = HashMap<(String, String), HashMap<PathBuf, String>>;

/// Entry point for skills of every user. Cheap to clone.
#[derive(Clone)]
pub struct SkillHub {
    data_dir: PathBuf,
    read_marks: Arc<Mutex<ReadMarks>>,
    commit_hook: Option<CommitHook>,
}

impl std::fmt::Debug for SkillHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillHub")
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

impl SkillHub {
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
    pub fn end_review(&self, actor: &mpa_protocol::Actor, token: &ReviewToken) {
        let key = Self::mark_key(
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

    pub(crate) fn mark_key(key: &UserKey, origin: &WriteOrigin) -> (String, String) {
        match origin {
            WriteOrigin::Foreground => (key.as_str().to_string(), "foreground".into()),
            WriteOrigin::BackgroundReview(t) => {
                (key.as_str().to_string(), format!("review:{}", t.id()))
            }
        }
    }
}
