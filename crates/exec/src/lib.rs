//! `mpa-exec` — processes for the `execute_command` tool: one-shot runs and long-lived pipe/PTY
//! sessions with resumable output cursors, signals, scopes and sharing (spec runtime.md §5).
//!
//! Public API (what core's tool adapter wires in):
//! - [`ExecHub`] — one per process. [`ExecHub::open_scope`] / [`ExecHub::open_child_scope`] /
//!   [`ExecHub::close_scope`] are host calls; [`ExecHub::execute`] is the whole tool (JSON in,
//!   JSON out, failures included); [`ExecHub::shutdown`] kills everything at host exit.
//! - [`ExecConfig`] (workdir, venv, spill dir) and [`ExecLimits`] (defaults from the spec).
//! - [`ScopeOwner`], [`ScopeId`], [`TerminalGrant`], [`GrantAction`], [`CloseReport`],
//!   [`terminal_sessions_block`] — scopes and subtask sharing.
//! - [`execute_command_description`], [`execute_command_parameters_schema`],
//!   [`permission_denied_result`] — the tool's surface for the registry and the admin policy.
//!
//! Invariants:
//! - Every process is the leader of its own session and process group; every signal targets
//!   the group, and kill/timeout/close end with SIGKILL to the group so no grandchild survives.
//! - Output is an append-only chunk log with absolute sequence numbers; cursors never reset, and
//!   output that fell out of the 1 MiB retained window is reported as `output_lost`.
//! - Outcomes are honest: exit 0 → `succeeded`; non-zero, killed, timed out → `failed`; no exit
//!   code → `unknown`; running → `pending`. Having printed something is never success.
//! - Scopes come from the host, never from tool JSON. Missing, closed, expired and foreign
//!   sessions all produce one identical `terminal_access_denied` payload.
//! - Every `unsafe` block lives in `process` and states its `SAFETY:` argument.

mod args;
mod danger;
mod error;
mod hub;
mod launch;
mod output_log;
mod payload;
mod process;
mod run;
mod scope;
mod session;
mod utf8_stream;

pub use error::{ExecError, Result};
pub use hub::ExecHub;
pub use scope::{
    CloseReport, GrantAction, ScopeId, ScopeOwner, TerminalGrant, terminal_sessions_block,
};

use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

/// Host configuration of the tool.
#[derive(Debug, Clone)]
pub struct ExecConfig {
    /// Default and base directory for `cwd` (`MPA_WORKDIR`; default: where the host started).
    pub workdir: PathBuf,
    /// `VENV_PATH`: a Python environment put first on every child's PATH. When `None`,
    /// `<workdir>/venv` is used if it exists.
    pub venv_path: Option<PathBuf>,
    /// Where a long `run` output is spilled in full (`output_file`).
    pub spill_dir: PathBuf,
}

/// Limits of the hub; the defaults are the spec's values.
#[derive(Debug, Clone)]
pub struct ExecLimits {
    /// Running sessions per process, in-flight starts included (4).
    pub max_running_sessions: usize,
    /// Concurrent one-shot runs (2).
    pub run_concurrency: usize,
    /// How long a finished session stays readable (30 min).
    pub finished_retention: Duration,
    /// Output retained per session (1 MiB); older chunks are dropped.
    pub max_retained_bytes: usize,
    /// Character budget of one session reply, pretty-printed (65 536).
    pub json_budget_chars: usize,
}

impl Default for ExecLimits {
    fn default() -> Self {
        Self {
            max_running_sessions: 4,
            run_concurrency: 2,
            finished_retention: Duration::from_secs(30 * 60),
            max_retained_bytes: 1 << 20,
            json_budget_chars: 65_536,
        }
    }
}

/// The tool description shown to the model.
pub fn execute_command_description() -> &'static str {
    "Run shell commands on the MoviePilot host (admin only).\n\
     - action=run: one-shot command; stdin is closed, timeout (s) default 60, max 300; returns \
     exit_code, status and output (long output: head+tail preview, full text in output_file). \
     success is true only for exit code 0.\n\
     - action=start: start a background terminal (PTY by default, use_pty=false for pipes) and \
     get a session_id; waits up to yield_time_ms (default 250) for first output.\n\
     - read / wait / write / interrupt / kill / status with session_id; list shows your terminals.\n\
     Output paging: pass back output_until_seq as since_seq and output_until_offset as \
     since_offset to continue exactly where the last reply ended (max_bytes per page, default \
     10240). output_lost=true means older output was dropped (1 MiB retained per session). \
     wait returns as soon as new output exists, the process finishes, or timeout_ms passes; it \
     never kills. write sends input_text; close_stdin=true sends EOF (pipe sessions only). \
     interrupt sends one SIGINT; kill sends signal_name (default TERM) and SIGKILL after 3 s.\n\
     A running status means pending, not success; judge by exit_code. Destructive commands \
     (rm -rf /, mkfs, raw disk writes, fork bombs, shutdown/reboot) are refused unless \
     confirm_dangerous=true."
}

/// JSON schema of the tool's parameters.
pub fn execute_command_parameters_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": ["start", "read", "wait", "write", "interrupt", "kill", "run", "list", "status"],
                "default": "start",
                "description": "run = one-shot; start = background terminal; others act on session_id."
            },
            "command": {"type": "string", "description": "Shell command (required for start and run)."},
            "session_id": {"type": "string", "description": "term_<12 hex> from start (session actions)."},
            "input_text": {"type": "string", "description": "Text to write (write). Include \\n to press Enter."},
            "close_stdin": {"type": "boolean", "default": false, "description": "write: send EOF after input_text (pipe sessions only)."},
            "signal_name": {"type": ["string", "integer"], "default": "TERM", "description": "kill: TERM, KILL, INT, HUP, QUIT, USR1, USR2, ALRM, ABRT (with or without SIG) or its number."},
            "cwd": {"type": "string", "description": "Working directory; relative to the MoviePilot root; ~ expanded; must exist."},
            "shell": {"type": "string", "description": "Interpreter: sh, bash, zsh, dash, ash, ksh, mksh, fish, csh, tcsh (name or path)."},
            "login": {"type": ["boolean", "null"], "description": "Run as a login shell (-lc)."},
            "env": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean", "null"]}, "description": "Extra environment variables."},
            "use_pty": {"type": "boolean", "default": true, "description": "start: PTY (interactive programs) or pipes (separate stdout/stderr, EOF via close_stdin)."},
            "since_seq": {"type": "integer", "minimum": 0, "description": "Last chunk fully received: pass output_until_seq back."},
            "since_offset": {"type": "integer", "minimum": 0, "description": "Bytes already received of the next chunk: pass output_until_offset back."},
            "max_bytes": {"type": "integer", "default": 10240, "minimum": 1, "maximum": 65536, "description": "Page size in bytes."},
            "timeout_ms": {"type": "integer", "default": 1000, "minimum": 0, "maximum": 60000, "description": "wait: how long to wait for news (0 = poll)."},
            "yield_time_ms": {"type": "integer", "default": 250, "minimum": 0, "maximum": 10000, "description": "start: how long to wait for first output (0 = return at once)."},
            "timeout": {"type": "number", "default": 60, "maximum": 300, "description": "run: timeout in seconds."},
            "confirm_dangerous": {"type": "boolean", "default": false, "description": "Confirm a command the guard refused as destructive."}
        },
        "additionalProperties": false
    })
}

/// What a non-admin caller gets instead of running anything.
pub fn permission_denied_result() -> Value {
    json!({
        "error": "execute_command is available to administrators only",
        "status": "error",
        "success": false,
        "execution_outcome": "failed",
        "code": "permission_denied"
    })
}
