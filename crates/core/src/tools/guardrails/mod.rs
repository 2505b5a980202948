//! Tool-loop guardrails (spec learning-guardrails.md §5, runtime.md §14.5; seed `agent.md`
//! 执行纠偏与停止): a weak model repeats a failing call, polls forever, re-reads what has not
//! changed or ping-pongs between two tools. [`LoopGuard`] is a call gate: it counts every call
//! of a loop run in that run's slots ([`record::LoopRecord`]), in the order the model emitted the
//! calls, and decides at fixed thresholds (the seed's, [`Thresholds::default`]):
//!
//! | axis | warn | block / halt |
//! |---|---|---|
//! | the same call (tool + canonical arguments) failing | 2nd | 6th call not executed (after 5) |
//! | the same tool, other arguments, failing | 3rd | 8th halts (never a failure-tolerant tool) |
//! | the same read returning the same result | 2nd | 6th call not executed (after 5) |
//! | identical consecutive calls (same call, same result) | 3rd | 5th halts |
//! | a cycle of 2–4 calls over the last 64 | 3 laps | 5 laps halt |
//! | web searches / subagent launches per turn | — | past 50, a batch is not executed |
//!
//! A success of a write (any call whose effect is not a read, or one that changes session
//! state) is progress: failure counts start over (a new experiment). Changed arguments are
//! another call; a changed result (or failure) counts anew. Polling (`read`, `wait`, `status`,
//! `list` of a terminal or a subagent, [`LoopClass::polls`]) is allowed.
//!
//! Severity follows who is waiting ([`Severity::of`]): the web page, the CLI, the OpenAI
//! endpoint, supervised subagents, direct and MCP calls get warnings only; message channels,
//! scheduled jobs and background work (the review) are also blocked and halted. Budgets apply
//! everywhere. How a decision surfaces is in [`decision`]; the turn's honest status in
//! [`outcomes`].

mod class;
mod decision;
pub mod outcomes;
mod record;
mod signature;

pub use class::{LoopClass, TurnBudget};
pub use decision::{Action, Code, Decision};
pub use outcomes::{WriteOutcomes, honest_status};
pub use record::LoopRecord;
pub use signature::Signature;

use super::ToolOutput;
use super::gate::{Admission, Batch, CallFacts, Gate, Halt, Verdict};
use super::policy::Origin;
use decision::{cycle_note, streak_note};
use mpa_protocol::Outcome;
use record::{Failures, Repeats, Step};

/// The thresholds (spec learning-guardrails.md §5.1; the seed's values by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    pub exact_failure_warn: u32,
    pub exact_failure_block: u32,
    pub same_tool_failure_warn: u32,
    pub same_tool_failure_halt: u32,
    pub no_progress_warn: u32,
    pub no_progress_block: u32,
    pub identical_call_warn: u32,
    pub identical_call_halt: u32,
    pub cycle_warn_laps: u32,
    pub cycle_halt_laps: u32,
    /// Per turn; 0 turns the budget off.
    pub web_searches: u32,
    pub subagents: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            exact_failure_warn: 2,
            exact_failure_block: 5,
            same_tool_failure_warn: 3,
            same_tool_failure_halt: 8,
            no_progress_warn: 2,
            no_progress_block: 5,
            identical_call_warn: 3,
            identical_call_halt: 5,
            cycle_warn_laps: 3,
            cycle_halt_laps: 5,
            web_searches: 50,
            subagents: 50,
        }
    }
}

impl Thresholds {
    fn budget(&self, b: TurnBudget) -> u32 {
        match b {
            TurnBudget::WebSearch => self.web_searches,
            TurnBudget::Subagents => self.subagents,
        }
    }
}

/// Whether loops are only pointed out or also stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Someone watches (the web page, the CLI, the OpenAI endpoint, a supervising agent).
    Warn,
    /// Nobody watches (a message channel, a scheduled job, background work).
    Stop,
}

/// Channels where a person or a client watches the turn and can stop it. `eval` is MoviePilot's
/// live evaluation, which runs the agent as a web session would (its model-call budget bounds a
/// loop), so a scenario scores what a web user would get.
const WATCHED_CHANNELS: [&str; 6] = ["web", "cli", "openai", "eval", "test", ""];

impl Severity {
    pub fn of(origin: Origin, channel: &str) -> Self {
        match origin {
            // Supervised by the agent that started it; one call each; a script's own loop.
            Origin::Subagent | Origin::Direct | Origin::Mcp | Origin::Kernel => Severity::Warn,
            Origin::Review { .. } => Severity::Stop,
            Origin::Turn if WATCHED_CHANNELS.contains(&channel) => Severity::Warn,
            Origin::Turn => Severity::Stop,
        }
    }
}

/// The loop guardrails as a call gate (see the module docs).
#[derive(Debug, Default)]
pub struct LoopGuard {
    pub limits: Thresholds,
}

/// What the guardrails derive from one call.
struct Facts<'a> {
    tool: &'a str,
    class: LoopClass,
    call: Signature,
    /// The same-tool axis key: the tool, or the tool and its operation.
    tool_key: u64,
    polls: bool,
    /// A repeat of the same result is no progress.
    idempotent: bool,
    /// A success is progress.
    progresses: bool,
    severity: Severity,
}

impl<'a> Facts<'a> {
    fn of(call: &CallFacts<'a>) -> Self {
        let class = LoopClass::of(call.tool, call.meta.loop_class);
        let polls = class.polls(call.args);
        let read = call.effect.is_read() && !class.changes_state;
        let operation = class
            .key_argument
            .and_then(|k| call.args?.get(k)?.as_str())
            .unwrap_or("");
        Facts {
            tool: call.tool,
            class,
            call: Signature::of(call.tool, call.args),
            tool_key: signature::key_digest(&[call.tool, operation]),
            polls,
            idempotent: read && !polls,
            progresses: !read,
            severity: Severity::of(call.origin, call.channel),
        }
    }
}

impl Gate for LoopGuard {
    fn name(&self) -> &'static str {
        "loop_guardrails"
    }

    /// Budgets, checked before a batch runs: a batch that starts under the budget runs whole
    /// (it may cross it); once a budget is spent, its calls are not executed.
    fn admit(&self, batch: &Batch<'_>, admission: &mut Admission) {
        for budget in TurnBudget::ALL {
            let cap = self.limits.budget(budget);
            if cap == 0 {
                continue;
            }
            let launches: Vec<(usize, u32)> = batch
                .calls
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    let class = LoopClass::of(
                        &c.call.name,
                        c.meta.map(|m| m.loop_class).unwrap_or_default(),
                    );
                    (class.budget == Some(budget))
                        .then(|| (i, class.launches(c.args.as_ref())))
                        .filter(|(_, n)| *n > 0)
                })
                .collect();
            if launches.is_empty() {
                continue;
            }
            let requested: u32 = launches.iter().map(|(_, n)| n).sum();
            let used = batch.turn.with(|r: &mut LoopRecord| {
                let used = r.budgets[budget.index()];
                if used < cap {
                    r.budgets[budget.index()] = used.saturating_add(requested);
                }
                used
            });
            if used < cap {
                continue;
            }
            for (i, n) in launches {
                let tool = &batch.calls[i].call.name;
                let d = budget_decision(budget, tool, cap, used, n);
                admission.answer(i, d.refusal());
            }
        }
    }

    /// Before a call runs (stopping severity only): a call that already failed the block
    /// threshold of times in a row, or a read that returned the same result that often, is not
    /// executed, and the turn ends after this batch.
    fn check(&self, call: &CallFacts<'_>) -> Verdict {
        let f = Facts::of(call);
        if f.severity != Severity::Stop {
            return Verdict::Allow;
        }
        let (failures, repeats) = call.turn.with(|r: &mut LoopRecord| {
            (
                r.exact.get(f.call).map_or(0, |e| e.count),
                r.no_progress.get(f.call).map_or(0, |e| e.count),
            )
        });
        let l = &self.limits;
        let decision = if failures >= l.exact_failure_block {
            Decision::new(
                Action::Block,
                Code::ExactFailureBlock,
                f.tool,
                failures,
                format!(
                    "this exact call already failed {failures} times in a row this turn; it was \
                     not executed again. Change the arguments or the approach instead of \
                     repeating it"
                ),
            )
        } else if f.idempotent && repeats >= l.no_progress_block {
            Decision::new(
                Action::Block,
                Code::NoProgressBlock,
                f.tool,
                repeats,
                format!(
                    "this read already returned the same result {repeats} times this turn; it \
                     was not executed again. Use the result you have or change the query"
                ),
            )
        } else {
            return Verdict::Allow;
        };
        let decision = decision.with_signature(f.call);
        Verdict::Halt {
            output: decision.refusal(),
            halt: decision.halt(),
        }
    }

    /// After a call ran: the counts move, warnings become host notes, a stopping severity halts.
    fn observe(
        &self,
        call: &CallFacts<'_>,
        output: &mut ToolOutput,
        full: Option<&str>,
    ) -> Option<Halt> {
        let f = Facts::of(call);
        let text = without_receipt(output, full.unwrap_or(&output.content));
        let failed = matches!(output.outcome, Outcome::Failed | Outcome::Unknown);
        // A failure is what the host classified (outcome and error code), not its wording, which
        // may carry times or ids; a success is its whole text.
        let result = if failed {
            signature::result_digest(&format!(
                "{}\u{0}{}",
                output.outcome.as_str(),
                output.error.as_deref().unwrap_or("")
            ))
        } else {
            signature::result_digest(text)
        };
        let (decision, stall) = call.turn.with(|r: &mut LoopRecord| {
            let decision = if failed {
                self.after_failure(r, &f, result)
            } else {
                self.after_success(r, &f, result)
            };
            (decision, self.stall(r, &f, result))
        });
        let mut halting: Option<Decision> = None;
        if let Some(d) = decision {
            let d = d.with_signature(f.call);
            output.add_note(d.note());
            if d.action == Action::Halt {
                halting = Some(d);
            }
        }
        if let Some(stall) = stall {
            output.add_note(stall.note);
            if let Some(d) = stall.halt
                && halting.is_none()
            {
                output.add_note(d.note());
                halting = Some(d);
            }
        }
        let d = halting?;
        output.metadata.insert("guardrail".into(), d.metadata());
        Some(d.halt())
    }
}

/// A stall guard's note and, with a stopping severity, its halt.
struct Stall {
    note: String,
    halt: Option<Decision>,
}

impl LoopGuard {
    fn after_failure(&self, r: &mut LoopRecord, f: &Facts<'_>, failure: u128) -> Option<Decision> {
        let l = &self.limits;
        let exact = {
            let e = r.exact.touch(f.call, || Failures {
                count: 0,
                last: failure,
            });
            if e.last != failure {
                *e = Failures {
                    count: 0,
                    last: failure,
                };
            }
            e.count += 1;
            e.count
        };
        let same_tool = {
            let n = r.same_tool.touch(f.tool_key, || 0);
            *n += 1;
            *n
        };
        r.no_progress.remove(f.call);
        let tool = f.tool;
        if f.severity == Severity::Stop
            && !f.class.failure_tolerant
            && same_tool >= l.same_tool_failure_halt
        {
            return Some(Decision::new(
                Action::Halt,
                Code::SameToolFailureHalt,
                tool,
                same_tool,
                format!(
                    "{tool} failed {same_tool} times this turn with different arguments; the turn \
                     stops here"
                ),
            ));
        }
        if exact >= l.exact_failure_warn {
            return Some(Decision::new(
                Action::Warn,
                Code::ExactFailureWarning,
                tool,
                exact,
                format!(
                    "this exact call has failed {exact} times in a row; do not repeat it \
                     unchanged — read the error, then change the arguments or use another tool"
                ),
            ));
        }
        if same_tool >= l.same_tool_failure_warn {
            let hint = if f.class.failure_tolerant {
                "diagnose before the next attempt: check the working directory and files (pwd && \
                 ls -la), use absolute paths, simpler commands or file tools"
            } else {
                "try different arguments, a narrower query or a different tool; if an external \
                 blocker (permission, a missing service) causes it, report it after one \
                 diagnostic call"
            };
            return Some(Decision::new(
                Action::Warn,
                Code::SameToolFailureWarning,
                tool,
                same_tool,
                format!("{tool} failed {same_tool} times this turn; {hint}"),
            ));
        }
        None
    }

    fn after_success(&self, r: &mut LoopRecord, f: &Facts<'_>, result: u128) -> Option<Decision> {
        r.exact.remove(f.call);
        r.same_tool.remove(f.tool_key);
        if f.progresses {
            r.progress();
        }
        if !f.idempotent {
            r.no_progress.remove(f.call);
            return None;
        }
        let e = r.no_progress.touch(f.call, || Repeats { result, count: 0 });
        if e.result == result {
            e.count += 1;
        } else {
            *e = Repeats { result, count: 1 };
        }
        let repeats = e.count;
        (repeats >= self.limits.no_progress_warn).then(|| {
            Decision::new(
                Action::Warn,
                Code::NoProgressWarning,
                f.tool,
                repeats,
                format!(
                    "this read returned the same result {repeats} times; it has not changed — \
                     use what you have, or change the query"
                ),
            )
        })
    }

    /// The stall guards (tool-agnostic): a streak of identical calls with identical results,
    /// else a repeated cycle. Polling is exempt.
    fn stall(&self, r: &mut LoopRecord, f: &Facts<'_>, result: u128) -> Option<Stall> {
        let l = &self.limits;
        let streak = r.push(Step {
            call: f.call,
            result,
            polls: f.polls,
        });
        let stop = f.severity == Severity::Stop;
        if streak >= l.identical_call_warn && !f.polls {
            let halt = (stop && streak >= l.identical_call_halt).then(|| {
                Decision::new(
                    Action::Halt,
                    Code::IdenticalCallHalt,
                    f.tool,
                    streak,
                    format!(
                        "the same call returned the same result {streak} times in a row; the \
                         turn stops here"
                    ),
                )
                .with_signature(f.call)
            });
            return Some(Stall {
                note: streak_note(f.tool, streak),
                halt,
            });
        }
        let cycle = r.cycle(l.cycle_warn_laps)?;
        if cycle.polls {
            return None;
        }
        let halt = (stop && cycle.laps >= l.cycle_halt_laps).then(|| {
            Decision::new(
                Action::Halt,
                Code::CycleHalt,
                f.tool,
                cycle.laps,
                format!(
                    "the last {} rounds repeated the same cycle of {} calls with identical \
                     results; the turn stops here",
                    cycle.laps, cycle.period
                ),
            )
        });
        Some(Stall {
            note: cycle_note(f.tool, cycle.period, cycle.laps),
            halt,
        })
    }
}

/// The tool's own result: a write's receipt (`_tool_execution`, the last field the ledger adds)
/// names a fresh invocation every time, which would make every repeat look new.
fn without_receipt<'a>(output: &ToolOutput, text: &'a str) -> &'a str {
    if !output
        .metadata
        .contains_key(super::ledger::INVOCATION_ID_KEY)
    {
        return text;
    }
    match text.rfind(r#","_tool_execution":"#) {
        Some(at) => &text[..at],
        None => text,
    }
}

fn budget_decision(budget: TurnBudget, tool: &str, cap: u32, used: u32, asked: u32) -> Decision {
    match budget {
        TurnBudget::WebSearch => Decision::new(
            Action::Block,
            Code::WebSearchCap,
            tool,
            used,
            format!(
                "already made {used} web searches this turn, the per-turn limit is {cap}; work \
                 with the results you have"
            ),
        ),
        TurnBudget::Subagents => Decision::new(
            Action::Block,
            Code::SubagentCap,
            tool,
            used,
            format!(
                "already launched {used} subagents this turn (limit {cap}); {asked} more were \
                 requested — finish with the subagents you have"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_watches_decides_the_severity() {
        assert_eq!(Severity::of(Origin::Turn, "web"), Severity::Warn);
        assert_eq!(Severity::of(Origin::Turn, "openai"), Severity::Warn);
        assert_eq!(Severity::of(Origin::Turn, "cli"), Severity::Warn);
        assert_eq!(Severity::of(Origin::Turn, "eval"), Severity::Warn);
        assert_eq!(Severity::of(Origin::Subagent, "telegram"), Severity::Warn);
        assert_eq!(Severity::of(Origin::Turn, "telegram"), Severity::Stop);
        assert_eq!(Severity::of(Origin::Turn, "scheduled"), Severity::Stop);
        assert_eq!(
            Severity::of(Origin::Review { memory_due: false }, "review"),
            Severity::Stop
        );
    }
}
