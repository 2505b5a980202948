//! The loop guardrails' cost per tool call (issue 27). Target: the accounting of one call (the
//! per-call check before it runs and the observation of its result, by `LoopGuard` and
//! `WriteOutcomes`) ≤ 20 µs with 64 calls of history; no memory growth over a 10,000-call loop
//! run (every window is bounded). The growth check runs first and prints the live bytes the
//! record holds after 1,000 and after 10,000 calls.
//! Run: `cargo bench -p mpa-core --bench guardrails`.
#![expect(clippy::unwrap_used, reason = "a bench's panic is its failure report")]

use divan::Bencher;
use mpa_core::Slots;
use mpa_core::tools::gate::{CallFacts, Gate, Verdict};
use mpa_core::tools::guardrails::{LoopClass, LoopGuard, WriteOutcomes};
use mpa_core::tools::policy::Origin;
use mpa_core::tools::{SessionState, ToolMeta, ToolOutput};
use mpa_protocol::{Actor, EffectClass, Outcome, UserId};
use serde_json::{Value, json};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// Counts the bytes allocated and not yet freed.
struct Live;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is kept.
unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on as it is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on as it is.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Live = Live;

fn main() {
    growth();
    divan::main();
}

fn actor() -> Actor {
    Actor {
        user_id: UserId("bench".into()),
        user_name: "bench".into(),
        is_admin: true,
    }
}

/// One call of a mixed loop: reads (some repeating), failing lookups, writes, terminal polls.
struct Call {
    tool: &'static str,
    meta: ToolMeta,
    effect: EffectClass,
    args: Value,
    output: ToolOutput,
}

fn call(i: usize) -> Call {
    let rows = format!(
        r#"{{"success":true,"items":[{}]}}"#,
        (0..12)
            .map(|r| format!(r#"{{"id":{r},"name":"订阅 {r} 流浪地球","state":"R"}}"#))
            .collect::<Vec<_>>()
            .join(",")
    );
    match i % 4 {
        0 => Call {
            tool: "moviepilot_api",
            meta: ToolMeta::new(EffectClass::Unknown)
                .loop_class(LoopClass::keyed_by("operation_id")),
            effect: EffectClass::SafeRead,
            args: json!({"operation_id": "subscription.list", "query": {"page": i % 7, "count": 20}}),
            output: ToolOutput::json(
                &serde_json::from_str::<Value>(&rows).unwrap(),
                Outcome::Succeeded,
            ),
        },
        1 => Call {
            tool: "moviepilot_api",
            meta: ToolMeta::new(EffectClass::Unknown)
                .loop_class(LoopClass::keyed_by("operation_id")),
            effect: EffectClass::SafeRead,
            args: json!({"operation_id": "media.detail", "path_params": {"id": i % 11}}),
            output: ToolOutput::failure("not_found", "no media with that id"),
        },
        2 => Call {
            tool: "execute_command",
            meta: ToolMeta::new(EffectClass::ArbitraryExecution).loop_class(LoopClass::TERMINAL),
            effect: EffectClass::ArbitraryExecution,
            args: json!({"action": "wait", "session_id": "term_1", "timeout_ms": 1000}),
            output: ToolOutput::json(
                &json!({"action": "wait", "status": "running", "output": "", "output_until_seq": 3}),
                Outcome::Pending,
            ),
        },
        _ => Call {
            tool: "update_plan",
            meta: ToolMeta::read().loop_class(LoopClass::SESSION_STATE),
            effect: EffectClass::SafeRead,
            args: json!({"steps": [{"step": format!("step {}", i % 5), "status": "in_progress"}]}),
            output: ToolOutput::json(&json!({"success": true}), Outcome::Succeeded),
        },
    }
}

/// A watched channel: every call is checked, observed and noted in full (a stopping one would
/// refuse the repeats early, which costs less).
struct Loop {
    guard: LoopGuard,
    outcomes: WriteOutcomes,
    actor: Actor,
    session: SessionState,
    turn: Slots,
}

impl Loop {
    fn new() -> Self {
        Loop {
            guard: LoopGuard::default(),
            outcomes: WriteOutcomes,
            actor: actor(),
            session: SessionState::new(),
            turn: Slots::new(),
        }
    }
}

/// Checks and observes `c` as the one call path does.
fn account(l: &Loop, c: &Call) {
    let (guard, outcomes, turn, session) = (&l.guard, &l.outcomes, &l.turn, &l.session);
    let facts = CallFacts {
        actor: &l.actor,
        origin: Origin::Turn,
        channel: "web",
        tool: c.tool,
        call_id: "call_1",
        meta: &c.meta,
        effect: c.effect,
        requires_admin: false,
        admin_subject: None,
        args: Some(&c.args),
        same_tool_in_response: 1,
        session,
        turn,
    };
    if let Verdict::Allow = guard.check(&facts) {
        let mut out = c.output.clone();
        divan::black_box(guard.observe(&facts, &mut out, None));
        divan::black_box(outcomes.observe(&facts, &mut out, None));
    }
}

/// Live bytes after 1,000 and 10,000 calls of one loop run: equal when every window is bounded.
fn growth() {
    let l = Loop::new();
    let calls: Vec<Call> = (0..64).map(call).collect();
    let base = LIVE.load(Ordering::Relaxed);
    let mut at_1k = 0;
    for i in 0..10_000 {
        account(&l, &calls[i % calls.len()]);
        if i + 1 == 1_000 {
            at_1k = LIVE.load(Ordering::Relaxed) - base;
        }
    }
    let at_10k = LIVE.load(Ordering::Relaxed) - base;
    println!("guardrail state, live bytes: after 1,000 calls {at_1k}; after 10,000 calls {at_10k}");
}

/// One call's accounting with 64 calls of history in the record.
#[divan::bench(args = ["read", "failure", "poll", "plan"])]
fn accounting_at_64_calls_of_history(bencher: Bencher, kind: &str) {
    let l = Loop::new();
    for i in 0..64 {
        account(&l, &call(i * 7 + 1));
    }
    let c = call(match kind {
        "read" => 64,
        "failure" => 65,
        "poll" => 66,
        _ => 67,
    });
    bencher.bench_local(|| account(&l, &c));
}
