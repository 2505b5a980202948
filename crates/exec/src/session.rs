//! A managed terminal session: a process group spawned over pipes or a PTY, reader tasks that
//! feed its [`OutputLog`], a monitor that records the exit, serialised input, and signals.
//!
//! Invariant: the status leaves `running` only after the leader was reaped *and* the readers
//! reached EOF (or a 1 s grace passed — a background grandchild may hold the output open), so a
//! caller who sees `exited` has already been offered every byte that was going to arrive.

use crate::error::{ExecError, Result};
use crate::launch::Launch;
use crate::output_log::{CHUNK_BYTES, OutputLog, Stream};
use crate::process::{self, StdioPlan};
use crate::reports::SessionStatus as Status;
use crate::utf8_stream::Utf8Stream;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdin;
use tokio::sync::watch;

/// Grace between a polite signal and SIGKILL.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(3);
/// How long the exit waits for readers to drain before it is published anyway.
const READER_DRAIN_GRACE: Duration = Duration::from_secs(1);
/// A write that makes no progress for this long fails instead of hanging the tool call.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub(crate) struct SessionState {
    pub log: OutputLog,
    pub status: Status,
    pub exit_code: Option<i32>,
    pub stdin_closed: bool,
    pub kill_requested: bool,
    pub open_readers: usize,
    /// A reader ended on an error instead of EOF: some output may never have been captured.
    pub reader_failed: bool,
    pub error: Option<String>,
    pub finished_at: Option<Instant>,
    /// When output last arrived (or the session started): live output keeps its scope active.
    pub last_output: Instant,
}

impl SessionState {
    pub(crate) fn output_complete(&self) -> bool {
        self.open_readers == 0 && !self.reader_failed
    }
}

enum Input {
    Pipe(Option<ChildStdin>),
    Pty,
}

/// Why a write was refused or failed, and how much had been written by then.
#[derive(Debug)]
pub(crate) struct WriteRefusal {
    pub error: ExecError,
    pub written: usize,
}

impl WriteRefusal {
    fn before_writing(error: ExecError) -> Self {
        Self { error, written: 0 }
    }
}

pub(crate) struct Session {
    pub id: String,
    pub owner: u64,
    pub command: String,
    pub cwd: String,
    pub shell: String,
    pub login: bool,
    pub use_pty: bool,
    pub pid: u32,
    state: Mutex<SessionState>,
    changed: watch::Sender<u64>,
    input: tokio::sync::Mutex<Input>,
    pty: Option<Arc<AsyncFd<OwnedFd>>>,
}

impl Session {
    /// Spawns the process and its reader/monitor tasks. Must run inside a tokio runtime.
    pub(crate) fn spawn(
        id: String,
        owner: u64,
        command: String,
        launch: &Launch,
        use_pty: bool,
        max_retained: usize,
    ) -> Result<Arc<Session>> {
        let (mut child, pty) = if use_pty {
            let pair =
                process::open_pty().map_err(|e| crate::ExecError::io("failed to open a PTY", e))?;
            let child = process::spawn(launch, StdioPlan::Pty(&pair.slave))?;
            // Our copy of the slave must go, or the master never sees EOF.
            drop(pair.slave);
            let master = process::register_master(pair.master)
                .map_err(|e| crate::ExecError::io("failed to register the PTY", e))?;
            (child, Some(Arc::new(master)))
        } else {
            (process::spawn(launch, StdioPlan::SessionPipes)?, None)
        };
        let pid = child.id().unwrap_or(0);
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let input = match &pty {
            Some(_) => Input::Pty,
            None => Input::Pipe(child.stdin.take()),
        };
        let readers = if use_pty {
            1
        } else {
            usize::from(stdout.is_some()) + usize::from(stderr.is_some())
        };
        let (changed, _) = watch::channel(0u64);
        let session = Arc::new(Session {
            id,
            owner,
            command,
            cwd: launch.cwd_display(),
            shell: launch.shell_display(),
            login: launch.login,
            use_pty,
            pid,
            state: Mutex::new(SessionState {
                log: OutputLog::new(max_retained),
                status: Status::Running,
                exit_code: None,
                stdin_closed: false,
                kill_requested: false,
                open_readers: readers,
                reader_failed: false,
                error: None,
                finished_at: None,
                last_output: Instant::now(),
            }),
            changed,
            input: tokio::sync::Mutex::new(input),
            pty: pty.clone(),
        });
        if let Some(master) = pty {
            tokio::spawn(read_pty(Arc::clone(&session), master));
        } else {
            if let Some(out) = stdout {
                tokio::spawn(read_pipe(Arc::clone(&session), out, Stream::Stdout));
            }
            if let Some(err) = stderr {
                tokio::spawn(read_pipe(Arc::clone(&session), err, Stream::Stderr));
            }
        }
        let monitor = Arc::clone(&session);
        tokio::spawn(async move {
            let waited = child.wait().await;
            monitor.finish(waited).await;
        });
        Ok(session)
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, SessionState> {
        // A panic while holding this lock cannot leave the log half-written in a way that matters
        // more than losing the session, so recover the guard instead of propagating poison.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Wakes every waiter (new output, exit, or a scope being sealed).
    pub(crate) fn notify(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    pub(crate) fn is_running(&self) -> bool {
        self.state().status == Status::Running
    }

    fn append(&self, stream: Stream, text: &str) {
        if text.is_empty() {
            return;
        }
        {
            let mut st = self.state();
            st.log.append(stream, text);
            st.last_output = Instant::now();
        }
        self.notify();
    }

    fn reader_done(&self, failed: bool) {
        {
            let mut st = self.state();
            st.open_readers = st.open_readers.saturating_sub(1);
            st.reader_failed |= failed;
        }
        self.notify();
    }

    async fn finish(&self, waited: std::io::Result<std::process::ExitStatus>) {
        let mut rx = self.subscribe();
        let deadline = tokio::time::Instant::now() + READER_DRAIN_GRACE;
        while self.state().open_readers > 0 {
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                break;
            }
        }
        {
            let mut st = self.state();
            match waited {
                Ok(status) => {
                    st.exit_code = process::exit_code(status);
                    st.status = if st.kill_requested {
                        Status::Killed
                    } else {
                        Status::Exited
                    };
                }
                Err(err) => {
                    st.status = if st.kill_requested {
                        Status::Killed
                    } else {
                        Status::Error
                    };
                    st.error = Some(format!("could not observe the process exit: {err}"));
                }
            }
            if !self.use_pty {
                st.stdin_closed = true;
            }
            st.finished_at = Some(Instant::now());
        }
        if let Ok(mut input) = self.input.try_lock()
            && let Input::Pipe(stdin) = &mut *input
        {
            stdin.take();
        }
        self.notify();
    }

    /// Writes input. Serialised per session by the input lock; `still_allowed` re-checks access
    /// after the lock was obtained (a suspension point).
    pub(crate) async fn write(
        &self,
        data: &str,
        close_stdin: bool,
        still_allowed: impl Fn() -> bool,
    ) -> std::result::Result<usize, WriteRefusal> {
        if self.use_pty && close_stdin {
            return Err(WriteRefusal::before_writing(
                ExecError::CloseStdinUnsupported,
            ));
        }
        let mut input = self.input.lock().await;
        if !still_allowed() {
            return Err(WriteRefusal::before_writing(ExecError::AccessDenied));
        }
        let (stdin_closed, running) = {
            let st = self.state();
            (st.stdin_closed, st.status == Status::Running)
        };
        if stdin_closed {
            if data.is_empty() && close_stdin {
                return Ok(0);
            }
            return Err(WriteRefusal::before_writing(ExecError::StdinClosed));
        }
        if !running {
            return Err(WriteRefusal::before_writing(ExecError::SessionNotRunning));
        }
        let written = match &mut *input {
            Input::Pty => match &self.pty {
                Some(master) => write_pty(master, data.as_bytes()).await?,
                None => 0,
            },
            Input::Pipe(stdin) => {
                let mut written = 0;
                if !data.is_empty() {
                    let Some(pipe) = stdin.as_mut() else {
                        return Err(WriteRefusal::before_writing(ExecError::StdinClosed));
                    };
                    let result = tokio::time::timeout(WRITE_TIMEOUT, async {
                        pipe.write_all(data.as_bytes()).await?;
                        pipe.flush().await
                    })
                    .await;
                    let failed = match result {
                        Ok(Ok(())) => None,
                        Ok(Err(err)) => Some(format!("writing to stdin failed: {err}")),
                        Err(_) => Some("the process did not read its input within 10 s".into()),
                    };
                    if let Some(message) = failed {
                        return Err(WriteRefusal::before_writing(ExecError::WriteFailed(
                            message,
                        )));
                    }
                    written = data.len();
                }
                if close_stdin {
                    if let Some(mut pipe) = stdin.take() {
                        let _ = pipe.shutdown().await;
                    }
                    self.state().stdin_closed = true;
                }
                written
            }
        };
        self.notify();
        Ok(written)
    }

    /// Sends one SIGINT to the foreground group (PTY) or the session's group; no escalation.
    pub(crate) fn interrupt(&self) -> bool {
        if !self.is_running() {
            return false;
        }
        let target = self
            .pty
            .as_ref()
            .and_then(|m| process::foreground_group(m.get_ref()))
            .unwrap_or(self.pid);
        process::signal_group(target, libc::SIGINT)
    }

    /// Sends `signal` to the group, waits [`KILL_GRACE`], escalates to SIGKILL, waits again, and
    /// finally SIGKILLs stragglers of the group. Returns (signal sent, escalated, converged).
    pub(crate) async fn terminate(&self, signal: libc::c_int) -> (bool, bool, bool) {
        {
            let mut st = self.state();
            if st.status != Status::Running {
                // The leader is gone, but a member that still holds the output open (a
                // background grandchild) belongs to this session and goes with it.
                let leftovers = st.open_readers > 0;
                drop(st);
                let sent = leftovers && process::signal_group(self.pid, libc::SIGKILL);
                return (sent, false, true);
            }
            st.kill_requested = true;
        }
        let sent = process::signal_group(self.pid, signal);
        let mut escalated = false;
        if signal != libc::SIGKILL && !self.wait_for_exit(KILL_GRACE).await {
            escalated = process::signal_group(self.pid, libc::SIGKILL);
        }
        let converged = self.wait_for_exit(KILL_GRACE).await;
        // Group members that outlived the leader (they ignored the signal) go too.
        process::signal_group(self.pid, libc::SIGKILL);
        (sent, escalated, converged)
    }

    async fn wait_for_exit(&self, limit: Duration) -> bool {
        let mut rx = self.subscribe();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if !self.is_running() {
                return true;
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                return !self.is_running();
            }
        }
    }

    /// Best-effort synchronous kill for cancellation paths (drop guards).
    pub(crate) fn kill_now(&self) {
        self.state().kill_requested = true;
        process::signal_group(self.pid, libc::SIGKILL);
    }
}

/// Pipe reads take up to a full pipe buffer per system call; the log still stores chunks of at
/// most [`CHUNK_BYTES`], so paging granularity is unchanged while wake-ups drop 16-fold.
const PIPE_READ_BYTES: usize = 64 * 1024;

async fn read_pipe(session: Arc<Session>, mut pipe: impl AsyncRead + Unpin, stream: Stream) {
    let mut buf = vec![0u8; PIPE_READ_BYTES];
    let mut decoder = Utf8Stream::default();
    let mut text = String::with_capacity(PIPE_READ_BYTES + 4);
    let failed = loop {
        match pipe.read(&mut buf).await {
            Ok(0) => break false,
            Ok(n) => {
                text.clear();
                decoder.decode(&buf[..n], &mut text);
                session.append(stream, &text);
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break true,
        }
    };
    text.clear();
    decoder.finish(&mut text);
    session.append(stream, &text);
    session.reader_done(failed);
}

async fn read_pty(session: Arc<Session>, master: Arc<AsyncFd<OwnedFd>>) {
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut decoder = Utf8Stream::default();
    let mut text = String::with_capacity(CHUNK_BYTES + 4);
    let failed = loop {
        let mut guard = match master.readable().await {
            Ok(guard) => guard,
            Err(_) => break true,
        };
        match guard.try_io(|fd| process::read_fd(fd.get_ref().as_raw_fd(), &mut buf)) {
            Ok(Ok(0)) => break false,
            Ok(Ok(n)) => {
                text.clear();
                decoder.decode(&buf[..n], &mut text);
                session.append(Stream::Pty, &text);
            }
            // Linux reports EIO on the master once every slave descriptor is closed: that is EOF.
            Ok(Err(err)) if err.raw_os_error() == Some(libc::EIO) => break false,
            Ok(Err(err)) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(Err(_)) => break true,
            Err(_would_block) => {}
        }
    };
    text.clear();
    decoder.finish(&mut text);
    session.append(Stream::Pty, &text);
    session.reader_done(failed);
}

async fn write_pty(
    master: &AsyncFd<OwnedFd>,
    data: &[u8],
) -> std::result::Result<usize, WriteRefusal> {
    let mut written = 0;
    let result = tokio::time::timeout(WRITE_TIMEOUT, async {
        while written < data.len() {
            let mut guard = master.writable().await?;
            match guard.try_io(|fd| process::write_fd(fd.get_ref().as_raw_fd(), &data[written..])) {
                Ok(Ok(n)) => written += n,
                Ok(Err(err)) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Ok(Err(err)) => return Err(err),
                Err(_would_block) => {}
            }
        }
        Ok(())
    })
    .await;
    match result {
        Ok(Ok(())) => Ok(written),
        Ok(Err(err)) => Err(WriteRefusal {
            error: ExecError::WriteFailed(format!(
                "writing to the terminal failed after {written} bytes: {err}"
            )),
            written,
        }),
        Err(_) => Err(WriteRefusal {
            error: ExecError::WriteFailed(format!(
                "the terminal did not accept input within 10 s ({written} bytes written)"
            )),
            written,
        }),
    }
}
