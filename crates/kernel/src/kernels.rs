//! The host's kernels: one per key, cells queued per kernel, idle ones evicted least recently
//! used first beyond `max_idle_kernels` and reaped after `idle_ttl` in the background; a
//! conversation's kernels end with it, every kernel with the host.

use crate::capture;
use crate::error::{KernelError, Result};
use crate::helpers::Helper;
use crate::kernel::{CellRun, Ending, Kernel};
use crate::report::{CellReport, CellStatus, KernelState};
use crate::rpc::{CellWindow, RpcHandler};
use crate::{KernelConfig, process};
use mpa_redact::UserKey;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Whose kernel: the conversation scope it belongs to and the user it runs for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KernelOwner {
    /// The conversation scope (its session id and generation, as the host names it).
    pub scope: String,
    pub user_key: UserKey,
}

/// One cell to run.
pub struct CellRequest {
    pub owner: KernelOwner,
    pub code: String,
    pub reset: bool,
    /// The tools enabled in this request, offered as Python helpers.
    pub helpers: Vec<Helper>,
    /// How the cell's helper calls reach the host.
    pub handler: Arc<dyn RpcHandler>,
    /// Cancels the cell (the kernel ends with it).
    pub cancel: CancellationToken,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct KernelKey {
    owner: KernelOwner,
    helpers: Vec<String>,
    interpreter: PathBuf,
    cwd: PathBuf,
}

/// One key's kernel and its queue.
struct Slot {
    kernel: tokio::sync::Mutex<Option<Kernel>>,
    /// Cells running or waiting for this kernel.
    busy: AtomicUsize,
    /// The live kernel's process group (0: none), so a close can end a running cell.
    pgid: AtomicU32,
    last_used: Mutex<Instant>,
    /// Why the previous kernel of this key ended, told to the next cell.
    lost: Mutex<Option<&'static str>>,
    closed: AtomicBool,
}

impl Slot {
    fn new() -> Self {
        Self {
            kernel: tokio::sync::Mutex::new(None),
            busy: AtomicUsize::new(0),
            pgid: AtomicU32::new(0),
            last_used: Mutex::new(Instant::now()),
            lost: Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn idle_since(&self) -> Instant {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn set_lost(&self, why: &'static str) {
        *self.lost.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
    }

    fn take_lost(&self) -> Option<&'static str> {
        self.lost
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn is_live(&self) -> bool {
        self.pgid.load(Ordering::SeqCst) != 0
    }

    /// Ends the idle kernel (false when a cell holds it).
    async fn end_if_idle(&self, why: &'static str) -> bool {
        let Ok(mut guard) = self.kernel.try_lock() else {
            return false;
        };
        if self.busy.load(Ordering::SeqCst) > 0 {
            return false;
        }
        let Some(kernel) = guard.take() else {
            return true;
        };
        self.pgid.store(0, Ordering::SeqCst);
        self.set_lost(why);
        kernel.kill().await;
        true
    }
}

struct Inner {
    cfg: KernelConfig,
    slots: Mutex<HashMap<KernelKey, Arc<Slot>>>,
    shutting_down: AtomicBool,
    reaper_started: AtomicBool,
    reaper_stop: CancellationToken,
}

/// The host's kernels. Cheap to clone.
#[derive(Clone)]
pub struct Kernels {
    inner: Arc<Inner>,
}

impl Kernels {
    pub fn new(cfg: KernelConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                cfg,
                slots: Mutex::new(HashMap::new()),
                shutting_down: AtomicBool::new(false),
                reaper_started: AtomicBool::new(false),
                reaper_stop: CancellationToken::new(),
            }),
        }
    }

    pub fn config(&self) -> &KernelConfig {
        &self.inner.cfg
    }

    /// The interpreter kernels start with.
    pub fn interpreter(&self) -> PathBuf {
        process::interpreter(&self.inner.cfg)
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<KernelKey, Arc<Slot>>> {
        self.inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Process-group ids of the live kernels (diagnostics and tests).
    pub fn live(&self) -> Vec<u32> {
        self.slots()
            .values()
            .map(|s| s.pgid.load(Ordering::SeqCst))
            .filter(|p| *p != 0)
            .collect()
    }

    fn user_dir(&self, user: &UserKey) -> PathBuf {
        self.inner.cfg.runtime_dir.join("users").join(user.as_str())
    }

    /// The directory a user's spill files go to.
    pub fn spill_dir(&self, user: &UserKey) -> PathBuf {
        self.user_dir(user).join("output")
    }

    fn start_reaper(&self) {
        if self.inner.reaper_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let stop = self.inner.reaper_stop.clone();
        let period = self.inner.cfg.reaper_period;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(period) => {}
                    () = stop.cancelled() => return,
                }
                let Some(inner) = weak.upgrade() else { return };
                Kernels { inner }.reap_idle().await;
            }
        });
    }

    /// Runs one cell in the owner's kernel for this helper set (started when there is none).
    pub async fn execute(&self, req: CellRequest) -> Result<CellReport> {
        if self.inner.shutting_down.load(Ordering::SeqCst) {
            return Err(KernelError::ShuttingDown);
        }
        self.start_reaper();
        let started = Instant::now();
        let cfg = &self.inner.cfg;
        let mut helper_names: Vec<String> = req.helpers.iter().map(|h| h.name.clone()).collect();
        helper_names.sort();
        helper_names.dedup();
        let key = KernelKey {
            owner: req.owner.clone(),
            helpers: helper_names.clone(),
            interpreter: process::interpreter(cfg),
            cwd: cfg.cwd.clone(),
        };
        let slot = {
            let mut slots = self.slots();
            let slot = slots.entry(key).or_insert_with(|| Arc::new(Slot::new()));
            // Counted before waiting, so a queued cell's kernel is never evicted.
            slot.busy.fetch_add(1, Ordering::SeqCst);
            Arc::clone(slot)
        };
        let result = self.run_in(&slot, req, helper_names, started).await;
        slot.touch();
        slot.busy.fetch_sub(1, Ordering::SeqCst);
        self.evict_beyond_capacity().await;
        result
    }

    async fn run_in(
        &self,
        slot: &Slot,
        req: CellRequest,
        helper_names: Vec<String>,
        started: Instant,
    ) -> Result<CellReport> {
        let cfg = &self.inner.cfg;
        let mut guard = slot.kernel.lock().await;
        if self.inner.shutting_down.load(Ordering::SeqCst) {
            return Err(KernelError::ShuttingDown);
        }
        if slot.closed.load(Ordering::SeqCst) {
            return Err(KernelError::ScopeClosed);
        }
        let mut warning = None;
        let mut state_reset = false;
        if req.reset
            && let Some(old) = guard.take()
        {
            slot.pgid.store(0, Ordering::SeqCst);
            old.kill().await;
            state_reset = true;
        }
        if let Some(why) = slot.take_lost()
            && guard.is_none()
        {
            state_reset = true;
            warning = Some(format!(
                "the previous kernel ended ({why}); variables from earlier cells are gone / \
                 之前的内核已结束({why}),此前单元的变量已不存在"
            ));
        }
        let reused = guard.is_some();
        if guard.is_none() {
            let user_dir = self.user_dir(&req.owner.user_key);
            let spill_dir = self.spill_dir(&req.owner.user_key);
            let kernel = Kernel::start(cfg, &user_dir, &spill_dir, &req.helpers)?;
            slot.pgid.store(kernel.pgid(), Ordering::SeqCst);
            *guard = Some(kernel);
        }
        let Some(kernel) = guard.as_mut() else {
            return Err(KernelError::ShuttingDown);
        };
        let window = CellWindow::new(
            req.handler,
            helper_names,
            cfg.max_rpc_calls,
            cfg.max_rpc_result_bytes,
        );
        let run = kernel
            .run_cell(cfg, &req.code, Arc::clone(&window), &req.cancel)
            .await;
        let execution_count = kernel.execution_count;
        if !run.ending.kernel_survives() {
            let closed = slot.closed.load(Ordering::SeqCst);
            if let Some(k) = guard.take() {
                slot.pgid.store(0, Ordering::SeqCst);
                k.kill().await;
            }
            slot.set_lost(match (&run.ending, closed) {
                (_, true) => "conversation closed",
                (Ending::Timeout, _) => "timeout",
                (Ending::Cancelled, _) => "cancelled",
                (Ending::Exited(_), _) => "sys.exit",
                _ => "the process ended",
            });
        }
        drop(guard);
        let kernel_state = if run.ending.kernel_survives() {
            KernelState::Live {
                mode: "session",
                reused,
                state_reset,
                execution_count,
                ended: false,
            }
        } else {
            KernelState::lost()
        };
        let calls = window.take_calls();
        Ok(self.report(
            run,
            &req.owner.user_key,
            kernel_state,
            warning,
            calls,
            started,
        ))
    }

    fn report(
        &self,
        run: CellRun,
        user: &UserKey,
        kernel: KernelState,
        mut warning: Option<String>,
        calls: crate::rpc::CellCalls,
        started: Instant,
    ) -> CellReport {
        let cfg = &self.inner.cfg;
        let (status, exit_code, error) = match &run.ending {
            Ending::Finished { error: None } => (CellStatus::Success, 0, None),
            Ending::Finished { error: Some(e) } => (CellStatus::Error, 1, Some(e.clone())),
            Ending::Exited(code) => (
                CellStatus::Error,
                -1,
                Some(format!(
                    "the script called sys.exit({code}); the kernel ended and its state is lost"
                )),
            ),
            Ending::Died(why) => (
                CellStatus::Error,
                -1,
                Some(format!("{why}; the kernel's state is lost")),
            ),
            Ending::Timeout => (
                CellStatus::Timeout,
                -1,
                Some(format!(
                    "the cell ran over {} s and was stopped; the kernel's state is lost",
                    cfg.cell_timeout.as_secs_f64()
                )),
            ),
            Ending::Cancelled => (
                CellStatus::Error,
                -1,
                Some("the cell was cancelled; the kernel's state is lost".to_string()),
            ),
        };
        let total = run.stdout.total();
        let (preview, truncated, shown) = run.stdout.preview(cfg.stdout_inline_bytes);
        let preview = mpa_redact::redact(&preview).into_owned();
        let mut spill_path = None;
        let mut spill_capped = None;
        if truncated {
            let text = run.stdout.kept_text();
            let text = mpa_redact::redact(&text);
            match capture::spill(&self.spill_dir(user), &text, cfg.spill_retention) {
                Ok(p) => {
                    spill_path = Some(p.display().to_string());
                    spill_capped = Some(total > run.stdout.kept_len() as u64);
                }
                Err(e) => {
                    tracing::warn!("kernel stdout spill failed: {e}");
                    warning.get_or_insert_with(|| {
                        "the full output could not be saved; only the preview is available"
                            .to_string()
                    });
                }
            }
        }
        let (stderr, stderr_truncated, _) = run.stderr.preview(cfg.stderr_inline_bytes);
        let stderr = mpa_redact::redact(&stderr).into_owned();
        let mut output = preview;
        if !stderr.is_empty() {
            output.push_str("\n[stderr]\n");
            output.push_str(&stderr);
        }
        let success = status == CellStatus::Success && calls.errors.is_empty();
        CellReport {
            status,
            output,
            exit_code,
            duration_seconds: (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
            kernel,
            stdout_truncated: truncated,
            stdout_bytes_total: total,
            stdout_bytes_captured: run.stdout.kept_len() as u64,
            stdout_bytes_omitted: total.saturating_sub(shown),
            stdout_spill_path: spill_path,
            stdout_spill_capped: spill_capped,
            warning,
            stderr,
            stderr_truncated,
            error,
            stdout_source_bytes_total: total,
            stdout_capture_incomplete: total > run.stdout.kept_len() as u64,
            tool_calls_made: calls.made,
            tool_calls: calls.records,
            success,
            tool_errors: calls.errors,
        }
    }

    /// Ends idle kernels beyond `max_idle_kernels`, least recently used first. Kernels with a
    /// cell running or queued are never evicted (the count may exceed the limit meanwhile).
    async fn evict_beyond_capacity(&self) {
        let mut idle: Vec<Arc<Slot>> = self
            .slots()
            .values()
            .filter(|s| s.is_live() && s.busy.load(Ordering::SeqCst) == 0)
            .cloned()
            .collect();
        let max = self.inner.cfg.max_idle_kernels;
        if idle.len() <= max {
            return;
        }
        idle.sort_by_key(|s| s.idle_since());
        let excess = idle.len() - max;
        for slot in idle.into_iter().take(excess) {
            slot.end_if_idle("evicted: too many idle kernels").await;
        }
    }

    /// Ends kernels idle longer than `idle_ttl`, and forgets empty slots.
    pub async fn reap_idle(&self) {
        let ttl = self.inner.cfg.idle_ttl;
        let expired: Vec<Arc<Slot>> = self
            .slots()
            .values()
            .filter(|s| s.busy.load(Ordering::SeqCst) == 0 && s.idle_since().elapsed() >= ttl)
            .cloned()
            .collect();
        for slot in expired {
            if slot.is_live() {
                slot.end_if_idle("idle expiry").await;
            }
        }
        // Slots without a kernel long after their last use carry only a "lost" note, kept at
        // least an hour so the conversation's next cell is told.
        let keep_note = ttl
            .saturating_mul(2)
            .max(std::time::Duration::from_secs(3600));
        self.slots().retain(|_, s| {
            s.is_live() || s.busy.load(Ordering::SeqCst) > 0 || s.idle_since().elapsed() < keep_note
        });
    }

    /// The conversation scope closed: its kernels end, running cells with them.
    pub async fn close_scope(&self, scope: &str) {
        // Removed first: a cell arriving later starts a new kernel; one queued behind the close
        // is refused.
        let mut slots = Vec::new();
        self.slots().retain(|k, s| {
            let keep = k.owner.scope != scope;
            if !keep {
                slots.push(Arc::clone(s));
            }
            keep
        });
        for slot in &slots {
            end_slot(slot, "conversation closed").await;
        }
    }

    /// The host shuts down: no kernel starts any more, every kernel ends.
    pub async fn shutdown(&self) {
        self.inner.shutting_down.store(true, Ordering::SeqCst);
        self.inner.reaper_stop.cancel();
        let slots: Vec<Arc<Slot>> = self.slots().values().cloned().collect();
        for slot in &slots {
            end_slot(slot, "host shutdown").await;
        }
    }
}

/// Ends the slot's kernel now: a running cell sees its kernel die and reports the state lost.
async fn end_slot(slot: &Slot, why: &'static str) {
    slot.closed.store(true, Ordering::SeqCst);
    let pgid = slot.pgid.load(Ordering::SeqCst);
    if pgid != 0 {
        process::kill_group(pgid);
    }
    // An idle kernel is reaped here; a running cell's own path reaps it when it sees the end.
    let mut guard = slot.kernel.lock().await;
    if let Some(k) = guard.take() {
        slot.pgid.store(0, Ordering::SeqCst);
        slot.set_lost(why);
        k.kill().await;
    }
}
