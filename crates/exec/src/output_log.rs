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
pub(crate) const CHUNK_BYTES: usize = 4096;
/// Label inserted when pipe output switches to stdout.
const STDOUT_LABEL: &str = "\n[标准输出]\n";
/// Label inserted when pipe output switches to stderr.
const STDERR_LABEL: &str = "\n[错误输出]\n";

/// Which stream a piece of output came from. Pipe output starts as stdout, so a first stdout
/// piece carries no label.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Stream {
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
pub(crate) struct Cursor {
    pub seq: u64,
    pub offset: usize,
    pub partial: bool,
}

/// One page of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Page {
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
pub(crate) enum PageError {
    InvalidCursor(String),
    LimitTooSmall { minimum: usize },
}

/// The log itself.
#[derive(Debug)]
pub(crate) struct OutputLog {
    chunks: VecDeque<Chunk>,
    last_seq: u64,
    retained_bytes: usize,
    max_retained: usize,
    current_stream: Stream,
    total_bytes: u64,
}

impl OutputLog {
    pub(crate) fn new(max_retained: usize) -> Self {
        Self {
            chunks: VecDeque::new(),
            last_seq: 0,
            retained_bytes: 0,
            max_retained,
            current_stream: Stream::default(),
            total_bytes: 0,
        }
    }

    pub(crate) fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// First chunk still retained (`last_seq + 1` when nothing is retained).
    pub(crate) fn retained_from_seq(&self) -> u64 {
        self.chunks
            .front()
            .map_or(self.last_seq + 1, |chunk| chunk.seq)
    }

    /// Bytes ever appended (labels included).
    #[cfg(test)]
    pub(crate) fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    #[cfg(test)]
    pub(crate) fn retained_bytes(&self) -> usize {
        self.retained_bytes
    }

    /// Appends decoded text, splitting it into chunks of at most [`CHUNK_BYTES`] and prefixing a
    /// stream label whenever pipe output switches streams (the label counts in offsets).
    pub(crate) fn append(&mut self, stream: Stream, text: &str) {
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
    pub(crate) fn page(&self, cursor: Cursor, max_bytes: usize) -> Result<Page, PageError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(seq: u64) -> Cursor {
        Cursor {
            seq,
            offset: 0,
            partial: false,
        }
    }

    fn partial(seq: u64, offset: usize) -> Cursor {
        Cursor {
            seq,
            offset,
            partial: true,
        }
    }

    fn read_all(log: &OutputLog, mut cursor: Cursor, max: usize) -> String {
        let mut out = String::new();
        loop {
            let page = log.page(cursor, max).unwrap();
            out.push_str(&page.text);
            cursor = Cursor {
                seq: page.until_seq,
                offset: page.until_offset,
                partial: cursor.partial,
            };
            if !page.more {
                return out;
            }
        }
    }

    #[test]
    fn chunks_are_numbered_from_one_and_bounded() {
        let mut log = OutputLog::new(1 << 20);
        log.append(Stream::Pty, &"x".repeat(10_000));
        assert_eq!(log.last_seq(), 3);
        assert_eq!(log.retained_from_seq(), 1);
        assert_eq!(log.chunk(1).unwrap().text.len(), CHUNK_BYTES);
        assert_eq!(log.chunk(3).unwrap().text.len(), 10_000 - 2 * CHUNK_BYTES);
    }

    #[test]
    fn partial_paging_reproduces_text_byte_for_byte() {
        let mut log = OutputLog::new(1 << 20);
        let text: String = (0..3000).map(|i| format!("行 {i} é\n")).collect();
        for piece in text.as_bytes().chunks(777) {
            log.append(Stream::Pty, std::str::from_utf8(piece).unwrap_or("?"));
        }
        let expected: String = text
            .as_bytes()
            .chunks(777)
            .map(|p| std::str::from_utf8(p).unwrap_or("?").to_string())
            .collect();
        for max in [4, 5, 100, 4096, 65536] {
            assert_eq!(read_all(&log, partial(0, 0), max), expected, "max {max}");
        }
    }

    #[test]
    fn whole_chunk_mode_rejects_a_page_smaller_than_the_next_chunk() {
        let mut log = OutputLog::new(1 << 20);
        log.append(Stream::Pty, "hello world");
        assert_eq!(
            log.page(whole(0), 5),
            Err(PageError::LimitTooSmall { minimum: 11 })
        );
        let page = log.page(whole(0), 11).unwrap();
        assert_eq!(page.text, "hello world");
        assert_eq!(
            (page.until_seq, page.until_offset, page.more),
            (1, 0, false)
        );
    }

    #[test]
    fn partial_mode_needs_room_for_one_character() {
        let mut log = OutputLog::new(1 << 20);
        log.append(Stream::Pty, "世界");
        assert_eq!(
            log.page(partial(0, 0), 2),
            Err(PageError::LimitTooSmall { minimum: 3 })
        );
        let page = log.page(partial(0, 0), 4).unwrap();
        assert_eq!((page.text.as_str(), page.until_offset), ("世", 3));
    }

    #[test]
    fn invalid_cursors_are_rejected() {
        let mut log = OutputLog::new(1 << 20);
        log.append(Stream::Pty, "世界");
        assert!(matches!(
            log.page(whole(2), 10),
            Err(PageError::InvalidCursor(_))
        ));
        assert!(matches!(
            log.page(partial(0, 1), 10),
            Err(PageError::InvalidCursor(_))
        ));
        assert!(matches!(
            log.page(partial(0, 7), 10),
            Err(PageError::InvalidCursor(_))
        ));
        assert!(matches!(
            log.page(partial(1, 1), 10),
            Err(PageError::InvalidCursor(_))
        ));
        // An offset at the very end of a chunk is the start of the next one.
        let page = log.page(partial(0, 6), 10).unwrap();
        assert_eq!((page.text.as_str(), page.until_seq), ("", 1));
    }

    #[test]
    fn a_cursor_behind_the_window_reports_loss_and_resumes() {
        let mut log = OutputLog::new(3 * CHUNK_BYTES);
        for i in 0..10 {
            log.append(Stream::Pty, &format!("{i}").repeat(CHUNK_BYTES));
        }
        assert_eq!(log.retained_from_seq(), 8);
        assert!(log.retained_bytes() <= 3 * CHUNK_BYTES);
        let page = log.page(partial(2, 10), CHUNK_BYTES).unwrap();
        assert!(page.lost);
        assert_eq!(page.text, "7".repeat(CHUNK_BYTES));
        assert_eq!((page.until_seq, page.until_offset), (8, 0));
        let next = log.page(whole(8), CHUNK_BYTES).unwrap();
        assert!(!next.lost);
        assert_eq!(next.text, "8".repeat(CHUNK_BYTES));
    }

    #[test]
    fn pipe_labels_mark_stream_switches_and_count_in_offsets() {
        let mut log = OutputLog::new(1 << 20);
        log.append(Stream::Stdout, "out1\n");
        log.append(Stream::Stderr, "err\n");
        log.append(Stream::Stderr, "err2\n");
        log.append(Stream::Stdout, "out2\n");
        let all = read_all(&log, partial(0, 0), 7);
        assert_eq!(
            all,
            format!("out1\n{STDERR_LABEL}err\nerr2\n{STDOUT_LABEL}out2\n")
        );
        assert_eq!(log.total_bytes() as usize, all.len());
    }
}
