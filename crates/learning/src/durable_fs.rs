//! Durable, contained file operations shared by the learning stores (memory and skills).
//!
//! Memory and skills need the same atomicity and containment rules. It returns `std::io` errors;
//! the stores wrap them in [`crate::Error`] with the file they concern.
//!
//! Invariants:
//! - directories are created 0700 and files 0600;
//! - a write is temp file (same directory) → fsync → rename → fsync(dir), so a reader or a
//!   process killed at any point sees either the old or the new complete file;
//! - relative paths coming from tool arguments never contain `..`, absolute parts,
//!   backslashes or NULs, and no component under the root may be a symlink.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a writer waits for the per-root mutation lock before reporting "busy".
pub const LOCK_WAIT: Duration = Duration::from_secs(5);
const LOCK_RETRY: Duration = Duration::from_millis(50);

/// Create `dir` (and parents) with mode 0700.
pub fn ensure_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Atomically replace `path` with `bytes` (temp + fsync + rename + directory fsync).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))?;
    ensure_dir(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// fsync a directory so a rename inside it survives a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Read a UTF-8 file; `Ok(None)` only when it does not exist. A read failure is never
/// reported as an empty file (it would be overwritten by the next write).
pub fn read_optional(path: &Path) -> io::Result<Option<String>> {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "file is not valid UTF-8")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Exclusive advisory lock on `<root>/.mutation.lock`, released on drop.
///
/// `flock` locks belong to the open file description, so two threads of one process that each
/// open the lock file exclude each other exactly like two processes do.
#[derive(Debug)]
pub struct MutationLock {
    _file: File,
}

impl MutationLock {
    /// Try for up to [`LOCK_WAIT`]; `ErrorKind::WouldBlock` means another writer holds it.
    pub fn acquire(root: &Path) -> io::Result<Self> {
        ensure_dir(root)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(root.join(".mutation.lock"))?;
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            // SAFETY: `file` owns a valid open descriptor for the duration of the call;
            // flock has no memory-safety preconditions beyond a valid fd.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(Self { _file: file });
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::WouldBlock {
                return Err(err);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "another write is in progress",
                ));
            }
            std::thread::sleep(LOCK_RETRY);
        }
    }
}

/// Why a relative path from a tool argument was refused.
pub fn check_relative(rel: &str) -> Result<Vec<String>, String> {
    if rel.is_empty() {
        return Err("path is empty".into());
    }
    if rel.contains('\\') || rel.contains('\0') {
        return Err("path may not contain backslashes or NUL".into());
    }
    let p = Path::new(rel);
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => return Err("path may not contain '..'".into()),
            Component::RootDir | Component::Prefix(_) => {
                return Err("path must be relative".into());
            }
        }
    }
    if parts.is_empty() {
        return Err("path names no file".into());
    }
    Ok(parts)
}

/// Join `parts` under `root`, refusing when any existing component (root excluded) is a
/// symlink, so a link planted inside a store can never redirect a read or a write.
pub fn contained_join(root: &Path, parts: &[String]) -> Result<PathBuf, String> {
    let mut path = root.to_path_buf();
    for part in parts {
        path.push(part);
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err("path goes through a symbolic link".into());
            }
            _ => {}
        }
    }
    Ok(path)
}
