//! Tool RPC from a kernel back into the host: a Unix socket (0600) in a private directory
//! (0700), one per kernel; newline-delimited JSON requests `{tool, args, token}` answered
//! `{ok, result | error}`, one at a time. A request is accepted only with the kernel's token
//! (compared in constant time) while a cell window is open, for the cell's helpers, within the
//! cell's call budget; the window's [`RpcHandler`] runs it. Calls that did not succeed come
//! back to Python as `{success: false, error, message}` and are recorded as the cell's tool
//! errors; refusals of the channel itself (no cell, bad token) raise in Python.

use crate::error::{KernelError, Result};
use crate::report::{ToolCallRecord, ToolError};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

/// The largest request line accepted (arguments of one helper call).
const MAX_REQUEST_BYTES: u64 = 1024 * 1024;
/// A connection without a request for this long is closed.
const IDLE_CONNECTION: Duration = Duration::from_secs(300);
/// Tool errors listed per cell.
const MAX_TOOL_ERRORS: usize = 5;

/// What one helper call produced, as the host's call path classified it.
#[derive(Debug, Clone)]
pub struct RpcOutcome {
    /// `succeeded`, `failed`, `pending` or `unknown`.
    pub outcome: String,
    /// The tool's whole result text (before any cap for the model).
    pub text: String,
    /// The result's stable error code, when it has one.
    pub error: Option<String>,
}

impl RpcOutcome {
    pub fn succeeded(&self) -> bool {
        self.outcome == "succeeded"
    }
}

/// How a helper call reaches the host (core re-checks the caller and runs the tool through its
/// one call path).
#[async_trait]
pub trait RpcHandler: Send + Sync + 'static {
    async fn call(&self, tool: &str, args: Value) -> RpcOutcome;
}

/// A cell's authority over the kernel's RPC: open while the cell runs.
pub(crate) struct CellWindow {
    handler: Arc<dyn RpcHandler>,
    helpers: Vec<String>,
    max_calls: usize,
    max_result_bytes: usize,
    calls: Mutex<CellCalls>,
    cancel: CancellationToken,
}

#[derive(Default)]
pub(crate) struct CellCalls {
    pub made: usize,
    pub records: Vec<ToolCallRecord>,
    pub errors: Vec<ToolError>,
}

impl CellWindow {
    pub(crate) fn new(
        handler: Arc<dyn RpcHandler>,
        helpers: Vec<String>,
        max_calls: usize,
        max_result_bytes: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            handler,
            helpers,
            max_calls,
            max_result_bytes,
            calls: Mutex::new(CellCalls::default()),
            cancel: CancellationToken::new(),
        })
    }

    pub(crate) fn take_calls(&self) -> CellCalls {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn record(&self, record: ToolCallRecord, error: Option<ToolError>) {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.records.push(record);
        if let Some(e) = error
            && calls.errors.len() < MAX_TOOL_ERRORS
        {
            calls.errors.push(e);
        }
    }

    /// Counts a call against the budget; false when it is spent.
    fn admit(&self) -> bool {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if calls.made >= self.max_calls {
            return false;
        }
        calls.made += 1;
        true
    }
}

type WindowSlot = Arc<Mutex<Option<Arc<CellWindow>>>>;

/// One kernel's RPC endpoint.
pub(crate) struct RpcServer {
    dir: PathBuf,
    pub(crate) socket: PathBuf,
    pub(crate) token: String,
    window: WindowSlot,
    task: tokio::task::JoinHandle<()>,
}

impl RpcServer {
    pub(crate) fn bind(root: &std::path::Path) -> Result<Self> {
        let dir = root.join(format!("mp-code-{}", uuid::Uuid::new_v4().simple()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| KernelError::io("creating the RPC directory", e))?;
        let socket = dir.join("rpc.sock");
        let listener = UnixListener::bind(&socket).map_err(|e| {
            let _ = std::fs::remove_dir_all(&dir);
            KernelError::io("binding the RPC socket", e)
        })?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| KernelError::io("securing the RPC socket", e))?;
        let token = hex::encode(rand::random::<[u8; 32]>());
        let window: WindowSlot = Arc::new(Mutex::new(None));
        let serial = Arc::new(tokio::sync::Mutex::new(()));
        let shared = Arc::new(Shared {
            token: token.clone(),
            window: Arc::clone(&window),
            serial,
        });
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&shared)));
            }
        });
        Ok(Self {
            dir,
            socket,
            token,
            window,
            task,
        })
    }

    pub(crate) fn open(&self, window: Arc<CellWindow>) {
        *self.window.lock().unwrap_or_else(PoisonError::into_inner) = Some(window);
    }

    /// Retires the window: later calls are refused, calls in flight are cancelled.
    pub(crate) fn close(&self) {
        if let Some(w) = self
            .window
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            w.cancel.cancel();
        }
    }
}

impl Drop for RpcServer {
    fn drop(&mut self) {
        self.close();
        self.task.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

struct Shared {
    token: String,
    window: WindowSlot,
    serial: Arc<tokio::sync::Mutex<()>>,
}

/// Equal lengths and bytes, in time independent of where they differ.
pub fn same_token(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

async fn serve(stream: UnixStream, shared: Arc<Shared>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut limited = (&mut reader).take(MAX_REQUEST_BYTES + 1);
        let read = limited.read_until(b'\n', &mut line);
        let n = match tokio::time::timeout(IDLE_CONNECTION, read).await {
            Ok(Ok(n)) => n,
            _ => return,
        };
        if n == 0 {
            return;
        }
        let (reply, keep) = if line.len() as u64 > MAX_REQUEST_BYTES {
            (
                refusal("request_too_large", "the request is over 1 MiB"),
                false,
            )
        } else {
            let _serial = shared.serial.lock().await;
            answer(&line, &shared).await
        };
        let mut bytes = reply.to_string().into_bytes();
        bytes.push(b'\n');
        if write.write_all(&bytes).await.is_err() || !keep {
            return;
        }
    }
}

fn refusal(code: &str, message: &str) -> Value {
    json!({"ok": false, "error": format!("{code}: {message}")})
}

/// The reply to one request line, and whether the connection stays open.
async fn answer(line: &[u8], shared: &Shared) -> (Value, bool) {
    let Ok(req) = serde_json::from_slice::<Value>(line) else {
        return (refusal("malformed_request", "not a JSON object"), false);
    };
    let token = req.get("token").and_then(Value::as_str).unwrap_or_default();
    if !same_token(token.as_bytes(), shared.token.as_bytes()) {
        tracing::warn!("kernel RPC refused: wrong token");
        return (
            refusal("unauthorized", "the token does not belong to this kernel"),
            false,
        );
    }
    let window = shared
        .window
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let Some(window) = window.filter(|w| !w.cancel.is_cancelled()) else {
        return (
            refusal(
                "no_cell_running",
                "tool calls are accepted only while a cell of this kernel runs",
            ),
            true,
        );
    };
    let tool = req
        .get("tool")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let args = req.get("args").cloned().unwrap_or_else(|| json!({}));
    let started = Instant::now();
    let preview = args_preview(&args);
    let refuse = |code: &str, message: String| {
        window.record(
            ToolCallRecord {
                tool: tool.clone(),
                args_preview: preview.clone(),
                duration_ms: 0,
                outcome: "refused".into(),
            },
            Some(ToolError {
                tool: tool.clone(),
                error: format!("{code}: {message}"),
            }),
        );
        json!({"ok": true, "result": {"success": false, "error": code, "message": message}})
    };
    if !window.helpers.contains(&tool) {
        let message = format!(
            "{tool:?} is not a helper of this cell (enabled: {})",
            window.helpers.join(", ")
        );
        return (refuse("helper_unavailable", message), true);
    }
    if !window.admit() {
        let message = format!(
            "this cell already made {} tool calls, the limit; aggregate what you have or page \
             less often in the next cell",
            window.max_calls
        );
        return (refuse("tool_call_budget_exhausted", message), true);
    }
    let out = tokio::select! {
        out = window.handler.call(&tool, args) => out,
        () = window.cancel.cancelled() => {
            return (refusal("cell_ended", "the cell ended while the call ran"), false);
        }
    };
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut record = ToolCallRecord {
        tool: tool.clone(),
        args_preview: preview,
        duration_ms,
        outcome: out.outcome.clone(),
    };
    if out.text.len() > window.max_result_bytes {
        record.outcome = "refused".into();
        let message = format!(
            "the result is {} bytes, over the {} byte limit for one call; use paging or filters",
            out.text.len(),
            window.max_result_bytes
        );
        window.record(
            record,
            Some(ToolError {
                tool: tool.clone(),
                error: format!("result_too_large: {message}"),
            }),
        );
        return (
            json!({"ok": true, "result": {"success": false, "error": "result_too_large",
                "message": message}}),
            true,
        );
    }
    let parsed: Value =
        serde_json::from_str(&out.text).unwrap_or_else(|_| Value::String(out.text.clone()));
    if out.succeeded() {
        window.record(record, None);
        return (json!({"ok": true, "result": parsed}), true);
    }
    let code = out
        .error
        .clone()
        .or_else(|| {
            parsed
                .get("error")
                .and_then(Value::as_str)
                .map(String::from)
        })
        .unwrap_or_else(|| out.outcome.clone());
    let message = parsed
        .get("message")
        .and_then(Value::as_str)
        .map(String::from)
        .unwrap_or_else(|| clip(&out.text, 300));
    window.record(
        record,
        Some(ToolError {
            tool: tool.clone(),
            error: format!("{code}: {}", clip(&message, 300)),
        }),
    );
    let mut result = json!({"success": false, "error": code, "message": message,
        "execution_outcome": out.outcome});
    if let (Some(obj), Some(full)) = (result.as_object_mut(), parsed.as_object()) {
        for (k, v) in full {
            obj.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    (json!({"ok": true, "result": result}), true)
}

fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

fn args_preview(args: &Value) -> String {
    clip(&args.to_string(), 79)
}
