//! What a cell printed: the first bytes (up to the spill cap), a window of the last ones, and
//! how many there were; the preview (40 % head, 60 % tail of the inline cap) and the redacted
//! spill file are made from them.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// One output stream of a cell.
#[derive(Debug, Default)]
pub struct Capture {
    kept: Vec<u8>,
    keep_cap: usize,
    tail: Vec<u8>,
    tail_cap: usize,
    total: u64,
}

impl Capture {
    /// Keeps the first `keep_cap` bytes and the last `tail_cap`.
    pub fn new(keep_cap: usize, tail_cap: usize) -> Self {
        Self {
            keep_cap,
            tail_cap,
            ..Self::default()
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.keep_cap.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&bytes[..room.min(bytes.len())]);
        if self.tail_cap == 0 {
            return;
        }
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail
                .extend_from_slice(&bytes[bytes.len() - self.tail_cap..]);
        } else {
            self.tail.extend_from_slice(bytes);
            if self.tail.len() > 2 * self.tail_cap {
                let cut = self.tail.len() - self.tail_cap;
                self.tail.drain(..cut);
            }
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    pub(crate) fn kept_len(&self) -> usize {
        self.kept.len()
    }

    /// The whole text when it fits `inline`, else 40 % head and 60 % tail with a marker between;
    /// `(text, truncated, bytes shown)`.
    pub fn preview(&self, inline: usize) -> (String, bool, u64) {
        if self.total <= inline as u64 && self.kept.len() as u64 == self.total {
            let text = String::from_utf8_lossy(&self.kept).into_owned();
            return (text, false, self.total);
        }
        let head_len = inline * 2 / 5;
        let tail_len = inline - head_len;
        let head = utf8_prefix(&self.kept[..head_len.min(self.kept.len())]);
        let tail_window = if self.tail.len() > tail_len {
            &self.tail[self.tail.len() - tail_len..]
        } else {
            &self.tail[..]
        };
        let tail = utf8_suffix(tail_window);
        let shown = (head.len() + tail.len()) as u64;
        let omitted = self.total.saturating_sub(shown);
        let text = format!(
            "{}\n\n… [{omitted} bytes omitted / 已省略 {omitted} 字节] …\n\n{}",
            String::from_utf8_lossy(head),
            String::from_utf8_lossy(tail)
        );
        (text, true, shown)
    }

    /// The kept bytes as text (lossy UTF-8).
    pub(crate) fn kept_text(&self) -> String {
        String::from_utf8_lossy(utf8_prefix(&self.kept)).into_owned()
    }
}

/// The longest prefix that does not end inside a UTF-8 sequence.
fn utf8_prefix(b: &[u8]) -> &[u8] {
    match std::str::from_utf8(b) {
        Ok(_) => b,
        Err(e) if e.error_len().is_none() => &b[..e.valid_up_to()],
        Err(_) => b,
    }
}

/// Drops continuation bytes at the start (a sequence cut by the window).
fn utf8_suffix(b: &[u8]) -> &[u8] {
    let skip = b
        .iter()
        .take(3)
        .take_while(|c| (**c & 0b1100_0000) == 0b1000_0000)
        .count();
    &b[skip..]
}

/// Finds `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// How many trailing bytes of `hay` could start `needle` (kept back until more arrives).
pub fn partial_suffix(hay: &[u8], needle: &[u8]) -> usize {
    let max = needle.len().saturating_sub(1).min(hay.len());
    (1..=max)
        .rev()
        .find(|n| hay[hay.len() - n..] == needle[..*n])
        .unwrap_or(0)
}

/// Writes the redacted text to `<dir>/stdout-<sha256>.txt` (0600; the directory 0700) and
/// removes spill files older than `retention` there. Returns the path.
pub(crate) fn spill(dir: &Path, text: &str, retention: Duration) -> std::io::Result<PathBuf> {
    use sha2::{Digest, Sha256};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    sweep(dir, retention);
    let digest = hex::encode(Sha256::digest(text.as_bytes()));
    let path = dir.join(format!("stdout-{digest}.txt"));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(mut f) => {
            f.write_all(text.as_bytes())?;
            f.sync_data()?;
        }
        // The same text was spilled before: same name, same bytes.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    Ok(path)
}

/// Removes `stdout-*.txt` files older than `retention` from `dir`.
pub(crate) fn sweep(dir: &Path, retention: Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    for e in entries.flatten() {
        let name = e.file_name();
        let is_spill = name
            .to_str()
            .is_some_and(|n| n.starts_with("stdout-") && n.ends_with(".txt"));
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age > retention);
        if is_spill && old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
