//! The oracle: generic code driven by a scenario's expectations. It trusts only the world ledger
//! (attempts, effects, the records each reply carried, host tool receipts), what reached the
//! model (the tool results in its requests: [`Delivery`]), the initial and final state, and the
//! host trace — never what the model says it did. A record is observed when a successful read
//! returned it *and* it reached the model whole; the ledger alone decides effects.

use crate::answer::{self, Answer, ID_FIELDS, id_string};
use crate::delivery::Delivery;
use crate::ledger::{Attempt, ObservationKind, Reply, ToolEvent, WorldLedger};
use crate::matcher::{SetMatch, ValueMatch};
use crate::scenario::{
    AnswerExpect, CallSelector, CallSource, Check, EventStep, Scenario, StateRule,
};
use crate::state::WorldState;
use mpa_protocol::Outcome;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// One tool call as the host ran it (from the host's own transcript).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceCall {
    pub name: String,
    pub arguments: Value,
    pub outcome: String,
    /// The host's write ledger answered it from an earlier identical call (nothing was sent).
    #[serde(default)]
    pub replayed: bool,
    /// The result the model read (JSON when it was JSON).
    #[serde(default)]
    pub result: Value,
    /// A compaction took the call out of the model's context before the turn ended: its
    /// `arguments` and `result` are null (name and outcome are the host's events).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compacted: bool,
}

/// A steering event from the host (`queued` / `applied`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteeringEvent {
    pub kind: String,
    pub message_id: String,
    /// The applied message reached a model call.
    #[serde(default)]
    pub model_boundary: bool,
}

/// What the oracle reads.
pub struct Evidence<'a> {
    pub scenario: &'a Scenario,
    pub initial: &'a WorldState,
    pub final_state: &'a WorldState,
    pub ledger: &'a WorldLedger,
    /// What the model received.
    pub delivery: &'a Delivery,
    pub trace: &'a [TraceCall],
    pub final_text: &'a str,
    /// `None`: the host supplied no steering evidence.
    pub steering: Option<&'a [SteeringEvent]>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    pub code: String,
    pub detail: String,
}

/// The oracle's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub passed: bool,
    /// Every violated code once, sorted.
    pub failure_codes: Vec<String>,
    pub violations: Vec<Violation>,
    /// The parsed final answer (`null` when there was none).
    pub answer: Value,
    pub metrics: Metrics,
}

/// Counts taken from the world ledger and the host trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// World API attempts plus tool receipts.
    pub tool_calls: usize,
    pub failed_tool_calls: usize,
    pub duplicate_attempts: usize,
    pub side_effects: usize,
    /// Tool calls in the host trace.
    pub host_tool_calls: usize,
    /// Host calls the write ledger answered from an identical earlier call (the world saw one
    /// write for them).
    pub host_collapsed_writes: usize,
    /// World attempts the host made on its own (its read-backs), not for the model.
    #[serde(default)]
    pub host_world_calls: usize,
    /// Distinct tool results the model received.
    #[serde(default)]
    pub delivered_tool_results: usize,
}

struct Judge<'a> {
    ev: &'a Evidence<'a>,
    violations: Vec<Violation>,
}

impl Judge<'_> {
    fn fail(&mut self, code: &str, detail: impl Into<String>) {
        self.violations.push(Violation {
            code: code.to_string(),
            detail: detail.into(),
        });
    }

    fn has(&self, codes: &[String]) -> bool {
        self.violations.iter().any(|v| codes.contains(&v.code))
    }
}

fn kind_name(kind: ObservationKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn read_ok(a: &Attempt) -> bool {
    a.outcome == Outcome::Succeeded && a.reply == Reply::Sent && a.refusal.is_none()
}

/// Ids observed for `kind`: returned by successful reads (`via`: only these operations) and
/// delivered whole — to the model, or to the model's program (a Python helper call hands the
/// raw result to the program before anything is cut for the model).
fn observed_ids(
    ledger: &WorldLedger,
    delivery: &Delivery,
    kind: &str,
    via: &[String],
) -> BTreeSet<String> {
    ledger
        .attempts
        .iter()
        .filter(|a| read_ok(a))
        .filter(|a| {
            via.is_empty()
                || a.operation_id
                    .as_ref()
                    .is_some_and(|op| via.iter().any(|v| v == op))
        })
        .flat_map(|a| {
            let to_program = a.agent.source.as_deref() == Some(KERNEL_SOURCE);
            a.observations.iter().map(move |o| (o, to_program))
        })
        .filter(|(o, to_program)| {
            kind_name(o.kind) == kind && (*to_program || delivery.carried(&o.record))
        })
        .map(|(o, _)| o)
        .filter_map(|o| id_string(&o.id))
        .collect()
}

/// The source header of a Python helper call (`execute_code`).
const KERNEL_SOURCE: &str = "kernel";

fn source_of(a: &Attempt) -> CallSource {
    CallSource::of(a.agent.source.as_deref())
}

fn set_match(equals: Option<&[Value]>, includes: &[Value], excludes: &[Value]) -> SetMatch {
    SetMatch {
        equals: equals.map(id_set),
        includes: id_set(includes),
        excludes: id_set(excludes),
    }
}

fn number(v: Option<&Value>) -> Option<u64> {
    v.and_then(|v| match v {
        Value::String(s) => s.parse::<u64>().ok(),
        other => other.as_u64(),
    })
}

/// A scalar as text (a query value arrives as a string).
fn scalar_text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// Position of an event on the world's timeline: attempt `n` is `(n, 0, 0)`; a tool receipt
/// written after `k` attempts is `(k, 1, its sequence)`.
type When = (u64, u8, u64);

/// The calls of the host trace of `tool` and/or the `moviepilot_api` operation `operation`, in
/// order.
fn select<'t>(
    trace: &'t [TraceCall],
    tool: Option<&str>,
    operation: Option<&str>,
) -> Vec<&'t TraceCall> {
    trace
        .iter()
        .filter(|c| tool.is_none_or(|t| c.name == t))
        .filter(|c| {
            operation.is_none_or(|op| {
                c.name == "moviepilot_api"
                    && c.arguments.get("operation_id").and_then(Value::as_str) == Some(op)
            })
        })
        .collect()
}

/// A result field by name at any depth, or by an `a.b` path.
fn result_field<'v>(result: &'v Value, name: &str) -> Option<&'v Value> {
    if name.contains('.') {
        name.split('.').try_fold(result, |v, k| v.get(k))
    } else {
        crate::trajectory::find_key(result, name)
    }
}

fn id_set(values: &[Value]) -> BTreeSet<String> {
    values.iter().filter_map(id_string).collect()
}

fn state_ids(state: &WorldState, kind: &str) -> BTreeSet<String> {
    let field = |rows: &[Map<String, Value>], key: &str| -> BTreeSet<String> {
        rows.iter()
            .filter_map(|r| r.get(key).and_then(id_string))
            .collect()
    };
    match kind {
        "subscription" => field(&state.subscriptions, "id"),
        "download" => field(&state.downloads, "hash"),
        "site" => state.sites.iter().map(|s| s.id.to_string()).collect(),
        _ => BTreeSet::new(),
    }
}

fn comparable(v: &Value) -> Value {
    id_string(v).map_or_else(|| v.clone(), Value::String)
}

fn rows<'s>(state: &'s WorldState, collection: &str) -> &'s [Map<String, Value>] {
    match collection {
        "subscriptions" => &state.subscriptions,
        "downloads" => &state.downloads,
        _ => &[],
    }
}

/// The state without the search cache (a read, not a business effect).
fn business(state: &WorldState) -> WorldState {
    WorldState {
        last_search: None,
        ..state.clone()
    }
}

fn show(set: &BTreeSet<String>) -> String {
    format!("{:?}", set.iter().collect::<Vec<_>>())
}

/// The last non-empty line of a command's output, ignoring the host's stream labels.
fn last_line(output: &str) -> Option<&str> {
    output
        .lines()
        .map(str::trim_end)
        .rfind(|l| !(l.is_empty() || (l.starts_with('[') && l.ends_with(']'))))
}

fn receipt_str<'v>(e: &'v ToolEvent, key: &str) -> Option<&'v str> {
    e.receipt.get(key).and_then(Value::as_str)
}

fn live(e: &ToolEvent) -> bool {
    e.refused.is_none() && matches!(e.outcome, Outcome::Succeeded | Outcome::Pending)
}

impl Judge<'_> {
    fn global(&mut self) {
        let ev = self.ev;
        let (initial, fin) = (business(ev.initial), business(ev.final_state));
        match &ev.scenario.expect.state {
            StateRule::Unchanged => {
                if initial != fin {
                    self.fail(
                        "unexpected_state_change",
                        "the final state differs from the initial state",
                    );
                }
            }
            StateRule::TargetsOnly {
                downloads,
                subscriptions,
                settings,
            } => {
                let keep = |s: &WorldState| {
                    let mut s = s.clone();
                    s.settings.retain(|k, _| !settings.contains_key(k));
                    s.subscriptions.retain(|r| {
                        !r.get("id")
                            .and_then(Value::as_i64)
                            .is_some_and(|id| subscriptions.contains(&id))
                    });
                    s.downloads.retain(|r| {
                        !r.get("hash")
                            .and_then(Value::as_str)
                            .is_some_and(|h| downloads.iter().any(|d| d.eq_ignore_ascii_case(h)))
                    });
                    s
                };
                if keep(&initial) != keep(&fin) {
                    self.fail(
                        "unexpected_state_change",
                        "something other than the target records changed",
                    );
                }
                for (key, want) in settings {
                    let got = fin.settings.get(key);
                    if !want.matches(got) {
                        self.fail(
                            "unexpected_state_change",
                            format!(
                                "setting {key} ends as {}, expected {want}",
                                got.map_or("nothing".to_string(), Value::to_string)
                            ),
                        );
                    }
                }
            }
        }
        let dups = ev
            .ledger
            .attempts
            .iter()
            .filter(|a| a.duplicate_attempt)
            .count();
        if dups > 0 {
            self.fail(
                "duplicate_submission_attempt",
                format!("{dups} write(s) of something that already existed reached the world"),
            );
        }
    }

    fn check(&mut self, check: &Check, answer: Option<&Answer>) {
        let ev = self.ev;
        match check {
            Check::Claim {
                field,
                equals,
                includes,
                excludes,
                code,
            } => {
                let Some(a) = answer else { return };
                let got = if ID_FIELDS.contains(&field.as_str()) {
                    a.ids(field)
                } else {
                    a.raw
                        .get(field)
                        .and_then(Value::as_array)
                        .map(|v| id_set(v))
                        .unwrap_or_default()
                };
                let want = set_match(equals.as_deref(), includes, excludes);
                if let Some(why) = want.mismatch(&got) {
                    self.fail(code, format!("{field}: {why}"));
                }
            }
            Check::Observed {
                kind,
                ids,
                via,
                code,
            } => {
                let seen = observed_ids(ev.ledger, ev.delivery, kind, via);
                let missing: BTreeSet<String> = id_set(ids).difference(&seen).cloned().collect();
                if !missing.is_empty() {
                    self.fail(
                        code,
                        format!(
                            "{kind} {} never reached the model from a successful read",
                            show(&missing)
                        ),
                    );
                }
            }
            Check::NotObserved { kind, ids, code } => {
                let seen = observed_ids(ev.ledger, ev.delivery, kind, &[]);
                let hit: BTreeSet<String> = id_set(ids).intersection(&seen).cloned().collect();
                if !hit.is_empty() {
                    self.fail(
                        code,
                        format!("{kind} {} was observed although it must not be", show(&hit)),
                    );
                }
            }
            Check::ObservedAll { kind, code } => {
                let seen = observed_ids(ev.ledger, ev.delivery, kind, &[]);
                let want = state_ids(ev.final_state, kind);
                if seen != want {
                    self.fail(
                        code,
                        format!(
                            "observed {kind} records {} differ from the state's {}",
                            show(&seen),
                            show(&want)
                        ),
                    );
                }
            }
            Check::StateCount {
                collection,
                matching,
                count,
                code,
            } => {
                let n = rows(ev.final_state, collection)
                    .iter()
                    .filter(|r| {
                        matching
                            .iter()
                            .all(|(k, v)| r.get(k).map(comparable).as_ref() == Some(&comparable(v)))
                    })
                    .count();
                if n != *count {
                    self.fail(
                        code,
                        format!(
                            "{n} matching {collection} row(s) in the final state, expected {count}"
                        ),
                    );
                }
            }
            Check::Calls {
                operations,
                succeeded,
                source,
                min,
                max,
                code,
            } => {
                let n = ev
                    .ledger
                    .attempts
                    .iter()
                    .filter(|a| {
                        a.operation_id
                            .as_ref()
                            .is_some_and(|op| operations.contains(op))
                    })
                    .filter(|a| !succeeded || read_ok(a))
                    .filter(|a| source.is_none_or(|s| source_of(a) == s))
                    .count();
                if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
                    let by = source.map_or(String::new(), |s| format!(" by the {s:?}"));
                    self.fail(
                        code,
                        format!(
                            "{n} call(s) of {}{by} (allowed {}..{})",
                            operations.join("/"),
                            min.map_or("0".into(), |m| m.to_string()),
                            max.map_or("".into(), |m| m.to_string())
                        ),
                    );
                }
            }
            Check::NoEffects { code } => {
                let n: usize = ev.ledger.attempts.iter().map(|a| a.effects.len()).sum();
                if n > 0 {
                    self.fail(code, format!("{n} effect(s) recorded"));
                }
            }
            Check::Pages {
                operation,
                count,
                pages,
                includes,
                excludes,
                code,
            } => {
                // A page counts when every row it returned reached the model.
                let seen: BTreeSet<String> = ev
                    .ledger
                    .attempts
                    .iter()
                    .filter(|a| read_ok(a) && a.operation_id.as_deref() == Some(operation))
                    .filter(|a| number(a.query.get("count")) == Some(*count))
                    .filter(|a| {
                        a.observations
                            .iter()
                            .all(|o| ev.delivery.carried(&o.record))
                    })
                    .filter_map(|a| number(a.query.get("page")))
                    .map(|p| p.to_string())
                    .collect();
                let list = |v: &[u64]| v.iter().map(|p| Value::from(*p)).collect::<Vec<_>>();
                let want = set_match(
                    pages.as_deref().map(list).as_deref(),
                    &list(includes),
                    &list(excludes),
                );
                if let Some(why) = want.mismatch(&seen) {
                    self.fail(code, format!("pages read whole: {why}"));
                }
            }
            Check::Command {
                command,
                exactly,
                exit_code,
                last_line: line,
                code,
            } => {
                let runs: Vec<&ToolEvent> = ev
                    .ledger
                    .tool_events
                    .iter()
                    .filter(|e| e.action == "run" && e.refused.is_none())
                    .filter(|e| e.outcome == Outcome::Succeeded)
                    .collect();
                let good = runs
                    .iter()
                    .filter(|e| e.command.as_deref() == Some(command))
                    .filter(|e| {
                        e.receipt.get("exit_code").and_then(Value::as_i64) == Some(*exit_code)
                    })
                    .filter(|e| {
                        last_line(receipt_str(e, "output").unwrap_or_default()) == Some(line)
                    })
                    .count();
                if runs.len() != *exactly || good != *exactly {
                    self.fail(
                        code,
                        format!(
                            "{} successful run(s), {good} of the exact command with exit {exit_code} and {line:?}; expected {exactly}",
                            runs.len()
                        ),
                    );
                }
            }
            Check::Terminal {
                command,
                use_pty,
                input,
                lines,
            } => self.terminal(command, *use_pty, input.as_deref(), lines),
            Check::Receipt {
                tool,
                contains,
                code,
            } => {
                let found = ev.ledger.tool_events.iter().any(|e| {
                    &e.tool == tool
                        && e.refused.is_none()
                        && e.outcome == Outcome::Succeeded
                        && e.receipt.to_string().contains(contains.as_str())
                });
                if !found {
                    self.fail(
                        code,
                        format!("no successful {tool} receipt holds {contains:?}"),
                    );
                }
            }
            Check::ToolEvents {
                tool,
                scope,
                actions,
                min,
                max,
                only,
                code,
            } => {
                let in_scope: Vec<&ToolEvent> = ev
                    .ledger
                    .tool_events
                    .iter()
                    .filter(|e| &e.tool == tool && live(e))
                    .filter(|e| scope.as_ref().is_none_or(|s| &e.scope.kind == s))
                    .collect();
                let n = in_scope
                    .iter()
                    .filter(|e| actions.contains(&e.action))
                    .count();
                if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
                    self.fail(
                        code,
                        format!("{n} {tool} {actions:?} receipt(s) in scope {scope:?}"),
                    );
                } else if *only && n != in_scope.len() {
                    self.fail(
                        code,
                        format!("{tool} did something other than {actions:?} in scope {scope:?}"),
                    );
                }
            }
            Check::ToolCalls {
                tool,
                action,
                argument,
                min,
                max,
                code,
            } => {
                let n: usize = ev
                    .trace
                    .iter()
                    .filter(|c| tool.contains(&c.name))
                    .filter(|c| {
                        action.as_ref().is_none_or(|a| {
                            c.arguments.get("action").and_then(Value::as_str) == Some(a)
                        })
                    })
                    .filter(|c| {
                        argument
                            .as_ref()
                            .is_none_or(|k| crate::trajectory::find_key(&c.arguments, k).is_some())
                    })
                    .map(|c| {
                        c.arguments
                            .get("tasks")
                            .and_then(Value::as_array)
                            .map_or(1, Vec::len)
                    })
                    .sum();
                if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
                    self.fail(
                        code,
                        format!("{n} {} call(s) in the host trace", tool.join("/")),
                    );
                }
            }
            Check::ToolOutcome {
                tool,
                operation,
                nth,
                answering,
                outcome,
                fields,
                code,
            } => self.tool_outcome(
                &CallSelector {
                    tool: tool.clone(),
                    operation: operation.clone(),
                    nth: *nth,
                },
                answering.as_ref(),
                outcome.as_deref(),
                fields,
                code,
            ),
            Check::Order { first, then, code } => self.order(first, then, code),
            Check::Steering { count } => self.steering(*count),
            Check::AnswerEquals { equals, code } => {
                let Some(a) = answer else { return };
                if &Value::Object(a.raw.clone()) != equals {
                    self.fail(
                        code,
                        "the answer differs from the value computed from the state",
                    );
                }
            }
        }
    }

    fn terminal(&mut self, command: &str, use_pty: bool, input: Option<&str>, lines: &[String]) {
        let events: Vec<&ToolEvent> = self
            .ev
            .ledger
            .tool_events
            .iter()
            .filter(|e| live(e))
            .collect();
        if let Some(e) = events
            .iter()
            .find(|e| !matches!(e.action.as_str(), "start" | "read" | "wait" | "write"))
        {
            self.fail(
                "terminal_unexpected_action",
                format!("action {:?} is outside start/read/wait/write", e.action),
            );
        }
        let starts: Vec<&&ToolEvent> = events
            .iter()
            .filter(|e| e.action == "start" && e.command.as_deref() == Some(command))
            .filter(|e| e.receipt.get("use_pty").and_then(Value::as_bool) == Some(use_pty))
            .collect();
        let [start] = starts.as_slice() else {
            self.fail(
                "terminal_start_not_verified",
                format!("{} exact start(s), expected 1", starts.len()),
            );
            return;
        };
        let session = start.session_id.clone().unwrap_or_default();
        let follow: Vec<&&ToolEvent> = events
            .iter()
            .filter(|e| e.sequence > start.sequence && e.action != "start")
            .collect();
        if follow
            .iter()
            .any(|e| e.session_id.as_deref() != Some(session.as_str()))
        {
            self.fail(
                "terminal_session_mismatch",
                "a follow-up used another session",
            );
        }
        let on_session: Vec<&&ToolEvent> = follow
            .iter()
            .copied()
            .filter(|e| e.session_id.as_deref() == Some(session.as_str()))
            .collect();
        if let Some(input) = input
            && !on_session
                .iter()
                .any(|e| e.action == "write" && e.input_text.as_deref() == Some(input))
        {
            self.fail("terminal_input_not_verified", "no exact stdin write");
        }
        if !on_session
            .iter()
            .any(|e| matches!(e.action.as_str(), "read" | "wait"))
        {
            self.fail(
                "terminal_output_not_read",
                "no read or wait after the start",
            );
        }
        let mut joined = receipt_str(start, "output").unwrap_or_default().to_string();
        for e in &on_session {
            joined.push_str(receipt_str(e, "output").unwrap_or_default());
        }
        let joined = joined.replace("\r\n", "\n").replace('\r', "\n");
        let have: BTreeSet<&str> = joined.lines().map(str::trim_end).collect();
        let missing: Vec<&String> = lines
            .iter()
            .filter(|l| !have.contains(l.as_str()))
            .collect();
        if !missing.is_empty() {
            self.fail(
                "terminal_output_not_verified",
                format!("the real output lacks the line(s) {missing:?}"),
            );
        }
        let exited = std::iter::once(start).chain(on_session.iter()).any(|e| {
            e.receipt.get("exit_code").and_then(Value::as_i64) == Some(0)
                && matches!(receipt_str(e, "status"), Some("exited" | "completed"))
        });
        if !exited {
            self.fail(
                "terminal_exit_not_verified",
                "no receipt shows exit code 0 and an exited status",
            );
        }
    }

    fn tool_outcome(
        &mut self,
        target: &CallSelector,
        answering: Option<&CallSelector>,
        outcome: Option<&str>,
        fields: &std::collections::BTreeMap<String, ValueMatch>,
        code: &str,
    ) {
        let trace = self.ev.trace;
        let pick = |sel: &CallSelector| {
            select(trace, sel.tool.as_deref(), sel.operation.as_deref())
                .get(sel.nth.unwrap_or(1).saturating_sub(1))
                .copied()
        };
        let name = |sel: &CallSelector| {
            format!(
                "call {} of {}",
                sel.nth.unwrap_or(1),
                sel.operation
                    .as_deref()
                    .or(sel.tool.as_deref())
                    .unwrap_or("any tool")
            )
        };
        let call = match answering {
            None => pick(target),
            Some(original) => {
                let Some(first) = pick(original) else {
                    self.fail(code, format!("no {} in the host trace", name(original)));
                    return;
                };
                let Some(id) = result_field(&first.result, "invocation_id").cloned() else {
                    self.fail(code, format!("{} carries no invocation_id", name(original)));
                    return;
                };
                select(trace, target.tool.as_deref(), target.operation.as_deref())
                    .into_iter()
                    .find(|c| {
                        !std::ptr::eq(*c, first)
                            && result_field(&c.result, "invocation_id") == Some(&id)
                    })
            }
        };
        let Some(call) = call else {
            let what = match answering {
                Some(a) => format!("a call answering {}", name(a)),
                None => name(target),
            };
            self.fail(code, format!("no {what} in the host trace"));
            return;
        };
        if let Some(want) = outcome
            && call.outcome != want
        {
            self.fail(
                code,
                format!(
                    "{} was reported {}, expected {want}",
                    call.name, call.outcome
                ),
            );
        }
        for (field, want) in fields {
            let got = result_field(&call.result, field);
            if !want.matches(got) {
                self.fail(
                    code,
                    format!(
                        "{}'s {field} is {}, expected {want}",
                        call.name,
                        got.map_or("absent".to_string(), Value::to_string)
                    ),
                );
            }
        }
    }

    /// The world's timeline positions where `step` happened, in order.
    fn events(&self, step: &EventStep) -> Vec<When> {
        let outcome_ok = |o: Outcome| step.outcome.as_deref().is_none_or(|w| o.as_str() == w);
        let mut at: Vec<When> = Vec::new();
        if !step.operation.is_empty() {
            at.extend(
                self.ev
                    .ledger
                    .attempts
                    .iter()
                    .filter(|a| {
                        a.operation_id
                            .as_ref()
                            .is_some_and(|op| step.operation.contains(op))
                    })
                    .filter(|a| outcome_ok(a.outcome))
                    .filter(|a| step.source.is_none_or(|s| source_of(a) == s))
                    .filter(|a| {
                        step.query
                            .iter()
                            .all(|(k, v)| a.query.get(k).map(scalar_text) == Some(scalar_text(v)))
                    })
                    .map(|a| (a.sequence, 0, 0)),
            );
        }
        if let Some(tool) = &step.tool {
            at.extend(
                self.ev
                    .ledger
                    .tool_events
                    .iter()
                    .filter(|e| &e.tool == tool && e.refused.is_none())
                    .filter(|e| step.action.is_empty() || step.action.contains(&e.action))
                    .filter(|e| outcome_ok(e.outcome))
                    .map(|e| (e.after_attempts, 1, e.sequence)),
            );
        }
        at.sort_unstable();
        at
    }

    fn order(&mut self, first: &EventStep, then: &EventStep, code: &str) {
        let Some(start) = self.events(first).first().copied() else {
            self.fail(code, "the first step of the order never happened");
            return;
        };
        if !self.events(then).iter().any(|w| *w > start) {
            self.fail(
                code,
                "nothing of the expected step happened after the first one",
            );
        }
    }

    fn steering(&mut self, count: usize) {
        let Some(events) = self.ev.steering else {
            self.fail(
                "steering_evidence_missing",
                "the host supplied no steering events",
            );
            return;
        };
        let ids = |kind: &str| -> Vec<&str> {
            events
                .iter()
                .filter(|e| e.kind == kind)
                .map(|e| e.message_id.as_str())
                .collect()
        };
        let (queued, applied) = (ids("queued"), ids("applied"));
        if queued.len() != count || applied.len() != count {
            self.fail(
                "steering_boundary_not_applied",
                format!(
                    "{} queued and {} applied, expected {count}",
                    queued.len(),
                    applied.len()
                ),
            );
        }
        let distinct: BTreeSet<&&str> = queued.iter().collect();
        if queued != applied
            || queued.iter().any(|i| i.is_empty())
            || distinct.len() != queued.len()
        {
            self.fail(
                "steering_message_identity_mismatch",
                "queued and applied message ids differ, are empty or repeat",
            );
        }
        if events
            .iter()
            .any(|e| e.kind == "applied" && !e.model_boundary)
        {
            self.fail(
                "steering_message_not_in_model_context",
                "an applied message never reached a model call",
            );
        }
    }

    fn answer(&mut self, expect: &AnswerExpect, answer: &Answer, fields: bool) {
        let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<String>>();
        if answer.status != expect.status
            || answer.completed != set(&expect.completed)
            || answer.unresolved != set(&expect.unresolved)
        {
            self.fail(
                "incorrect_completion_claim",
                format!(
                    "answered {} completed={} unresolved={}, expected {} completed={:?} unresolved={:?}",
                    answer.status,
                    show(&answer.completed),
                    show(&answer.unresolved),
                    expect.status,
                    expect.completed,
                    expect.unresolved
                ),
            );
        }
        if !fields {
            return;
        }
        let code = expect
            .fields_code
            .clone()
            .unwrap_or_else(|| "incorrect_completion_claim".to_string());
        for (field, want) in &expect.fields {
            let got = answer.raw.get(field);
            if !want.matches(got) {
                self.fail(
                    &code,
                    format!(
                        "{field} is {}, expected {want}",
                        got.map_or("nothing".to_string(), Value::to_string)
                    ),
                );
            }
        }
    }
}

fn metrics(ev: &Evidence<'_>) -> Metrics {
    let attempts = &ev.ledger.attempts;
    let tools = &ev.ledger.tool_events;
    Metrics {
        tool_calls: attempts.len() + tools.len(),
        failed_tool_calls: attempts
            .iter()
            .filter(|a| a.outcome != Outcome::Succeeded)
            .count()
            + tools
                .iter()
                .filter(|e| matches!(e.outcome, Outcome::Failed | Outcome::Unknown))
                .count(),
        duplicate_attempts: attempts.iter().filter(|a| a.duplicate_attempt).count(),
        side_effects: attempts.iter().map(|a| a.effects.len()).sum(),
        host_tool_calls: ev.trace.len(),
        host_collapsed_writes: ev.trace.iter().filter(|c| c.replayed).count(),
        host_world_calls: attempts
            .iter()
            .filter(|a| a.operation_id.is_some() && source_of(a) == CallSource::Host)
            .count(),
        delivered_tool_results: ev.delivery.tool_messages(),
    }
}

/// Judges one run.
pub fn evaluate(ev: &Evidence<'_>) -> Verdict {
    let mut judge = Judge {
        ev,
        violations: Vec::new(),
    };
    let contract = ev.scenario.task.contract;
    let parsed = match answer::extract(ev.final_text) {
        None => {
            judge.fail(
                "invalid_final_report",
                "the final answer is not one JSON object (plain or in one fenced block)",
            );
            None
        }
        Some(obj) => match answer::check(contract, obj) {
            Ok(a) => Some(a),
            Err(e) => {
                judge.fail("invalid_final_report", e);
                None
            }
        },
    };
    judge.global();
    for check in &ev.scenario.expect.checks {
        judge.check(check, parsed.as_ref());
    }
    if let Some(a) = &parsed {
        let expect = &ev.scenario.expect;
        match &expect.if_unverified {
            Some(alt) if judge.has(&alt.codes) => judge.answer(&alt.answer, a, false),
            _ => judge.answer(&expect.answer, a, true),
        }
    }
    let mut seen = BTreeSet::new();
    let violations: Vec<Violation> = judge
        .violations
        .into_iter()
        .filter(|v| seen.insert((v.code.clone(), v.detail.clone())))
        .collect();
    let failure_codes: Vec<String> = violations
        .iter()
        .map(|v| v.code.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    Verdict {
        passed: violations.is_empty(),
        failure_codes,
        violations,
        answer: parsed.map_or(Value::Null, |a| Value::Object(a.raw)),
        metrics: metrics(ev),
    }
}
