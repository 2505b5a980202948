//! A session's output: an append-only log of immutable text chunks numbered from 1, with a
//! bounded retained window and cursor-based paging (spec runtime.md §5.4).
//!
//! Invariants:
//! - `seq` values only grow; a cursor `(since_seq, since_offset)` handed out once stays
//!   meaningful forever — it never resets. What fell out of the retained window is reported as
//!   `lost`, never silently skipped.
//! - Offsets are UTF-8 byte offsets inside chunk `since_seq + 1` and always fall on character
//!   boundaries of text we produced.
//! - Retained text never exceeds `max_retained` bytes, except that the newest chunk is always kept.

use std::collections::VecDeque;

/// Largest chunk the log stores (bytes of text, stream label included).
pub const CHUNK_BYTES: usize = 4096;
/// Label inserted when pipe output switches to stdout.
const STDOUT_LABEL: &str = "\n[标准输出]\n";
/// Label inserted when pipe output switches to stderr.
const STDERR_LABEL: &str = "\n[错误输出]\n";

/// Which stream a piece of output came from. Pipe output starts as stdout, so a first stdout
/// piece carries no label.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Stream {
    #[default]
    Stdout,
    Stderr,
    Pty,
}

/// The label that marks pipe output switching from `from` to `to` (`""` when it does not
/// switch). Sessions and one-shot runs label their output alike.
pub(crate) fn switch_label(from: Stream, to: Stream) -> &'static str {
    match (from, to) {
        (Stream::Stdout, Stream::Stderr) => STDERR_LABEL,
        (Stream::Stderr, Stream::Stdout) => STDOUT_LABEL,
        _ => "",
    }
}

#[derive(Debug)]
struct Chunk {
    seq: u64,
    text: String,
}

/// Where a reader stands: `seq` = last chunk fully delivered; `offset` = bytes of chunk `seq + 1`
/// already delivered. `partial == false` is whole-chunk mode (offset always 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub seq: u64,
    pub offset: usize,
    pub partial: bool,
}

/// One page of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub text: String,
    pub until_seq: u64,
    pub until_offset: usize,
    /// Output exists beyond this page.
    pub more: bool,
    /// The cursor was behind the retained window; reading resumed at its start.
    pub lost: bool,
}

/// Why a page could not be produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageError {
    InvalidCursor(String),
    LimitTooSmall { minimum: usize },
}

/// The log itself.
#[derive(Debug)]
pub struct OutputLog {
    chunks: VecDeque<Chunk>,
    last_seq: u64,
    retained_bytes: usize,
    max_retained: usize,
    current_stream: Stream,
    total_bytes: u64,
}

impl OutputLog {
    pub fn new(max_retained: usize) -> Self {
        Self {
            chunks: VecDeque::new(),
            last_seq: 0,
            retained_bytes: 0,
            max_retained,
            current_stream: Stream::default(),
            total_bytes: 0,
        }
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// First chunk still retained (`last_seq + 1` when nothing is retained).
    pub fn retained_from_seq(&self) -> u64 {
        self.chunks
            .front()
            .map_or(self.last_seq + 1, |chunk| chunk.seq)
    }

    /// Bytes ever appended (labels included).
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Bytes of text retained now.
    pub fn retained_bytes(&self) -> usize {
        self.retained_bytes
    }

    /// Appends decoded text, splitting it into chunks of at most [`CHUNK_BYTES`] and prefixing a
    /// stream label whenever pipe output switches streams (the label counts in offsets).
    pub fn append(&mut self, stream: Stream, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut label = switch_label(self.current_stream, stream);
        self.current_stream = stream;
        let mut rest = text;
        while !rest.is_empty() {
            let room = CHUNK_BYTES - label.len();
            let cut = rest.floor_char_boundary(room);
            // A single character never exceeds 4 bytes, so `cut` is 0 only if room < 4.
            let cut = if cut == 0 {
                rest.chars().next().map_or(rest.len(), char::len_utf8)
            } else {
                cut
            };
            let (head, tail) = rest.split_at(cut);
            let mut chunk_text = String::with_capacity(label.len() + head.len());
            chunk_text.push_str(label);
            chunk_text.push_str(head);
            self.push_chunk(chunk_text);
            label = "";
            rest = tail;
        }
    }

    fn push_chunk(&mut self, text: String) {
        self.last_seq += 1;
        self.retained_bytes += text.len();
        self.total_bytes += text.len() as u64;
        self.chunks.push_back(Chunk {
            seq: self.last_seq,
            text,
        });
        while self.retained_bytes > self.max_retained && self.chunks.len() > 1 {
            if let Some(old) = self.chunks.pop_front() {
                self.retained_bytes -= old.text.len();
            }
        }
    }

    fn chunk(&self, seq: u64) -> Option<&Chunk> {
        let first = self.chunks.front()?.seq;
        if seq < first {
            return None;
        }
        let index = usize::try_from(seq - first).ok()?;
        self.chunks.get(index)
    }

    /// Whether a reader at `cursor` has anything left to read (or has lost some).
    pub(crate) fn has_unread(&self, cursor: Cursor) -> bool {
        cursor.seq < self.last_seq
    }

    /// Produces the page after `cursor`, holding at most `max_bytes` bytes of text.
    pub fn page(&self, cursor: Cursor, max_bytes: usize) -> Result<Page, PageError> {
        let max_bytes = max_bytes.max(1);
        let mut seq = cursor.seq;
        let mut offset = if cursor.partial { cursor.offset } else { 0 };
        if seq > self.last_seq {
            return Err(PageError::InvalidCursor(format!(
                "since_seq {seq} is beyond the last chunk {}",
                self.last_seq
            )));
        }
        if offset > 0 && seq == self.last_seq {
            return Err(PageError::InvalidCursor(format!(
                "since_offset {offset} points into chunk {} which does not exist yet",
                seq + 1
            )));
        }
        let mut lost = false;
        if seq < self.last_seq && seq + 1 < self.retained_from_seq() {
            lost = true;
            seq = self.retained_from_seq() - 1;
            offset = 0;
        }
        if offset > 0 {
            let Some(chunk) = self.chunk(seq + 1) else {
                return Err(PageError::InvalidCursor(format!(
                    "chunk {} is not retained",
                    seq + 1
                )));
            };
            if offset > chunk.text.len() || !chunk.text.is_char_boundary(offset) {
                return Err(PageError::InvalidCursor(format!(
                    "since_offset {offset} is not a character boundary inside chunk {} ({} bytes)",
                    seq + 1,
                    chunk.text.len()
                )));
            }
            if offset == chunk.text.len() {
                seq += 1;
                offset = 0;
            }
        }

        let mut text = String::new();
        let mut remaining = max_bytes;
        while seq < self.last_seq {
            let Some(chunk) = self.chunk(seq + 1) else {
                break;
            };
            let rest = &chunk.text[offset..];
            if rest.len() <= remaining {
                text.push_str(rest);
                remaining -= rest.len();
                seq += 1;
                offset = 0;
                continue;
            }
            if cursor.partial {
                let cut = rest.floor_char_boundary(remaining);
                if cut == 0 {
                    if text.is_empty() {
                        let minimum = rest.chars().next().map_or(1, char::len_utf8);
                        return Err(PageError::LimitTooSmall { minimum });
                    }
                    break;
                }
                text.push_str(&rest[..cut]);
                offset += cut;
            } else if text.is_empty() {
                return Err(PageError::LimitTooSmall {
                    minimum: rest.len(),
                });
            }
            break;
        }
        Ok(Page {
            text,
            until_seq: seq,
            until_offset: offset,
            more: seq < self.last_seq,
            lost,
        })
    }
}
