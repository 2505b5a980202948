//! `read_file(file_path, start_line, end_line)`: a page of a text file inside the caller's file
//! boundary ([`crate::file_boundary`]), line-numbered. The file is streamed up to the page's
//! last line, holding at most one line (itself cut at [`MAX_LINE_CHARS`]) beside the page, so a
//! file of gigabytes pages in constant memory; files whose first block holds a NUL byte are
//! refused as binary, and a NUL further on ends the page there.

use super::{ToolContext, ToolMeta, ToolOutput, TypedTool};
use crate::file_boundary::FileBoundary;
use async_trait::async_trait;
use mpa_protocol::Outcome;
use schemars::JsonSchema;
use serde::Deserialize;
use std::io::{BufRead, BufReader, Read};

/// Lines one call returns at most.
pub const MAX_LINES: u64 = 2000;
/// Characters of one line shown (the rest is cut, marked).
pub const MAX_LINE_CHARS: usize = 2000;
/// Characters of the whole page.
pub const MAX_PAGE_CHARS: usize = 50_000;
/// Bytes looked at to tell a binary file.
const SNIFF_BYTES: usize = 8192;

pub struct ReadFile {
    pub files: FileBoundary,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// The file: absolute, or relative to your first readable folder.
    pub file_path: String,
    /// First line to read, from 1 (default 1).
    #[serde(default)]
    pub start_line: Option<u64>,
    /// Last line to read, inclusive (default: start_line + 1999).
    #[serde(default)]
    pub end_line: Option<u64>,
}

fn failure(code: &str, message: impl Into<String>) -> ToolOutput {
    ToolOutput::failure(code, message)
}

/// One page of the file.
#[derive(Debug, PartialEq, Eq)]
struct Page {
    text: String,
    first: u64,
    last: u64,
    has_more: bool,
    cut_lines: u64,
    /// The page stopped early: at the character cap, or at binary content.
    stopped: Option<&'static str>,
}

/// What [`next_line`] found.
enum Line {
    /// A line (its bytes in the buffer), cut when it was longer than kept.
    Text {
        cut: bool,
    },
    /// A NUL byte: binary content from here on (nothing more is read).
    Binary,
    End,
}

/// Reads one line into `line` (at most `MAX_LINE_CHARS` characters' worth of bytes kept, the
/// rest consumed); stops at the first NUL byte without reading on.
fn next_line(r: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<Line> {
    line.clear();
    let keep = MAX_LINE_CHARS * 4;
    let mut cut = false;
    let mut any = false;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(if any { Line::Text { cut } } else { Line::End });
        }
        any = true;
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if chunk.contains(&0) {
            return Ok(Line::Binary);
        }
        let room = keep.saturating_sub(line.len());
        if chunk.len() > room {
            cut = true;
        }
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = done.unwrap_or(buf.len());
        r.consume(used);
        if done.is_some() {
            return Ok(Line::Text { cut });
        }
    }
}

fn read_page(
    mut file: impl Read,
    start: u64,
    end: u64,
) -> std::io::Result<Result<Page, ToolOutput>> {
    let mut r = BufReader::with_capacity(64 * 1024, &mut file);
    if r.fill_buf()?.iter().take(SNIFF_BYTES).any(|&b| b == 0) {
        return Ok(Err(failure(
            "binary_file",
            "the file is binary; read_file reads text files only / 二进制文件无法按文本读取",
        )));
    }
    let mut line = Vec::new();
    let mut n = 0u64;
    let mut page = Page {
        text: String::new(),
        first: start,
        last: start.saturating_sub(1),
        has_more: false,
        cut_lines: 0,
        stopped: None,
    };
    loop {
        let cut = match next_line(&mut r, &mut line)? {
            Line::End => break,
            Line::Binary => {
                page.stopped = Some("binary content");
                break;
            }
            Line::Text { cut } => cut,
        };
        n += 1;
        if n < start {
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.strip_suffix('\r').unwrap_or(&text);
        let mut shown: String = text.chars().take(MAX_LINE_CHARS).collect();
        if cut || text.chars().count() > MAX_LINE_CHARS {
            shown.push_str(" …[line cut]");
            page.cut_lines += 1;
        }
        let numbered = format!("{n:>6}\t{shown}\n");
        if page.text.len() + numbered.len() > MAX_PAGE_CHARS && page.last >= start {
            page.has_more = true;
            page.stopped = Some("page size limit");
            break;
        }
        page.text.push_str(&numbered);
        page.last = n;
        if n >= end {
            // Whether anything follows, without reading it.
            page.has_more = !r.fill_buf()?.is_empty();
            break;
        }
    }
    Ok(Ok(page))
}

#[async_trait]
impl TypedTool for ReadFile {
    type Args = ReadFileArgs;
    const NAME: &'static str = "read_file";

    fn description(&self) -> String {
        format!(
            "Read a text file you may read (administrators: the working and data directories; others: \
their own agent data folders, e.g. a long command or Python output saved to a file), as numbered \
lines from start_line to end_line (at most {MAX_LINES} lines per call; follow next_start_line to \
page on). Binary files are refused."
        )
    }

    fn meta(&self) -> ToolMeta {
        ToolMeta::read().self_capped()
    }

    async fn run(&self, ctx: ToolContext, args: ReadFileArgs) -> ToolOutput {
        let start = args.start_line.unwrap_or(1).max(1);
        let end = match args.end_line {
            Some(e) if e < start => {
                return failure(
                    "invalid_arguments",
                    format!("end_line ({e}) is before start_line ({start})"),
                );
            }
            Some(e) => e.min(start + MAX_LINES - 1),
            None => start + MAX_LINES - 1,
        };
        let files = self.files.clone();
        let actor = ctx.actor.clone();
        let path = args.file_path.clone();
        let read = tokio::task::spawn_blocking(move || {
            let real = files
                .resolve(&actor, &path)
                .map_err(|r| failure(r.code, r.message))?;
            let file = FileBoundary::open(&real)
                .map_err(|_| failure("local_file_unavailable", "the file could not be opened"))?;
            read_page(file, start, end).map_err(|e| {
                failure(
                    "file_read_failed",
                    format!("the file could not be read: {}", e.kind()),
                )
            })?
        })
        .await;
        let page = match read {
            Ok(Ok(page)) => page,
            Ok(Err(out)) => return out,
            Err(_) => return failure("file_read_failed", "the file could not be read"),
        };
        let mut v = serde_json::json!({
            "success": true,
            "file_path": args.file_path,
            "start_line": page.first,
            "end_line": page.last,
            "content": page.text,
            "has_more": page.has_more,
        });
        if page.last < page.first {
            v["message"] = "no lines in this range: the file ends before start_line".into();
        }
        if page.has_more {
            v["next_start_line"] = (page.last + 1).into();
        }
        if page.cut_lines > 0 {
            v["cut_lines"] = page.cut_lines.into();
        }
        if let Some(why) = page.stopped {
            v["stopped_at"] = why.into();
        }
        ToolOutput::json(&v, Outcome::Succeeded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_numbered_and_long_lines_cut() {
        let text = format!("a\nb\r\n{}\nd\n", "x".repeat(MAX_LINE_CHARS * 5));
        let page = read_page(text.as_bytes(), 2, 3).unwrap().unwrap();
        assert_eq!(page.first, 2);
        assert_eq!(page.last, 3);
        assert!(page.has_more);
        assert_eq!(page.cut_lines, 1);
        assert!(
            page.text.starts_with("     2\tb\n     3\txxx"),
            "{}",
            page.text
        );
        let binary = read_page(&b"PNG\0\0"[..], 1, 10).unwrap();
        assert!(binary.is_err());
    }
}
