//! The result of one cell, in the shape of spec runtime.md §10.5.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    Success,
    Error,
    Timeout,
}

/// The kernel after the cell: alive (its variables are there for the next cell), or gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum KernelState {
    Live {
        mode: &'static str,
        /// The kernel existed before this cell (its variables were there).
        reused: bool,
        /// This cell started without the variables of earlier cells: `reset=true`, or the
        /// previous kernel ended (see `warning`).
        state_reset: bool,
        execution_count: u64,
        ended: bool,
    },
    Lost {
        mode: &'static str,
        ended: bool,
        state_lost: bool,
    },
}

impl KernelState {
    pub(crate) fn lost() -> Self {
        KernelState::Lost {
            mode: "session",
            ended: true,
            state_lost: true,
        }
    }

    pub fn is_lost(&self) -> bool {
        matches!(self, KernelState::Lost { .. })
    }
}

/// One helper call the cell made (admitted or refused by the budget).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolCallRecord {
    pub tool: String,
    /// The arguments, at most 80 characters.
    pub args_preview: String,
    pub duration_ms: u64,
    /// `succeeded`, `failed`, `pending`, `unknown`, or `refused`.
    pub outcome: String,
}

/// A helper call that did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolError {
    pub tool: String,
    pub error: String,
}

/// What one cell did.
#[derive(Debug, Clone, Serialize)]
pub struct CellReport {
    pub status: CellStatus,
    /// The stdout preview, with a `[stderr]` section appended when there was any.
    pub output: String,
    /// 0, 1 for an error, -1 when the kernel ended.
    pub exit_code: i32,
    pub duration_seconds: f64,
    pub kernel: KernelState,
    pub stdout_truncated: bool,
    /// Bytes the cell wrote to stdout.
    pub stdout_bytes_total: u64,
    /// Bytes of it the host kept (what the spill file was made from).
    pub stdout_bytes_captured: u64,
    /// Bytes of it not shown in `output`.
    pub stdout_bytes_omitted: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_spill_path: Option<String>,
    /// The spill file holds only the first `spill_max_bytes` of the output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_spill_capped: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    pub stderr: String,
    pub stderr_truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Bytes read from the kernel's stdout pipe for this cell (the same count as
    /// `stdout_bytes_total`: the host sees every byte, framing excluded).
    pub stdout_source_bytes_total: u64,
    /// Not everything the cell printed is kept (beyond the spill cap, or the kernel ended
    /// mid-write).
    pub stdout_capture_incomplete: bool,
    pub tool_calls_made: usize,
    pub tool_calls: Vec<ToolCallRecord>,
    /// `status` is success and no helper call failed.
    pub success: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_errors: Vec<ToolError>,
}
