//! The call-gate chain: every rule that may refuse, answer or stop a tool call, in one ordered
//! list ([`Gates::standard`]) that the one call path ([`super::invoke`]) runs for every call.
//!
//! A gate sees a call three times:
//! - [`Gate::admit`] once per model response, with the whole batch, before any call of it runs
//!   (e.g. "none of this response's calls runs" for a secret read, a per-turn budget);
//! - [`Gate::check`] per call, before dispatch: [`Verdict::Allow`], [`Verdict::Answer`] (the
//!   call is answered and never runs) or [`Verdict::Halt`] (answered, and the turn ends after
//!   this batch);
//! - [`Gate::observe`] per call that ran, with its output (which it may annotate), and may halt
//!   the turn too.
//!
//! Gates keep their state in the session's slots ([`CallFacts::session`]) or in this loop run's
//! ([`CallFacts::turn`], fresh for every turn, review or nested loop). The first gate that
//! answers a call decides; the first halt of a batch is the one the turn ends with.
//!
//! Adding a gate: a type implementing [`Gate`], placed in [`Gates::standard`] at the position
//! its rule has among the others.

use super::policy::Origin;
use super::{SessionState, ToolMeta, ToolOutput};
use crate::sync::Slots;
use mpa_protocol::{Actor, EffectClass, ToolCall, TurnStatus};
use std::sync::Arc;

/// What a gate knows about one call.
#[derive(Clone, Copy)]
pub struct CallFacts<'a> {
    pub actor: &'a Actor,
    pub origin: Origin,
    /// The session's channel (`web`, `cli`, `openai`, …).
    pub channel: &'a str,
    pub tool: &'a str,
    pub call_id: &'a str,
    pub meta: &'a ToolMeta,
    /// The call's effect (the tool may refine its own per call).
    pub effect: EffectClass,
    /// This call needs an administrator (the tool's own flag, or e.g. an admin-only operation).
    pub requires_admin: bool,
    /// What needs the administrator when it is not the whole tool ("the MoviePilot operation
    /// scheduler.list"): the refusal names it, so the tool is not taken for admin-only.
    pub admin_subject: Option<&'a str>,
    /// The parsed arguments object (`None` when they were not a JSON object).
    pub args: Option<&'a serde_json::Value>,
    /// How many calls of this same tool the model response holds (1 outside a turn).
    pub same_tool_in_response: usize,
    pub session: &'a SessionState,
    pub turn: &'a Slots,
}

/// Why a gate ends the turn on purpose. The turn ends after the current batch with `status`;
/// `reply`, when set, is said to the user as the turn's final answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Halt {
    pub code: String,
    pub message: String,
    pub status: TurnStatus,
    pub reply: Option<String>,
}

impl Halt {
    pub fn to_event(&self) -> mpa_protocol::TurnHalt {
        mpa_protocol::TurnHalt {
            code: self.code.clone(),
            message: self.message.clone(),
        }
    }
}

/// A gate's answer to one call before it runs.
#[derive(Debug)]
pub enum Verdict {
    Allow,
    /// Answered with this output; the call never runs.
    Answer(ToolOutput),
    /// Answered with `output`, and the turn ends after this batch.
    Halt {
        output: ToolOutput,
        halt: Halt,
    },
}

/// One call of a model response, as [`Gate::admit`] sees it.
pub struct BatchCall<'a> {
    pub call: &'a ToolCall,
    /// The parsed arguments object, when they parse.
    pub args: Option<serde_json::Value>,
    /// The output limit cut the arguments off (they may still parse by chance).
    pub cut_off: bool,
    /// The tool's metadata, when a tool of that name exists now.
    pub meta: Option<ToolMeta>,
}

/// A model response's calls (or one direct call), before any runs.
pub struct Batch<'a> {
    pub actor: &'a Actor,
    pub origin: Origin,
    pub channel: &'a str,
    pub calls: &'a [BatchCall<'a>],
    pub session: &'a SessionState,
    pub turn: &'a Slots,
}

/// What [`Gate::admit`] decided for a batch: an answer for each call that must not run (`None`:
/// it runs, through [`Gate::check`] first), and the halt, if any.
#[derive(Debug, Default)]
pub struct Admission {
    pub answers: Vec<Option<ToolOutput>>,
    pub halt: Option<Halt>,
}

impl Admission {
    /// Answers call `i` unless an earlier gate did.
    pub fn answer(&mut self, i: usize, output: ToolOutput) {
        if let Some(slot) = self.answers.get_mut(i)
            && slot.is_none()
        {
            *slot = Some(output);
        }
    }

    /// Ends the turn after this batch unless an earlier gate did.
    pub fn halt(&mut self, halt: Halt) {
        self.halt.get_or_insert(halt);
    }
}

pub trait Gate: Send + Sync + 'static {
    fn name(&self) -> &'static str;

    /// Once per batch, before any of its calls runs.
    fn admit(&self, _batch: &Batch<'_>, _admission: &mut Admission) {}

    /// Per call, before it runs.
    fn check(&self, _call: &CallFacts<'_>) -> Verdict {
        Verdict::Allow
    }

    /// Per call, after it ran (also for calls a gate answered in `check`), in the order the
    /// model emitted the calls; may add host notes ([`ToolOutput::add_note`]) or metadata. `output`
    /// is what the model will read (a preview when the result was capped); `full` is the whole
    /// result in that case.
    fn observe(
        &self,
        _call: &CallFacts<'_>,
        _output: &mut ToolOutput,
        _full: Option<&str>,
    ) -> Option<Halt> {
        None
    }
}

/// The ordered chain. Cheap to clone.
#[derive(Clone)]
pub struct Gates(Arc<[Arc<dyn Gate>]>);

impl Gates {
    /// The host's gates, in order. This list is the one place where a gate is added.
    pub fn standard() -> Self {
        Self::from_list(vec![
            // Batch rules first: a response asking for secrets runs nothing at all.
            Arc::new(crate::moviepilot::secret_read::SecretReadGate),
            Arc::new(CutOffArguments),
            // Then who may call what, per call: a subagent reads only, whoever its parent is.
            Arc::new(crate::subagent::read_only::SubagentReadOnly),
            // Who may run a Python cell, and what its helper calls may read.
            Arc::new(crate::code::gate::KernelCalls),
            Arc::new(super::policy::Policy),
            // Then loops (spec learning-guardrails.md §5): budgets per batch, blocks per call,
            // warnings and halts on each result, counted in the turn's slots.
            Arc::new(super::guardrails::LoopGuard::default()),
            // Observes only: which writes of the turn are still unknown or pending.
            Arc::new(super::guardrails::WriteOutcomes),
        ])
    }

    /// The standard chain followed by `extra` (a host's own gates; tests).
    pub fn standard_with(extra: Vec<Arc<dyn Gate>>) -> Self {
        let mut list: Vec<Arc<dyn Gate>> = Self::standard().0.iter().cloned().collect();
        list.extend(extra);
        Self::from_list(list)
    }

    pub fn from_list(list: Vec<Arc<dyn Gate>>) -> Self {
        Gates(list.into())
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|g| g.name()).collect()
    }

    pub fn admit(&self, batch: &Batch<'_>) -> Admission {
        let mut admission = Admission {
            answers: vec![None; batch.calls.len()],
            halt: None,
        };
        for g in self.0.iter() {
            g.admit(batch, &mut admission);
        }
        admission
    }

    /// The first verdict that is not [`Verdict::Allow`].
    pub fn check(&self, call: &CallFacts<'_>) -> Verdict {
        for g in self.0.iter() {
            match g.check(call) {
                Verdict::Allow => {}
                other => return other,
            }
        }
        Verdict::Allow
    }

    /// Every gate observes; the first halt wins.
    pub fn observe(
        &self,
        call: &CallFacts<'_>,
        output: &mut ToolOutput,
        full: Option<&str>,
    ) -> Option<Halt> {
        let mut halt = None;
        for g in self.0.iter() {
            if let Some(h) = g.observe(call, output, full) {
                halt.get_or_insert(h);
            }
        }
        halt
    }
}

/// Calls whose arguments the output limit cut off are answered, never dispatched:
/// `finish_reason: "tool_calls"` alone proves nothing (llama.cpp reports it for cut-off calls).
pub struct CutOffArguments;

impl Gate for CutOffArguments {
    fn name(&self) -> &'static str {
        "cut_off_arguments"
    }

    fn admit(&self, batch: &Batch<'_>, admission: &mut Admission) {
        for (i, c) in batch.calls.iter().enumerate() {
            if c.cut_off {
                admission.answer(
                    i,
                    ToolOutput::failure(
                        "arguments_cut_off",
                        "arguments were cut off by the output limit; not executed. Send the call \
                         again with shorter arguments, or split the work.",
                    ),
                );
            }
        }
    }
}
