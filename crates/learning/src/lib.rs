//! What moviepilot-agent learns and keeps across sessions: stable **memory** (curated
//! `MEMORY.md` / `USER.md` entries with budgets, background-review proposals and a line search)
//! and **skills** (public read-only skills plus each user's personal skills, the fuzzy
//! [`patch_matcher`], ownership, archive, pins and crash recovery). One crate, because both share
//! the durable write rules (`durable_fs`) and the prompt-injection [`threat`] scanner.
//!
//! This crate is a domain API: typed requests in, typed `Serialize` results out. It knows nothing
//! of tool JSON schemas, tool descriptions or the model; core's tools (`core/src/tools/`) parse
//! the model's arguments into these types and serialise the results.
//!
//! Public API:
//! - [`Memory::new`]`(`[`MemoryConfig`]`)` — files under `agent/memory/` (DESIGN.md §3).
//!   - [`Memory::write`]`(actor, origin, `[`memory::WriteRequest`]`)` →
//!     `Result<`[`memory::Written`]`, `[`memory::WriteFailure`]`>`: add / replace / remove, one op
//!     or an all-or-nothing batch; a background review's rewrites become proposals
//!     ([`memory::Written::Staged`]); consecutive failures per turn are capped.
//!   - [`Memory::pending`] — the proposals waiting for the user (read-only).
//!   - [`Memory::search`]`(actor, `[`memory::SearchRequest`]`)` → [`memory::SearchResults`].
//!   - [`Memory::snapshot`] → [`memory::MemorySnapshot`], frozen by the caller once per session;
//!     [`memory::MemorySnapshot::render`] is the system-prompt text.
//!   - [`Memory::user_command`] — `/memory pending|approve|discard`, parsed from the user's own
//!     latest text only (never from tool arguments): the model can never approve a proposal.
//!   - [`Memory::begin_user_turn`] resets the failure cap; [`Memory::end_review`] drops a
//!     review's counter.
//! - [`Skills::new`]`(data_dir)` — public skills in `agent/skills/`, personal skills in
//!   `agent/runtime/learning/users/<user-key>/skills/`.
//!   - [`Skills::list`] → [`skills::SkillList`]; [`Skills::view`] → [`skills::SkillFile`]
//!     (512 KiB cap; records a content hash for read-before-write).
//!   - [`Skills::manage`]`(actor, origin, Vec<`[`skills::ManageOp`]`>)` →
//!     `Result<`[`skills::ManageReport`]`, `[`skills::ManageFailure`]`>`: 1–20 ordered ops, all
//!     or nothing.
//!   - [`Skills::user_command`] — `/skills restore|adopt|pin|unpin NAME`, from the user's text.
//!   - [`Skills::prompt_block`] — the `<personal_skills>` system-prompt block.
//!   - [`Skills::recover_on_start`] — rolls back interrupted batches, cleans quarantine dirs.
//! - [`patch_matcher::apply`] / [`patch_matcher::ratio`] (== difflib `SequenceMatcher.ratio`).
//! - [`threat::scan`] / [`threat::first_block`] — the shared scanner (spec §1.10), which also
//!   refuses credentials ([`threat::credential`], `mpa-redact`'s rules); [`threat::shown`] is how
//!   stored text may be shown to a model.
//! - [`WriteOrigin`] / [`ReviewToken`]: foreground vs background-review writes; the caller (the
//!   host) decides it, never the model.
//! - [`Error`] / [`Result`]: the crate's one error type.
//!
//! Invariants:
//! - only admins write the global `MEMORY.md`; public skills are never written; no request can
//!   name another user or a path outside the caller's own stores;
//! - every mutation holds the per-root `.mutation.lock`, re-reads under it and writes atomically
//!   (temp, fsync, rename); an unreadable file is never treated as empty;
//! - a memory file that would not round-trip (external edits) is backed up and never rewritten;
//! - poisoned memory entries are masked in the snapshot and in every echoed entry list, never on
//!   disk;
//! - no memory or skill write stores a credential (refused, with a message naming its kind); a
//!   credential already on disk is redacted wherever memory or skills show text to a model (the
//!   prompt snapshot, echoed entries, search hits, skill views, the skills index);
//! - a background review only touches skills it created (`created_by: agent`) that are not
//!   pinned, only after viewing their exact current content, and deletes only by archiving;
//! - a skill batch is planned fully in memory, then committed under the user's lock with a
//!   write-ahead journal: a failure restores every touched path, a crash is rolled back at start.

mod difflib;
mod durable_fs;
mod error;
pub mod memory;
mod origin;
pub mod patch_matcher;
pub mod skills;
pub mod threat;

// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use difflib::{Matcher, OpTag};
pub use error::{Error, Result};
pub use memory::{Memory, MemoryConfig};
pub use origin::{ReviewToken, WriteOrigin};
pub use skills::Skills;

/// The key of an actor's own stores (`actor.user_key()` inside this crate).
pub(crate) trait ActorKey {
    fn user_key(&self) -> mpa_redact::UserKey;
}

impl ActorKey for mpa_protocol::Actor {
    fn user_key(&self) -> mpa_redact::UserKey {
        mpa_redact::UserKey::for_user(&self.user_id)
    }
}
