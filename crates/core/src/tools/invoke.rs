//! The one way a tool runs. A turn's tool stage, the background review, `mpagent tool`, a
//! confirmed secret read and tools calling tools through their agent handle all call [`invoke`]
//! (or [`invoke_one`]), so lookup, argument parsing, the gate chain, the ledger, timeout, panic
//! capture, outcome and the result cap are applied identically everywhere.
//!
//! Order: ([`invoke_one`]: the batch gates on a batch of one) → lookup in the registry as of now
//! → parse the arguments object → prepare (typed arguments, per-call effect) → the gates' per-call
//! checks → ledger claim for writes (or the answer from an existing record) → run under the
//! timeout on its own task → ledger finish with the receipt → cap (unless the tool sizes its own
//! results), keeping the whole of a capped result in the session's result store ([`dispatch`]
//! ends here) → the gates observe the result ([`Dispatched::conclude`]; a turn's tool stage
//! concludes a response's calls in the order the model emitted them, whatever order they
//! finished in).

use super::ToolMeta;
use super::gate::{Batch, BatchCall, CallFacts, Gates, Halt, Verdict};
use super::policy::Origin;
use super::read_tool_result::{MAX_RESULT_BYTES, NotKept, ResultStore};
use super::registry::Tools;
use super::{PreparedCall, ToolContext, ToolOutput, ledger};
use crate::result_cap::{Archive, over_cap, preview};
use mpa_protocol::{EffectClass, Outcome, ToolCall};
use std::time::Duration;

/// What the call path needs from the host.
#[derive(Clone, Copy)]
pub struct Invoker<'a> {
    pub tools: &'a Tools,
    pub gates: &'a Gates,
    /// Per call; `None` = unlimited (`LLM_TOOL_TIMEOUT=0`).
    pub timeout: Option<Duration>,
    /// The invocation ledger; without one, writes run unrecorded (tests of single tools).
    pub ledger: Option<&'a mpa_store::Store>,
    /// The result cap in characters ([`DEFAULT_TOOL_RESULT_MAX_CHARS`], smaller for a small
    /// context window: see [`crate::result_cap::cap_for_window`]).
    ///
    /// [`DEFAULT_TOOL_RESULT_MAX_CHARS`]: crate::result_cap::DEFAULT_TOOL_RESULT_MAX_CHARS
    pub max_result_chars: usize,
}

/// A finished call: what the model reads, the full result when that is a capped preview (the
/// evidence store keeps the whole of it), and a gate's halt.
#[derive(Debug, Clone, PartialEq)]
pub struct Invoked {
    pub output: ToolOutput,
    pub full_content: Option<String>,
    /// Where the session's result store keeps the whole of a capped result (`read_tool_result`).
    pub result_id: Option<String>,
    /// A gate ends the turn after this call's batch.
    pub halt: Option<Halt>,
}

impl Invoked {
    pub fn uncapped(output: ToolOutput) -> Self {
        Self {
            output,
            full_content: None,
            result_id: None,
            halt: None,
        }
    }
}

/// A call that ran (or that a per-call gate answered), capped, before the gates observe it: a
/// batch concludes its calls in the order the model emitted them, whatever order they finished
/// in, so what the gates count does not depend on timing.
pub struct Ran {
    invoked: Invoked,
    ctx: ToolContext,
    call: Call,
}

/// What the gates know of a call besides its context (see [`CallFacts`]).
struct Call {
    origin: Origin,
    meta: ToolMeta,
    effect: EffectClass,
    requires_admin: bool,
    admin_subject: Option<String>,
    args: Option<serde_json::Value>,
    same_tool_in_response: usize,
}

impl Call {
    fn facts<'a>(&'a self, ctx: &'a ToolContext, call: &'a ToolCall) -> CallFacts<'a> {
        CallFacts {
            actor: &ctx.actor,
            origin: self.origin,
            channel: &ctx.channel,
            tool: &call.name,
            call_id: &call.id,
            meta: &self.meta,
            effect: self.effect,
            requires_admin: self.requires_admin,
            admin_subject: self.admin_subject.as_deref(),
            args: self.args.as_ref(),
            same_tool_in_response: self.same_tool_in_response,
            session: &ctx.session,
            turn: &ctx.turn,
        }
    }
}

/// What [`dispatch`] returns.
pub enum Dispatched {
    /// Final already (no such tool; a gate's halt answered it).
    Done(Box<Invoked>),
    /// Ran: [`Dispatched::conclude`] lets the gates observe it.
    Ran(Box<Ran>),
}

impl Dispatched {
    /// The result as the model will read it, without host notes (for the activity line).
    pub fn output(&self) -> &ToolOutput {
        match self {
            Dispatched::Done(i) => &i.output,
            Dispatched::Ran(r) => &r.invoked.output,
        }
    }

    /// The gates observe the result (they may add host notes, [`ToolOutput::add_note`], and
    /// halt the turn).
    pub fn conclude(self, inv: Invoker<'_>, call: &ToolCall) -> Invoked {
        let ran = match self {
            Dispatched::Done(i) => return *i,
            Dispatched::Ran(r) => *r,
        };
        let Ran {
            mut invoked,
            ctx,
            call: info,
        } = ran;
        let facts = info.facts(&ctx, call);
        invoked.halt =
            inv.gates
                .observe(&facts, &mut invoked.output, invoked.full_content.as_deref());
        invoked
    }
}

/// Caps a result the tool does not size itself, keeping the whole of it in the session's result
/// store so the model can read on without running the tool again; the preview says what actually
/// happened to it.
fn cap(inv: Invoker<'_>, ctx: &ToolContext, call: &ToolCall, output: ToolOutput) -> Invoked {
    if !over_cap(&output.content, inv.max_result_chars) {
        return Invoked::uncapped(output);
    }
    let kept = ctx
        .session
        .with(|st: &mut ResultStore| st.put(&ctx.actor, &call.name, &output.content));
    let archive = match &kept {
        Ok(id) => Archive::Kept { result_id: id },
        Err(NotKept::TooLarge) => Archive::TooLarge {
            limit_bytes: MAX_RESULT_BYTES,
        },
    };
    let shown = preview(
        &call.name,
        &output.content,
        output.outcome,
        inv.max_result_chars,
        archive,
    );
    let mut capped = output;
    let full = std::mem::replace(&mut capped.content, shown);
    Invoked {
        output: capped,
        full_content: Some(full),
        result_id: kept.ok(),
        halt: None,
    }
}

/// Aborts the spawned tool task when the caller stops waiting for it (a stopped turn).
struct AbortOnDrop(tokio::task::JoinHandle<ToolOutput>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why a call's arguments are not an arguments object.
#[derive(Debug)]
pub enum ArgsError {
    NotObject,
    Invalid(serde_json::Error),
}

impl std::fmt::Display for ArgsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgsError::NotObject => f.write_str("tool arguments must be a JSON object"),
            ArgsError::Invalid(e) => write!(f, "tool arguments are not valid JSON: {e}"),
        }
    }
}

/// The arguments object of a call (empty text is an empty object).
pub fn parse_args(raw: &str) -> Result<serde_json::Value, ArgsError> {
    if raw.trim().is_empty() {
        return Ok(serde_json::Value::Object(serde_json::Map::new()));
    }
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(v @ serde_json::Value::Object(_)) => Ok(v),
        Ok(_) => Err(ArgsError::NotObject),
        Err(e) => Err(ArgsError::Invalid(e)),
    }
}

/// One call on its own (a direct call, a tool's call through its agent handle): the batch gates
/// see a batch of one, then [`invoke`].
pub async fn invoke_one(
    inv: Invoker<'_>,
    ctx: ToolContext,
    origin: Origin,
    call: &ToolCall,
) -> Invoked {
    let meta = inv
        .tools
        .view_for(&ctx.session)
        .get(&call.name)
        .map(|t| t.meta);
    let calls = [BatchCall {
        call,
        args: parse_args(&call.arguments).ok(),
        cut_off: false,
        meta,
    }];
    let admission = inv.gates.admit(&Batch {
        actor: &ctx.actor,
        origin,
        channel: &ctx.channel,
        calls: &calls,
        session: &ctx.session,
        turn: &ctx.turn,
    });
    if let Some(Some(answer)) = admission.answers.into_iter().next() {
        return Invoked {
            halt: admission.halt,
            ..Invoked::uncapped(answer)
        };
    }
    let mut done = invoke(inv, ctx, origin, call, 1).await;
    if done.halt.is_none() {
        done.halt = admission.halt;
    }
    done
}

/// Runs one admitted call to its end: [`dispatch`], then [`Dispatched::conclude`], with the host
/// notes appended to what the model reads. `same_tool_in_response` counts the calls of this tool
/// in the model response (1 outside a turn).
pub async fn invoke(
    inv: Invoker<'_>,
    ctx: ToolContext,
    origin: Origin,
    call: &ToolCall,
    same_tool_in_response: usize,
) -> Invoked {
    let mut done = dispatch(inv, ctx, origin, call, same_tool_in_response)
        .await
        .conclude(inv, call);
    done.output.render_notes();
    done
}

/// Runs one admitted call up to its output: lookup, arguments, the gates' checks, the ledger,
/// the run, the cap. The gates observe it in [`Dispatched::conclude`].
pub async fn dispatch(
    inv: Invoker<'_>,
    ctx: ToolContext,
    origin: Origin,
    call: &ToolCall,
    same_tool_in_response: usize,
) -> Dispatched {
    // The registry as of now: a set removed since the model saw its tool answers `unknown_tool`;
    // a call already running keeps its tool.
    let view = inv.tools.view_for(&ctx.session);
    let Some(tool) = view.get(&call.name) else {
        // Only what the caller may use: the answer must not advertise admin-only tools.
        let known: Vec<&str> = view.names_for(&ctx.actor).collect();
        return Dispatched::Done(Box::new(Invoked::uncapped(ToolOutput::failure(
            "unknown_tool",
            format!(
                "there is no tool named {:?}; available tools: {}",
                call.name,
                known.join(", ")
            ),
        ))));
    };
    let args = parse_args(&call.arguments).map_err(|msg| {
        ToolOutput::failure(
            "invalid_arguments",
            format!("invalid arguments for {}: {msg}", call.name),
        )
    });
    let raw_args = args.as_ref().ok().cloned();
    let prepared = args.and_then(|args| tool.tool.prepare(args));
    // The gates answer first: a refused caller never learns how its arguments were wrong.
    let (effect, requires_admin, admin_subject) = prepared
        .as_ref()
        .map(|p| (p.effect(), p.requires_admin(), p.admin_subject()))
        .unwrap_or((tool.meta.effect, false, None));
    let info = Call {
        origin,
        meta: tool.meta,
        effect,
        requires_admin,
        admin_subject,
        args: raw_args.clone(),
        same_tool_in_response,
    };
    let verdict = inv.gates.check(&info.facts(&ctx, call));
    // A call that reaches an answer (a refusal, invalid arguments, a recorded receipt, the tool's
    // own result) is observed: a refused call the model repeats is a loop too.
    let ran = |output: ToolOutput, ctx: ToolContext| {
        let invoked = if tool.meta.self_capped {
            Invoked::uncapped(output)
        } else {
            cap(inv, &ctx, call, output)
        };
        Dispatched::Ran(Box::new(Ran {
            invoked,
            ctx,
            call: info,
        }))
    };
    match verdict {
        Verdict::Allow => {}
        Verdict::Answer(out) => return ran(out, ctx),
        Verdict::Halt { output, halt } => {
            return Dispatched::Done(Box::new(Invoked {
                halt: Some(halt),
                ..Invoked::uncapped(output)
            }));
        }
    }
    let prepared = match prepared {
        Ok(p) => p,
        Err(out) => return ran(out, ctx),
    };
    // Writes are claimed in the durable ledger before they run; a duplicate is answered from its
    // record and never runs again.
    let check = prepared.read_back_check();
    let mut held = None;
    if let Some(store) = inv.ledger
        && ledger::is_ledgered(&tool.meta, effect)
        // A call its tool could not canonicalise is refused by that tool before any request.
        && !(prepared.shares_identity() && prepared.canonical_digest().is_none())
    {
        let raw = raw_args.clone().unwrap_or(serde_json::Value::Null);
        let id = ledger::identity(&ctx, &call.name, &call.id, &raw, prepared.as_ref());
        match ledger::claim(store, &id, check.as_deref(), &ctx).await {
            Ok(h) => held = Some(h),
            Err(answer) => return ran(answer, ctx),
        }
    }
    let output = run_bounded(
        inv.timeout.filter(|_| !tool.meta.own_timeout),
        &call.name,
        ctx.clone(),
        prepared,
        held.is_some(),
    )
    .await;
    let output = match held {
        Some(h) => h.finish(output, check.as_deref(), &ctx).await,
        None => output,
    };
    ran(output, ctx)
}

/// Runs the call on its own task under the timeout, with panics captured. The task is aborted
/// when the caller stops waiting (a stopped turn). A write that panics may have happened, so it
/// is `unknown`; so is a call that failed after it was cancelled.
async fn run_bounded(
    timeout: Option<Duration>,
    name: &str,
    ctx: ToolContext,
    prepared: Box<dyn PreparedCall>,
    is_write: bool,
) -> ToolOutput {
    let cancel = ctx.cancel.clone();
    let mut task = AbortOnDrop(tokio::spawn(prepared.run(ctx)));
    let joined = match timeout {
        Some(limit) => match tokio::time::timeout(limit, &mut task.0).await {
            Ok(j) => j,
            Err(_) => {
                cancel.cancel();
                return timed_out(limit);
            }
        },
        None => (&mut task.0).await,
    };
    match joined {
        // A tool that sees its call cancelled (the user's stop, a closed session) ends early,
        // often with a failure of its own ("cancelled"); its effects are then as uncertain as
        // those of a call the stop cut off, so it is answered the same way.
        Ok(out) if out.outcome == Outcome::Failed && cancel.is_cancelled() => interrupted(true),
        Ok(out) => out,
        Err(e) if e.is_panic() => {
            // The panic payload may hold arguments or secrets; it is logged by name only.
            tracing::warn!(tool = %name, "tool panicked");
            if is_write {
                ToolOutput::unknown(
                    "tool_failed",
                    "tool raised; write outcome unknown; verify state before retrying",
                )
            } else {
                ToolOutput::failure(
                    "tool_failed",
                    "tool failed (panic); check arguments or query current state",
                )
            }
        }
        Err(_) => interrupted(true),
    }
}

fn timed_out(limit: Duration) -> ToolOutput {
    ToolOutput::unknown(
        "tool_timeout",
        format!(
            "tool timed out after {}s; external writes may still be running; verify before retrying",
            limit.as_secs()
        ),
    )
}

/// The answer for a call that has no result because the turn stopped.
pub fn interrupted(started: bool) -> ToolOutput {
    let detail = if started {
        "the turn was stopped while this call was running; its effects may or may not have happened — verify before retrying"
    } else {
        "the turn was stopped before this call could report a result — verify the current state before retrying"
    };
    ToolOutput::unknown(
        "interrupted",
        format!("result unknown: interrupted; {detail}"),
    )
}

/// A one-line human summary of a result for tool activity lines, taken from the redacted result:
/// the live `tool` event and the stored chat (whose result is redacted first) show the same line,
/// and a secret is never cut in half before redaction could see it.
pub fn summary_line(content: &str) -> String {
    let redacted = crate::redaction::redact(content);
    let content: &str = &redacted;
    let from_json = serde_json::from_str::<serde_json::Value>(content)
        .ok()
        .and_then(|v| {
            ["message", "error", "summary"]
                .iter()
                .find_map(|k| v.get(*k).and_then(|x| x.as_str()).map(str::to_string))
        });
    let line = from_json.unwrap_or_else(|| content.lines().next().unwrap_or("").to_string());
    let mut s: String = line.chars().take(200).collect();
    if line.chars().count() > 200 {
        s.push('…');
    }
    s
}

/// Whether the outcome counts as done for exit codes (`mpagent tool`: 0 for succeeded/pending).
pub fn exit_ok(outcome: Outcome) -> bool {
    matches!(outcome, Outcome::Succeeded | Outcome::Pending)
}
