//! Outbound contributors: what a model request carries beyond the transcript, added to an
//! outbound copy only (the transcript and the frozen system prompt never change for it). Each
//! contributor is one small module implementing [`Contributor`]; [`standard`] is the one ordered
//! list. They run in that order before every model call, each seeing what the earlier ones
//! added: blocks appended to the final message (so the prompt prefix stays byte-identical for
//! provider caches), a continuation note after the transcript, and the tools offered.
//!
//! Adding a contributor: a module here (or in its capability) implementing [`Contributor`],
//! placed in [`standard`] where its block belongs.

mod acting_note;
mod attached_images;
mod continuation;
mod discovery;
mod plan_block;
mod vision;

pub use continuation::EMPTY_ANSWER_NUDGE;

use super::steps::{LoopSetup, LoopState};
use crate::tools::SessionState;
use crate::transcript::Transcript;
use mpa_protocol::ToolSpec;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a contributor reads.
pub struct StepView<'a> {
    pub setup: &'a LoopSetup<'a>,
    pub state: &'a LoopState,
    pub transcript: &'a Transcript,
    pub session: &'a SessionState,
}

/// What the contributors build for one model call.
#[derive(Default)]
pub struct Outbound {
    /// Appended, in order, to the outbound copy of the final message.
    pub blocks: Vec<String>,
    /// A host note after the transcript (never saved).
    pub continuation: Option<String>,
    /// The tools this call offers instead of the loop's baseline (tool discovery).
    pub specs: Option<Vec<ToolSpec>>,
    /// Tool discovery: each candidate's status, for the request budget report.
    pub tool_discovery: Option<BTreeMap<String, String>>,
    /// Outbound copies of transcript messages and messages sent after them (the vision
    /// projection's notes and observation messages).
    pub patches: super::request::Patches,
    /// The request shows the model tool images.
    pub observed: bool,
}

pub trait Contributor: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    fn contribute(&self, view: &StepView<'_>, out: &mut Outbound);
}

/// The contributors, in request order. This list is the one place where a contributor is added.
pub fn standard() -> Vec<Arc<dyn Contributor>> {
    vec![
        // Slot: steering (queued user messages join the transcript before these run, never
        // between a tool call and its result — spec runtime.md §2.3).
        Arc::new(acting_note::ActingNote),
        Arc::new(plan_block::PlanBlock),
        Arc::new(discovery::ToolDiscovery),
        Arc::new(continuation::Continuation),
        // After discovery: lists the Python helpers of exactly this request's tools.
        Arc::new(crate::code::CodeHelpers),
        // Tool images to a model that can see, or a note that it did not (spec runtime.md
        // §9.3): patches on the copy, so a compaction proposed later keeps only those after
        // its cut.
        Arc::new(vision::VisionProjection),
        // After the projection (on top of its copies): the user's attached images, kept in the
        // chat as references, sent as images (or a note once gone).
        Arc::new(attached_images::AttachedImages),
    ]
}
