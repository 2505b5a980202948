//! Memory of idle live sessions (issue 24, item 9; target ≤ 64 KB each). `MPA_BENCH_SESSIONS`
//! (1,000) sessions each run one turn at once against the instant mock model and stay live (the
//! idle reclaim is far away); then the heap they hold is read with a counting allocator — live
//! bytes (allocated minus freed) with every session live and idle, minus the same once they are
//! closed — so allocator retention and the process's fixed costs (the tokenizer's vocabulary,
//! the runtime) do not count. The process RSS is printed beside it.
//!
//! What one session's stored form weighs (its messages and its session state, the frozen system
//! prompt included) is printed too, and what that data weighs loaded: the part of the live figure
//! that is the conversation itself (the rest is the actor — its task, queue, slots, token counts).
//!
//! Run: `cargo bench -p mpa-core --bench sessions`.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a bench's panic is its failure report"
)]

use mpa_core::capability::{Learning, Recall, Terminals};
use mpa_core::{Agent, AgentConfig, Capabilities};
use mpa_protocol::{Actor, Event, TurnStatus};
use mpa_store::Store;
use mpa_test_support::{MockModelServer, MockReply};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

/// The system allocator, counting the bytes it has handed out and not got back.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged and only
// updates a counter, so `System`'s guarantees hold.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received (see the impl).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received (see the impl).
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as received (see the impl).
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as received (see the impl).
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live_kb() -> f64 {
    LIVE.load(Ordering::Relaxed) as f64 / 1024.0
}

fn rss_mb() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

async fn turn(agent: Agent, actor: Actor, session: String) {
    let mut rx = agent
        .submit(
            &actor,
            &session,
            "web",
            format!("hello from {session}"),
            vec![],
        )
        .await
        .unwrap();
    let mut error = None;
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Error { code, message, .. } => error = Some(format!("{code}: {message}")),
            Event::TurnEnded { status, .. } => {
                assert_eq!(status, TurnStatus::Completed, "{error:?}");
                return;
            }
            _ => {}
        }
    }
    panic!("no TurnEnded");
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let n: usize = std::env::var("MPA_BENCH_SESSIONS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000);
        let model = std::env::var("MPA_BENCH_MODEL").unwrap_or_else(|_| "gpt-4o".into());
        let mock = MockModelServer::start().await;
        mock.set_default(MockReply::text(
            "Hello from the instant mock model, streamed in pieces.",
        ));
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let user = store.ensure_local_user("bench").await.unwrap();
        let actor = Actor {
            user_id: user.id,
            user_name: user.name,
            is_admin: true,
        };
        let mut cfg = AgentConfig::new(mpa_model::ModelConfig {
            base_url: mock.base_url.clone(),
            model: model.clone(),
            max_retries: 0,
            ..Default::default()
        });
        cfg.session_idle = Duration::from_secs(3600);
        cfg.memory_review_interval = 0;
        cfg.skill_review_interval = 0;
        let caps = Capabilities::default()
            .with(Terminals::new(mpa_exec::Processes::new(
                mpa_exec::ExecConfig::new(dir.path().to_path_buf(), dir.path().join("spill")),
            )))
            .with(Learning::new(
                mpa_learning::Memory::new(mpa_learning::MemoryConfig::new(dir.path())),
                mpa_learning::Skills::new(dir.path().to_path_buf()),
            ))
            .with(Recall::new(mpa_history::History::new(
                mpa_history::HistoryConfig::new(dir.path()),
            )));
        let agent = Agent::builder(cfg, store).caps(caps).build().unwrap();
        // Warm: the tokenizer's vocabulary and every lazy table load once per process.
        turn(agent.clone(), actor.clone(), "warm-up".into()).await;
        agent.close_session("warm-up").await;
        // The mock model keeps every request it received; that is not the host's memory.
        mock.clear_requests();
        let (base_live, base_rss) = (live_kb(), rss_mb());

        let ids: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
        let tasks: Vec<_> = ids
            .iter()
            .map(|id| tokio::spawn(turn(agent.clone(), actor.clone(), id.clone())))
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        for id in &ids {
            let h = agent.live(id).expect("live");
            assert!(h.wait_idle(Duration::from_secs(60)).await);
        }
        mock.clear_requests();
        let (live, rss) = (live_kb(), rss_mb());
        // Blocking-pool threads idle out after 10 s (their stacks go with them); the host gives
        // the turns' freed memory back a second after they ended (`mpa_core::heap`).
        tokio::time::sleep(Duration::from_secs(12)).await;
        let rss_settled = rss_mb();
        // SAFETY: malloc_trim only returns free memory to the system.
        unsafe { libc::malloc_trim(0) };
        let rss_trimmed = rss_mb();
        println!(
            "RSS right after {rss:.1} MB, 12 s later {rss_settled:.1} MB ({:.1} KB per session), \
             after another malloc_trim {rss_trimmed:.1} MB",
            (rss_settled - base_rss) * 1024.0 / n as f64,
        );
        let chat = agent.chat_for(&actor, &ids[0]).await.unwrap();
        let messages = serde_json::to_string(&chat.agent_messages).unwrap().len();
        let state = chat.session_state.to_string().len();
        // What the conversation itself weighs in memory: one session's data as the actor holds
        // it (loaded from its snapshot; the token counts and tools' slots aside).
        // A hundred copies, so what other tasks free meanwhile does not count.
        let before_load = live_kb();
        let loaded: Vec<_> = (0..100)
            .map(|_| mpa_core::session::SessionData::from_chat(chat.clone()))
            .collect();
        let data_kb = (live_kb() - before_load) / 100.0;
        drop(loaded);
        for id in &ids {
            agent.close_session(id).await;
        }
        let closed = live_kb();
        println!(
            "{n} idle live sessions ({model}, one turn each): live heap {:.1} KB per session \
             (with them {:.1} MB, closed {:.1} MB, before {:.1} MB); RSS {:.1} MB → {:.1} MB \
             ({:.1} KB per session); stored form of one: messages {messages} B, session state \
             {state} B; its data in memory {data_kb:.1} KB",
            (live - closed) / n as f64,
            live / 1024.0,
            closed / 1024.0,
            base_live / 1024.0,
            base_rss,
            rss,
            (rss - base_rss) * 1024.0 / n as f64,
        );
        agent.shutdown().await;
    });
}
