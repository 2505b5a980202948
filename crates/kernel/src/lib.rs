//! `mpa-kernel` — persistent Python kernels for `execute_code` (spec runtime.md §10). It knows
//! nothing of tool JSON or the model: core's `execute_code` tool hands it a cell, the helper
//! set enabled for the request and an [`RpcHandler`] that re-enters the host's tool call path;
//! the typed [`CellReport`] it returns serialises to the result JSON of §10.5.
//!
//! Public API:
//! - [`Kernels`] — one per host: [`Kernels::execute`] ([`CellRequest`] → [`CellReport`]),
//!   [`Kernels::close_scope`] (a conversation closed), [`Kernels::reap_idle`] (also run in the
//!   background), [`Kernels::shutdown`], [`Kernels::live`] (diagnostics).
//! - [`KernelConfig`] (interpreter, cwd, directories, limits with the spec's defaults).
//! - [`Helper`] (a tool offered to Python: name and JSON schema) and [`helper_signature`].
//! - [`RpcHandler`] / [`RpcOutcome`]: how a helper call reaches the host.
//! - [`KernelError`].
//!
//! Invariants:
//! - One kernel per (conversation scope, user, sorted helper names, interpreter, cwd); its
//!   cells run one at a time, in order.
//! - A kernel is a `python3` process leading its own session and process group, in a private
//!   0700 directory; everything that ends it (reset, `sys.exit`, timeout, cancellation, a
//!   transport failure, eviction, scope close, shutdown) kills the whole group and reaps it.
//! - Tool RPCs are accepted only on the kernel's own 0600 socket, with its own token (compared
//!   in constant time), while a cell of that kernel runs, for the cell's helpers, at most
//!   `max_rpc_calls` per cell.
//! - Spill files are redacted, 0600, outside the kernel directory (they outlive it).

mod capture;
mod error;
mod helpers;
mod kernel;
mod kernels;
mod process;
mod report;
mod rpc;

pub use error::{KernelError, Result};
pub use helpers::{Helper, helper_signature};
pub use kernels::{CellRequest, KernelOwner, Kernels};
pub use report::{CellReport, CellStatus, KernelState, ToolCallRecord, ToolError};
pub use rpc::{RpcHandler, RpcOutcome};

// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use capture::{Capture, find, partial_suffix};
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use helpers::module_source;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use rpc::same_token;

use std::path::PathBuf;
use std::time::Duration;

/// Host configuration of the kernels. Defaults are the spec's (§10.4).
#[derive(Debug, Clone)]
pub struct KernelConfig {
    /// The Python interpreter; `None`: `<venv>/bin/python3` when a venv is known, else `python3`
    /// on the PATH.
    pub interpreter: Option<PathBuf>,
    /// The project's virtualenv (`VENV_PATH`); `<cwd>/venv` is used when it exists.
    pub venv_path: Option<PathBuf>,
    /// Where kernels start (the MoviePilot root).
    pub cwd: PathBuf,
    /// `data/agent/runtime/code`: kernel directories and spill files live under
    /// `users/<user-key>/`.
    pub runtime_dir: PathBuf,
    /// Where the private socket directories are made (`/tmp`: socket paths must be short).
    pub socket_root: PathBuf,
    pub cell_timeout: Duration,
    /// Idle kernels kept (least recently used ones beyond it end).
    pub max_idle_kernels: usize,
    pub idle_ttl: Duration,
    pub reaper_period: Duration,
    pub max_rpc_calls: usize,
    pub max_rpc_result_bytes: usize,
    pub stdout_inline_bytes: usize,
    pub stderr_inline_bytes: usize,
    pub spill_max_bytes: usize,
    pub spill_retention: Duration,
}

impl KernelConfig {
    pub fn new(cwd: impl Into<PathBuf>, runtime_dir: impl Into<PathBuf>) -> Self {
        let idle_ttl = Duration::from_secs(1800);
        Self {
            interpreter: None,
            venv_path: None,
            cwd: cwd.into(),
            runtime_dir: runtime_dir.into(),
            socket_root: std::env::temp_dir(),
            cell_timeout: Duration::from_secs(300),
            max_idle_kernels: 4,
            idle_ttl,
            reaper_period: reaper_period(idle_ttl),
            max_rpc_calls: 50,
            max_rpc_result_bytes: 16 * 1024 * 1024,
            stdout_inline_bytes: 50_000,
            stderr_inline_bytes: 10_000,
            spill_max_bytes: 5_000_000,
            spill_retention: Duration::from_secs(7 * 24 * 60 * 60),
        }
    }
}

/// The spec's reaper period for an idle expiry: min(300, max(30, idle / 6)) seconds.
pub fn reaper_period(idle_ttl: Duration) -> Duration {
    (idle_ttl / 6).clamp(Duration::from_secs(30), Duration::from_secs(300))
}
