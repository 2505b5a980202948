//! The large-result store and `read_tool_result` (spec runtime.md §4.3–§4.4).
//!
//! A tool result over the cap is kept whole in the session actor's memory — never on disk, in a
//! log or in the memory store — so the model can read on from where the preview stopped without
//! running the tool again. Limits: 1 MiB per result, 8 results and 4 MiB per session, 15 minutes
//! (monotonic clock); expired entries go first, then the oldest. Offsets count Unicode scalar
//! values (`offset_unit: "unicode_characters"`), so a page never splits a character.
//!
//! An id that is unknown, expired, evicted, from another session or stored for another user (or
//! for an administrator, read after demotion) gets one identical answer: `result_unavailable`.

use super::{ToolContext, ToolMeta, ToolOutput, TypedTool};
use async_trait::async_trait;
use mpa_protocol::{Actor, Outcome, UserId};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const MAX_RESULT_BYTES: usize = 1_048_576;
pub const MAX_RESULTS: usize = 8;
pub const MAX_TOTAL_BYTES: usize = 4 * 1_048_576;
pub const RESULT_TTL: Duration = Duration::from_secs(900);
pub const DEFAULT_LIMIT: usize = 4000;
pub const MAX_LIMIT: usize = 16_000;
/// A byte offset is remembered every this many characters, so a page seeks in O(stride).
const CHECKPOINT_STRIDE: usize = 2048;
/// Longest line text a `pattern` match returns.
const MATCH_LINE_CHARS: usize = 400;

struct Entry {
    id: String,
    tool_name: String,
    owner: UserId,
    requires_admin: bool,
    text: Arc<str>,
    total_chars: usize,
    /// Byte offset of character `i * CHECKPOINT_STRIDE`.
    checkpoints: Vec<usize>,
    expires: Instant,
}

impl Entry {
    fn byte_at(&self, char_offset: usize) -> usize {
        let slot = (char_offset / CHECKPOINT_STRIDE).min(self.checkpoints.len().saturating_sub(1));
        let start = self.checkpoints.get(slot).copied().unwrap_or(0);
        let skip = char_offset - slot * CHECKPOINT_STRIDE;
        self.text[start..]
            .char_indices()
            .nth(skip)
            .map_or(self.text.len(), |(b, _)| start + b)
    }

    fn readable_by(&self, actor: &Actor) -> bool {
        self.owner == actor.user_id && (!self.requires_admin || actor.is_admin)
    }
}

/// Why a result could not be kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotKept {
    /// Over [`MAX_RESULT_BYTES`].
    TooLarge,
}

/// One session's kept results. `Debug` shows counts only, never contents.
#[derive(Default)]
pub struct ResultStore {
    entries: VecDeque<Entry>,
    bytes: usize,
}

impl std::fmt::Debug for ResultStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultStore")
            .field("results", &self.entries.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// One page of a kept result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<'a> {
    pub tool_name: &'a str,
    pub content: &'a str,
    pub next_offset: Option<usize>,
    pub total_chars: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    Unavailable,
    OffsetOutOfRange { total_chars: usize },
}

impl ResultStore {
    /// Keeps `text` for `actor`; returns its id (32 hex digits).
    pub fn put(&mut self, actor: &Actor, tool_name: &str, text: &str) -> Result<String, NotKept> {
        self.put_at(Instant::now(), actor, tool_name, text)
    }

    pub fn put_at(
        &mut self,
        now: Instant,
        actor: &Actor,
        tool_name: &str,
        text: &str,
    ) -> Result<String, NotKept> {
        if text.len() > MAX_RESULT_BYTES {
            return Err(NotKept::TooLarge);
        }
        let mut checkpoints = Vec::with_capacity(text.len() / CHECKPOINT_STRIDE + 1);
        let mut total_chars = 0usize;
        for (b, _) in text.char_indices() {
            if total_chars.is_multiple_of(CHECKPOINT_STRIDE) {
                checkpoints.push(b);
            }
            total_chars += 1;
        }
        if checkpoints.is_empty() {
            checkpoints.push(0);
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        self.prune(now);
        self.entries.push_back(Entry {
            id: id.clone(),
            tool_name: tool_name.to_string(),
            owner: actor.user_id.clone(),
            requires_admin: actor.is_admin,
            text: Arc::from(text),
            total_chars,
            checkpoints,
            expires: now + RESULT_TTL,
        });
        self.bytes += text.len();
        while self.entries.len() > MAX_RESULTS || self.bytes > MAX_TOTAL_BYTES {
            self.evict_oldest();
        }
        Ok(id)
    }

    fn evict_oldest(&mut self) {
        if let Some(e) = self.entries.pop_front() {
            self.bytes -= e.text.len();
        }
    }

    fn prune(&mut self, now: Instant) {
        while let Some(pos) = self.entries.iter().position(|e| e.expires <= now) {
            if let Some(e) = self.entries.remove(pos) {
                self.bytes -= e.text.len();
            }
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn find(&self, now: Instant, actor: &Actor, id: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.id == id && e.expires > now && e.readable_by(actor))
    }

    /// Up to `limit` characters from character `offset`.
    pub fn page(
        &self,
        actor: &Actor,
        id: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Page<'_>, ReadError> {
        self.page_at(Instant::now(), actor, id, offset, limit)
    }

    pub fn page_at(
        &self,
        now: Instant,
        actor: &Actor,
        id: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Page<'_>, ReadError> {
        let e = self.find(now, actor, id).ok_or(ReadError::Unavailable)?;
        if offset > e.total_chars {
            return Err(ReadError::OffsetOutOfRange {
                total_chars: e.total_chars,
            });
        }
        let end = (offset + limit).min(e.total_chars);
        let (from, to) = (e.byte_at(offset), e.byte_at(end));
        Ok(Page {
            tool_name: &e.tool_name,
            content: &e.text[from..to],
            next_offset: (end < e.total_chars).then_some(end),
            total_chars: e.total_chars,
        })
    }

    /// Lines containing `pattern` (case-insensitive), from the line holding character `offset`
    /// on, until `limit` characters of line text were returned.
    pub fn grep(
        &self,
        actor: &Actor,
        id: &str,
        pattern: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Matches<'_>, ReadError> {
        let e = self
            .find(Instant::now(), actor, id)
            .ok_or(ReadError::Unavailable)?;
        if offset > e.total_chars {
            return Err(ReadError::OffsetOutOfRange {
                total_chars: e.total_chars,
            });
        }
        let needle = pattern.to_lowercase();
        let mut out = Matches {
            tool_name: &e.tool_name,
            total_chars: e.total_chars,
            lines: Vec::new(),
            next_offset: None,
        };
        let mut used = 0usize;
        let mut char_pos = offset;
        let start = e.byte_at(offset);
        for line in e.text[start..].split_inclusive('\n') {
            let line_chars = line.chars().count();
            let body = line.trim_end_matches(['\n', '\r']);
            if body.to_lowercase().contains(&needle) {
                let text: String = body.chars().take(MATCH_LINE_CHARS).collect();
                let cost = text.chars().count().max(1);
                if used + cost > limit && !out.lines.is_empty() {
                    out.next_offset = Some(char_pos);
                    break;
                }
                used += cost;
                out.lines.push(MatchLine {
                    offset: char_pos,
                    text,
                });
            }
            char_pos += line_chars;
        }
        Ok(out)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MatchLine {
    /// Character offset of the line's first character in the whole result.
    pub offset: usize,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matches<'a> {
    pub tool_name: &'a str,
    pub total_chars: usize,
    pub lines: Vec<MatchLine>,
    /// Where to continue the search, when `limit` stopped it early.
    pub next_offset: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadToolResultArgs {
    /// The `result_id` of a truncated tool result (32 hex characters).
    pub result_id: String,
    /// Unicode character offset to start from (the preview's `next_offset`). Default 0.
    #[serde(default)]
    pub offset: Option<usize>,
    /// Characters to return, 1-16000. Default 4000.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Instead of a page: the lines containing this text (case-insensitive), each with its
    /// character offset, from `offset` on.
    #[serde(default)]
    pub pattern: Option<String>,
}

pub struct ReadToolResult;

fn unavailable() -> ToolOutput {
    ToolOutput::json(
        &serde_json::json!({"success": false, "error": "result_unavailable",
            "message": "this result is no longer available (results are kept 15 minutes, at most 8 per session); run the tool again with a narrower query"}),
        Outcome::Failed,
    )
    .with_error("result_unavailable")
}

#[async_trait]
impl TypedTool for ReadToolResult {
    type Args = ReadToolResultArgs;
    const NAME: &'static str = "read_tool_result";

    fn description(&self) -> String {
        "Read more of a tool result that was too large and shown truncated (it has a result_id), \
         without running the tool again: pass result_id and offset = the preview's next_offset; \
         repeat with the returned next_offset until it is null. Offsets count Unicode characters. \
         With pattern, returns only the lines containing that text, each with its offset. Results \
         are kept 15 minutes, at most 8 per session."
            .into()
    }

    fn meta(&self) -> ToolMeta {
        // Pages are sized by `limit`; they are never archived or capped again.
        ToolMeta::read().internal().self_capped()
    }

    async fn run(&self, ctx: ToolContext, args: ReadToolResultArgs) -> ToolOutput {
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return ToolOutput::failure(
                "invalid_arguments",
                format!("limit must be between 1 and {MAX_LIMIT}"),
            );
        }
        let offset = args.offset.unwrap_or(0);
        if args.result_id.len() != 32 {
            return unavailable();
        }
        let results = ctx.session.slot::<ResultStore>();
        let st = crate::sync::lock(&results);
        let id = args.result_id.as_str();
        let answer = match args.pattern.as_deref().filter(|p| !p.is_empty()) {
            Some(pattern) => st.grep(&ctx.actor, id, pattern, offset, limit).map(|m| {
                serde_json::json!({"success": true, "result_id": id, "tool_name": m.tool_name,
                        "pattern": pattern, "offset": offset, "total_chars": m.total_chars,
                        "match_count": m.lines.len(), "matches": m.lines,
                        "next_offset": m.next_offset})
            }),
            None => st.page(&ctx.actor, id, offset, limit).map(|p| {
                serde_json::json!({"success": true, "result_id": id, "tool_name": p.tool_name,
                    "offset": offset, "next_offset": p.next_offset, "total_chars": p.total_chars,
                    "content": p.content})
            }),
        };
        match answer {
            Ok(v) => ToolOutput::json(&v, Outcome::Succeeded),
            Err(ReadError::Unavailable) => unavailable(),
            Err(ReadError::OffsetOutOfRange { total_chars }) => ToolOutput::json(
                &serde_json::json!({"success": false, "error": "offset_out_of_range",
                    "total_chars": total_chars,
                    "message": format!("offset is past the end of the result ({total_chars} characters)")}),
                Outcome::Failed,
            )
            .with_error("offset_out_of_range"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actor(id: &str) -> Actor {
        Actor {
            user_id: UserId(id.into()),
            user_name: id.into(),
            is_admin: false,
        }
    }

    #[test]
    fn pages_reassemble_exactly_across_multibyte_boundaries() {
        let text: String = (0..5000)
            .map(|i| format!("第{i}行 电影 ok\n"))
            .collect::<String>();
        let mut s = ResultStore::default();
        let a = actor("u");
        let id = s.put(&a, "t", &text).unwrap();
        let mut out = String::new();
        let mut off = 0;
        loop {
            let p = s.page(&a, &id, off, 777).unwrap();
            out.push_str(p.content);
            match p.next_offset {
                Some(n) => off = n,
                None => break,
            }
        }
        assert_eq!(out, text);
    }

    #[test]
    fn expiry_and_eviction() {
        let mut s = ResultStore::default();
        let a = actor("u");
        let t0 = Instant::now();
        let first = s.put_at(t0, &a, "t", "x").unwrap();
        assert!(s.page_at(t0, &a, &first, 0, 10).is_ok());
        assert_eq!(
            s.page_at(t0 + RESULT_TTL, &a, &first, 0, 10),
            Err(ReadError::Unavailable)
        );
        let ids: Vec<String> = (0..8)
            .map(|_| s.put_at(t0, &a, "t", "y").unwrap())
            .collect();
        assert_eq!(s.len(), 8);
        assert_eq!(s.page_at(t0, &a, &first, 0, 1), Err(ReadError::Unavailable));
        assert!(s.page_at(t0, &a, &ids[0], 0, 1).is_ok());
        let big = "z".repeat(MAX_RESULT_BYTES);
        for _ in 0..4 {
            s.put_at(t0, &a, "t", &big).unwrap();
        }
        assert!(s.bytes <= MAX_TOTAL_BYTES);
        assert_eq!(
            s.put_at(t0, &a, "t", &format!("{big}!")),
            Err(NotKept::TooLarge)
        );
    }
}
