//! One-shot `run` (spec runtime.md §5.3): stdin at EOF, a new process group, a deadline with
//! TERM → 3 s → KILL of the whole group, output decoded incrementally into a 32 KiB head/tail
//! preview while the full stream is spilled to a file once it outgrows the preview.

use crate::launch::Launch;
use crate::output_log::{Stream, switch_label};
use crate::process::{self, StdioPlan};
use crate::session::KILL_GRACE;
use crate::utf8_stream::Utf8Stream;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, watch};

const PREVIEW_BYTES: usize = 32 * 1024;
const HALF_PREVIEW: usize = PREVIEW_BYTES / 2;
const READ_BYTES: usize = 4096;
const READER_JOIN_GRACE: Duration = Duration::from_secs(1);
const OMITTED_MARKER: &str = "\n...middle omitted...\n";

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunEnd {
    Exited,
    TimedOut,
    Cancelled,
    Unknown,
}

#[derive(Debug)]
pub(crate) struct RunReport {
    pub end: RunEnd,
    pub exit_code: Option<i32>,
    pub output: String,
    pub output_truncated: bool,
    pub output_file: Option<PathBuf>,
    pub spill_error: Option<String>,
}

/// Kills the group if the run future is dropped mid-flight (the caller was cancelled).
struct GroupGuard {
    pgid: u32,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        process::signal_group(self.pgid, libc::SIGTERM);
        let pgid = self.pgid;
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                tokio::time::sleep(KILL_GRACE).await;
                process::signal_group(pgid, libc::SIGKILL);
            });
        } else {
            process::signal_group(pgid, libc::SIGKILL);
        }
    }
}

pub(crate) async fn run_once(
    launch: &Launch,
    timeout: Duration,
    spill_dir: &Path,
    mut sealed: watch::Receiver<bool>,
) -> crate::Result<RunReport> {
    let mut child = process::spawn(launch, StdioPlan::RunPipes)?;
    let pgid = child.id().unwrap_or(0);
    let mut guard = GroupGuard { pgid, armed: true };
    let (tx, rx) = mpsc::channel::<(Stream, String)>(64);
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(tokio::spawn(read_stream(out, Stream::Stdout, tx.clone())));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(tokio::spawn(read_stream(err, Stream::Stderr, tx.clone())));
    }
    drop(tx);
    let collector = tokio::spawn(collect(rx, spill_dir.to_path_buf()));

    let (end, waited) = tokio::select! {
        waited = child.wait() => (RunEnd::Exited, Some(waited)),
        () = tokio::time::sleep(timeout) => (RunEnd::TimedOut, None),
        () = wait_sealed(&mut sealed) => (RunEnd::Cancelled, None),
    };
    let waited = match waited {
        Some(waited) => waited,
        None => {
            process::signal_group(pgid, libc::SIGTERM);
            match tokio::time::timeout(KILL_GRACE, child.wait()).await {
                Ok(waited) => waited,
                Err(_) => {
                    process::signal_group(pgid, libc::SIGKILL);
                    match tokio::time::timeout(KILL_GRACE, child.wait()).await {
                        Ok(waited) => waited,
                        Err(_) => Err(std::io::Error::other("process did not exit after SIGKILL")),
                    }
                }
            }
        }
    };
    if end != RunEnd::Exited {
        // Grandchildren that ignored TERM must not outlive a timed-out or cancelled run.
        process::signal_group(pgid, libc::SIGKILL);
    }
    guard.armed = false;

    let join_all = async {
        for reader in &mut readers {
            let _ = reader.await;
        }
    };
    if tokio::time::timeout(READER_JOIN_GRACE, join_all)
        .await
        .is_err()
    {
        // A background grandchild still holds the pipes; stop listening to it.
        for reader in &readers {
            reader.abort();
        }
    }
    let capture = collector.await.unwrap_or_default();
    let (exit_code, end) = match waited {
        Ok(status) => (process::exit_code(status), end),
        Err(_) if end == RunEnd::Exited => (None, RunEnd::Unknown),
        Err(_) => (None, end),
    };
    let (output, output_truncated, output_file, spill_error) = capture.finish();
    Ok(RunReport {
        end,
        exit_code,
        output,
        output_truncated,
        output_file,
        spill_error,
    })
}

/// Returns once the scope is sealed (or its record, and with it the sender, is gone).
pub(crate) async fn wait_sealed(sealed: &mut watch::Receiver<bool>) {
    loop {
        if *sealed.borrow_and_update() {
            return;
        }
        if sealed.changed().await.is_err() {
            // The scope record is gone: treat as sealed.
            return;
        }
    }
}

async fn read_stream(
    mut pipe: impl AsyncRead + Unpin,
    stream: Stream,
    tx: mpsc::Sender<(Stream, String)>,
) {
    let mut buf = vec![0u8; READ_BYTES];
    let mut decoder = Utf8Stream::default();
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => {
                let mut text = String::with_capacity(n + 4);
                decoder.decode(&buf[..n], &mut text);
                if !text.is_empty() && tx.send((stream, text)).await.is_err() {
                    return;
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let mut text = String::new();
    decoder.finish(&mut text);
    if !text.is_empty() {
        let _ = tx.send((stream, text)).await;
    }
}

/// Preview + spill file of one run.
#[derive(Default)]
struct Capture {
    /// Everything while it fits the preview; after spilling, the head only.
    head: String,
    tail: String,
    spilled: bool,
    file: Option<std::io::BufWriter<std::fs::File>>,
    path: Option<PathBuf>,
    spill_error: Option<String>,
    current: Stream,
}

async fn collect(mut rx: mpsc::Receiver<(Stream, String)>, spill_dir: PathBuf) -> Capture {
    let mut capture = Capture::default();
    while let Some((stream, text)) = rx.recv().await {
        capture.push(stream, &text, &spill_dir);
    }
    capture
}

impl Capture {
    fn push(&mut self, stream: Stream, text: &str, spill_dir: &Path) {
        // A label marks every switch of stream, in preview and file alike.
        let label = switch_label(self.current, stream);
        self.current = stream;
        for piece in [label, text] {
            if piece.is_empty() {
                continue;
            }
            if !self.spilled {
                if self.head.len() + piece.len() <= PREVIEW_BYTES {
                    self.head.push_str(piece);
                    continue;
                }
                self.start_spill(spill_dir);
            }
            self.write_spill(piece);
            self.tail.push_str(piece);
            if self.tail.len() > 4 * HALF_PREVIEW {
                let cut = self
                    .tail
                    .floor_char_boundary(self.tail.len() - HALF_PREVIEW);
                self.tail.drain(..cut);
            }
        }
    }

    fn start_spill(&mut self, spill_dir: &Path) {
        self.spilled = true;
        let name = format!("moviepilot-command-{}.log", uuid::Uuid::new_v4().simple());
        let path = spill_dir.join(name);
        let created = {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(spill_dir)
        };
        let opened = created.and_then(|()| {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
        });
        match opened {
            Ok(file) => {
                self.file = Some(std::io::BufWriter::with_capacity(64 * 1024, file));
                self.path = Some(path);
            }
            Err(err) => self.spill_error = Some(format!("could not create the output file: {err}")),
        }
        let everything = std::mem::take(&mut self.head);
        self.write_spill(&everything);
        let cut = everything.floor_char_boundary(HALF_PREVIEW);
        self.head = everything[..cut].to_string();
        self.tail = everything[cut..].to_string();
    }

    // Small buffered writes to a local file; doing them inline keeps ordering trivial and costs
    // less than handing every 4 KiB piece to the blocking pool.
    fn write_spill(&mut self, piece: &str) {
        if let Some(file) = &mut self.file
            && let Err(err) = file.write_all(piece.as_bytes())
        {
            self.spill_error = Some(format!("writing the output file failed: {err}"));
            self.file = None;
        }
    }

    fn finish(mut self) -> (String, bool, Option<PathBuf>, Option<String>) {
        if let Some(mut file) = self.file.take()
            && let Err(err) = file.flush()
        {
            self.spill_error = Some(format!("writing the output file failed: {err}"));
        }
        if !self.spilled {
            return (self.head, false, None, None);
        }
        let start_at = self
            .tail
            .ceil_char_boundary(self.tail.len().saturating_sub(HALF_PREVIEW));
        let mut output = self.head;
        output.push_str(OMITTED_MARKER);
        output.push_str(&self.tail[start_at..]);
        let path = if self.spill_error.is_some() {
            None
        } else {
            self.path
        };
        (output, true, path, self.spill_error)
    }
}
