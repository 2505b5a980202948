//! One kernel: its private directory, its process, its RPC endpoint, and running one cell —
//! the cell request written on the protocol pipe, output read until the result frame.

use crate::KernelConfig;
use crate::capture::{Capture, find, partial_suffix};
use crate::error::{KernelError, Result};
use crate::helpers::{Helper, module_source};
use crate::process::{self, KernelProcess, SpawnPlan};
use crate::rpc::{CellWindow, RpcServer};
use serde_json::{Value, json};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio_util::sync::CancellationToken;

const KERNEL_LOOP: &str = include_str!("assets/kernel.py");
/// The length header of a result frame never needs more digits.
const MAX_HEADER: usize = 20;
/// Result frames are at most this long.
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// How a cell ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ending {
    /// The cell finished; the kernel lives on. `error` when it raised.
    Finished {
        error: Option<String>,
    },
    /// `sys.exit(code)` ended the kernel.
    Exited(i32),
    /// The kernel process ended or its pipes broke.
    Died(String),
    Timeout,
    Cancelled,
}

impl Ending {
    pub(crate) fn kernel_survives(&self) -> bool {
        matches!(self, Ending::Finished { .. })
    }
}

pub(crate) struct CellRun {
    pub ending: Ending,
    pub stdout: Capture,
    pub stderr: Capture,
}

pub(crate) struct Kernel {
    process: KernelProcess,
    stdin: ChildStdin,
    stdout: ChildStdout,
    stderr: ChildStderr,
    rpc: RpcServer,
    dir: PathBuf,
    sentinel: String,
    pub(crate) execution_count: u64,
    /// Output read after the last frame (a thread printing between cells): the next cell's.
    stdout_carry: Vec<u8>,
    stderr_carry: Vec<u8>,
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())
}

impl Kernel {
    /// Starts a kernel in a fresh private directory under `user_dir`.
    pub(crate) fn start(
        cfg: &KernelConfig,
        user_dir: &Path,
        spill_dir: &Path,
        helpers: &[Helper],
    ) -> Result<Kernel> {
        let dir = user_dir.join(format!("kernel-{}", uuid::Uuid::new_v4().simple()));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| KernelError::io("creating the kernel directory", e))?;
        let started = (|| {
            write_private(&dir.join("kernel.py"), KERNEL_LOOP)?;
            write_private(&dir.join("moviepilot_tools.py"), &module_source(helpers))
        })()
        .map_err(|e| KernelError::io("writing the kernel files", e));
        if let Err(e) = started {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        let rpc = match RpcServer::bind(&cfg.socket_root) {
            Ok(rpc) => rpc,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let sentinel = format!("MPK-{}", hex::encode(rand::random::<[u8; 16]>()));
        let script = dir.join("kernel.py");
        let plan = SpawnPlan {
            cfg,
            script: &script,
            env: vec![
                ("MOVIEPILOT_RPC_SOCKET", rpc.socket.display().to_string()),
                ("MOVIEPILOT_RPC_TOKEN", rpc.token.clone()),
                ("MOVIEPILOT_KERNEL_SENTINEL", sentinel.clone()),
                (
                    "MOVIEPILOT_KERNEL_SPILL_DIR",
                    spill_dir.display().to_string(),
                ),
            ],
        };
        let mut process = match process::spawn(plan) {
            Ok(p) => p,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let (Some(stdin), Some(stdout), Some(stderr)) = (
            process.child.stdin.take(),
            process.child.stdout.take(),
            process.child.stderr.take(),
        ) else {
            process::kill_group(process.pgid);
            let _ = std::fs::remove_dir_all(&dir);
            return Err(KernelError::io(
                "connecting to the kernel",
                std::io::Error::other("missing pipe"),
            ));
        };
        Ok(Kernel {
            process,
            stdin,
            stdout,
            stderr,
            rpc,
            dir,
            sentinel,
            execution_count: 0,
            stdout_carry: Vec::new(),
            stderr_carry: Vec::new(),
        })
    }

    pub(crate) fn pgid(&self) -> u32 {
        self.process.pgid
    }

    /// Runs one cell with `window` open for its tool calls.
    pub(crate) async fn run_cell(
        &mut self,
        cfg: &KernelConfig,
        code: &str,
        window: Arc<CellWindow>,
        cancel: &CancellationToken,
    ) -> CellRun {
        self.execution_count += 1;
        let mut stdout = Capture::new(
            cfg.spill_max_bytes.max(cfg.stdout_inline_bytes),
            cfg.stdout_inline_bytes,
        );
        let mut stderr = Capture::new(cfg.stderr_inline_bytes, cfg.stderr_inline_bytes);
        self.rpc.open(window);
        let ending = self
            .exchange(code, cfg.cell_timeout, cancel, &mut stdout, &mut stderr)
            .await;
        self.rpc.close();
        CellRun {
            ending,
            stdout,
            stderr,
        }
    }

    async fn exchange(
        &mut self,
        code: &str,
        timeout: Duration,
        cancel: &CancellationToken,
        stdout: &mut Capture,
        stderr: &mut Capture,
    ) -> Ending {
        let body = json!({ "code": code }).to_string();
        let request = format!("{}\n{body}", body.len());
        if let Err(e) = self.stdin.write_all(request.as_bytes()).await {
            return Ending::Died(format!("the kernel did not take the cell ({e})"));
        }
        let _ = self.stdin.flush().await;
        let out_marker = format!("\n{} ", self.sentinel).into_bytes();
        let err_marker = format!("\n{}\n", self.sentinel).into_bytes();
        let mut out = FrameReader::new(out_marker, std::mem::take(&mut self.stdout_carry));
        let mut err = MarkerReader::new(err_marker, std::mem::take(&mut self.stderr_carry));
        // Output written between cells belongs to this one.
        let mut frame = out.feed(&[], stdout);
        let mut err_done = err.feed(&[], stderr);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut obuf = vec![0u8; 64 * 1024];
        let mut ebuf = vec![0u8; 16 * 1024];
        while frame.is_none() || !err_done {
            tokio::select! {
                r = self.stdout.read(&mut obuf), if frame.is_none() => match r {
                    Ok(n) if n > 0 => frame = out.feed(&obuf[..n], stdout),
                    _ => {
                        stdout.push(&out.flush());
                        return Ending::Died("the kernel process ended".into());
                    }
                },
                r = self.stderr.read(&mut ebuf), if !err_done => match r {
                    Ok(n) if n > 0 => err_done = err.feed(&ebuf[..n], stderr),
                    _ => {
                        stderr.push(&err.flush());
                        err_done = true;
                    }
                },
                () = &mut deadline => return Ending::Timeout,
                () = cancel.cancelled() => return Ending::Cancelled,
            }
        }
        self.stdout_carry = out.rest;
        self.stderr_carry = err.rest;
        match frame {
            Some(Ok(v)) => match v.get("status").and_then(Value::as_str) {
                Some("exit") => Ending::Exited(
                    v.get("exit_code")
                        .and_then(Value::as_i64)
                        .and_then(|c| i32::try_from(c).ok())
                        .unwrap_or(1),
                ),
                Some("error") => Ending::Finished {
                    error: Some(
                        v.get("error")
                            .and_then(Value::as_str)
                            .unwrap_or("the cell raised an exception")
                            .to_string(),
                    ),
                },
                _ => Ending::Finished { error: None },
            },
            _ => Ending::Died("the kernel sent a malformed result frame".into()),
        }
    }

    /// Kills the kernel's process group, reaps it and removes its directory.
    pub(crate) async fn kill(mut self) {
        process::kill_group(self.process.pgid);
        let _ = tokio::time::timeout(Duration::from_secs(10), self.process.child.wait()).await;
        drop(self.rpc);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads stdout: raw output until `\n<sentinel> `, then `<length>\n`, then the frame.
struct FrameReader {
    marker: Vec<u8>,
    pending: Vec<u8>,
    state: FrameState,
    rest: Vec<u8>,
}

enum FrameState {
    Output,
    Header,
    Body(usize),
}

type Frame = std::result::Result<Value, ()>;

impl FrameReader {
    fn new(marker: Vec<u8>, carry: Vec<u8>) -> Self {
        Self {
            marker,
            pending: carry,
            state: FrameState::Output,
            rest: Vec::new(),
        }
    }

    fn feed(&mut self, chunk: &[u8], out: &mut Capture) -> Option<Frame> {
        self.pending.extend_from_slice(chunk);
        loop {
            match self.state {
                FrameState::Output => {
                    if let Some(i) = find(&self.pending, &self.marker) {
                        out.push(&self.pending[..i]);
                        self.pending.drain(..i + self.marker.len());
                        self.state = FrameState::Header;
                        continue;
                    }
                    let keep = partial_suffix(&self.pending, &self.marker);
                    let emit = self.pending.len() - keep;
                    out.push(&self.pending[..emit]);
                    self.pending.drain(..emit);
                    return None;
                }
                FrameState::Header => {
                    let Some(nl) = self.pending.iter().position(|b| *b == b'\n') else {
                        return (self.pending.len() > MAX_HEADER).then_some(Err(()));
                    };
                    let len = std::str::from_utf8(&self.pending[..nl])
                        .ok()
                        .and_then(|s| s.parse::<usize>().ok())
                        .filter(|n| *n <= MAX_FRAME);
                    let Some(len) = len else { return Some(Err(())) };
                    self.pending.drain(..=nl);
                    self.state = FrameState::Body(len);
                }
                FrameState::Body(len) => {
                    if self.pending.len() < len {
                        return None;
                    }
                    let frame = serde_json::from_slice(&self.pending[..len]).map_err(|_| ());
                    self.rest = self.pending.split_off(len);
                    return Some(frame);
                }
            }
        }
    }

    /// What is held back when the stream ends.
    fn flush(&mut self) -> Vec<u8> {
        match self.state {
            FrameState::Output => std::mem::take(&mut self.pending),
            _ => Vec::new(),
        }
    }
}

/// Reads stderr: raw output until `\n<sentinel>\n`.
struct MarkerReader {
    marker: Vec<u8>,
    pending: Vec<u8>,
    rest: Vec<u8>,
}

impl MarkerReader {
    fn new(marker: Vec<u8>, carry: Vec<u8>) -> Self {
        Self {
            marker,
            pending: carry,
            rest: Vec::new(),
        }
    }

    fn feed(&mut self, chunk: &[u8], out: &mut Capture) -> bool {
        self.pending.extend_from_slice(chunk);
        if let Some(i) = find(&self.pending, &self.marker) {
            out.push(&self.pending[..i]);
            self.rest = self.pending.split_off(i + self.marker.len());
            self.pending.clear();
            return true;
        }
        let keep = partial_suffix(&self.pending, &self.marker);
        let emit = self.pending.len() - keep;
        out.push(&self.pending[..emit]);
        self.pending.drain(..emit);
        false
    }

    fn flush(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }
}
