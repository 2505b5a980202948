//! Settle rules: what a model answer means before anything of it runs. Each rule is a small
//! type implementing [`SettleRule`]; [`standard`] is the one ordered list, and the first rule
//! with a verdict decides. Without one, an answer with tool calls goes on to the gates and an
//! answer without is the turn's final answer.
//!
//! Adding a rule: a type here (or in its own module, as the continuation nudges of spec
//! learning-guardrails.md §6 are: [`super::nudge`]), placed in [`standard`]; it may keep counts
//! in [`LoopState`] or the turn's slots and add its note through a contributor.

use super::error::TurnError;
use super::steps::LoopState;
use mpa_model::Completion;
use mpa_protocol::TurnStatus;
use std::sync::Arc;

/// The answer a rule judges.
pub struct Answer<'a> {
    pub completion: &'a Completion,
    /// The output limit cut it off (`finish_reason: "length"`).
    pub truncated: bool,
}

/// A rule's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// Not saved; the model is asked again (a contributor says why).
    Discard,
    /// Not saved; the loop ends.
    Reject(TurnStatus, Option<TurnError>),
    /// Saved; the loop ends with this status.
    Final(TurnStatus, Option<TurnError>),
    /// Saved; the model is asked again.
    Continue,
}

pub trait SettleRule: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    fn settle(&self, answer: &Answer<'_>, state: &mut LoopState) -> Option<Settled>;
}

/// The settle rules, in order. This list is the one place where a rule is added.
pub fn standard() -> Vec<Arc<dyn SettleRule>> {
    vec![
        Arc::new(EmptyAnswer),
        Arc::new(CutOffOutput),
        // A short answer announcing work it did not do gets host continuation prompts.
        Arc::new(super::nudge::ContinuationNudge),
    ]
}

/// An empty answer is never saved (and so never resent); the model gets one host continuation,
/// then the turn fails saying so.
pub struct EmptyAnswer;

impl SettleRule for EmptyAnswer {
    fn name(&self) -> &'static str {
        "empty_answer"
    }

    fn settle(&self, answer: &Answer<'_>, state: &mut LoopState) -> Option<Settled> {
        if !answer.completion.is_empty_answer() {
            state.empty_answers = 0;
            return None;
        }
        if state.empty_answers == 0 {
            state.empty_answers += 1;
            return Some(Settled::Discard);
        }
        Some(Settled::Reject(
            TurnStatus::Failed,
            Some(TurnError::EmptyAnswer),
        ))
    }
}

/// A final answer the output limit cut off is kept, and the turn is `partial`.
pub struct CutOffOutput;

impl SettleRule for CutOffOutput {
    fn name(&self) -> &'static str {
        "cut_off_output"
    }

    fn settle(&self, answer: &Answer<'_>, _state: &mut LoopState) -> Option<Settled> {
        (answer.truncated && answer.completion.tool_calls.is_empty()).then_some(Settled::Final(
            TurnStatus::Partial,
            Some(TurnError::OutputTruncated),
        ))
    }
}
