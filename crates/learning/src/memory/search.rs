//! Read-only line search over the caller's visible memory files.
//!
//! Scopes: global (`agent/memory/`, without `users/` and the legacy `activity/`), then the
//! caller's own directory. Other users' directories are never listed or read; symlinks and
//! hidden entries are skipped; `file_path` must name a file found in those scopes.

use super::Memory;
use super::entries::preview;
use super::store::Scope;
use crate::ActorKey;
use crate::{Error, Result};
use mpa_protocol::Actor;
use regex::{Regex, RegexBuilder};
use serde::Serialize;
use std::fs;
use std::path::{Path, PathBuf};

/// Longest query, in characters.
pub const MAX_QUERY_CHARS: usize = 256;
/// Matches returned when the request names no limit.
pub const DEFAULT_SEARCH_LIMIT: usize = 20;
/// Most matches returned (larger limits are clamped).
pub const MAX_SEARCH_LIMIT: usize = 50;
const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
const MAX_LINE_CHARS: usize = 1200;
const MAX_TOTAL_BYTES: usize = 32 * 1024;
const MAX_DEPTH: usize = 8;

/// Which memory files a search reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchCategory {
    /// `MEMORY.md` / `USER.md` (global and the caller's own).
    Primary,
    /// Every other Markdown file of those scopes.
    Topic,
    #[default]
    All,
}

/// A read-only line search over the caller's visible memory files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest {
    /// Literal, case-insensitive substring, or a regular expression with `use_regex`.
    pub query: String,
    pub category: SearchCategory,
    /// Only this file: a `path` returned by an earlier search.
    pub file_path: Option<String>,
    pub use_regex: bool,
    /// `None` = [`DEFAULT_SEARCH_LIMIT`]; clamped to 1..=[`MAX_SEARCH_LIMIT`].
    pub limit: Option<usize>,
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchHit {
    pub path: String,
    pub category: SearchCategory,
    /// 1-based line number.
    pub line: usize,
    /// The line, cut to 1200 chars.
    pub text: String,
    pub scope: Scope,
}

/// A file that was not searched, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedFile {
    pub path: String,
    pub reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchResults {
    success: bool,
    pub query: String,
    /// Primary files first, then topic files; global before the caller's own.
    pub entries: Vec<SearchHit>,
    pub total_count: usize,
    pub returned_count: usize,
    /// More lines matched than were returned (limit or the 32 KiB output budget).
    pub truncated: bool,
    pub skipped_files: Vec<SkippedFile>,
    pub searched_files: usize,
}

struct Visible {
    scope_rank: u8,
    scope: Scope,
    category: SearchCategory,
    display: String,
    path: PathBuf,
}

enum Matcher {
    Literal(String),
    Regex(Regex),
}

impl Matcher {
    fn is_match(&self, line: &str) -> bool {
        match self {
            Matcher::Literal(q) => line.to_lowercase().contains(q.as_str()),
            Matcher::Regex(r) => r.is_match(line),
        }
    }
}

impl Memory {
    /// Search the global memory files and the caller's own (never another user's).
    pub fn search(&self, actor: &Actor, req: SearchRequest) -> Result<SearchResults> {
        let query = req.query.trim();
        if query.is_empty() {
            return Err(Error::Invalid("query is required.".into()));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(Error::Invalid(format!(
                "query is longer than {MAX_QUERY_CHARS} characters."
            )));
        }
        let wanted: &[SearchCategory] = match req.category {
            SearchCategory::Primary => &[SearchCategory::Primary],
            SearchCategory::Topic => &[SearchCategory::Topic],
            SearchCategory::All => &[SearchCategory::Primary, SearchCategory::Topic],
        };
        let limit = req
            .limit
            .unwrap_or(DEFAULT_SEARCH_LIMIT)
            .clamp(1, MAX_SEARCH_LIMIT);
        let matcher = if req.use_regex {
            match RegexBuilder::new(query)
                .case_insensitive(true)
                .size_limit(1 << 20)
                .build()
            {
                Ok(r) => Matcher::Regex(r),
                Err(e) => {
                    return Err(Error::Invalid(format!("Invalid regular expression: {e}")));
                }
            }
        } else {
            Matcher::Literal(query.to_lowercase())
        };
        let mut files = self.visible_files(actor);
        if let Some(fp) = &req.file_path {
            files.retain(|f| &f.display == fp);
            if files.is_empty() {
                return Err(Error::Invalid(
                    "file_path is not a memory file visible to you; use a path returned by an earlier search_memory result.".into(),
                ));
            }
        }
        files.retain(|f| wanted.contains(&f.category));
        files.sort_by(|a, b| {
            (a.category, a.scope_rank, &a.display).cmp(&(b.category, b.scope_rank, &b.display))
        });

        let mut entries = Vec::new();
        let mut skipped = Vec::new();
        let mut total = 0usize;
        let mut bytes = 0usize;
        let mut truncated = false;
        for f in &files {
            let skip = |reason| SkippedFile {
                path: f.display.clone(),
                reason,
            };
            match fs::metadata(&f.path) {
                Ok(m) if m.len() > MAX_FILE_BYTES => {
                    skipped.push(skip("larger than 2 MiB"));
                    continue;
                }
                Err(_) => {
                    skipped.push(skip("unreadable"));
                    continue;
                }
                Ok(_) => {}
            }
            let Ok(text) = fs::read_to_string(&f.path) else {
                skipped.push(skip("unreadable or not UTF-8"));
                continue;
            };
            for (i, line) in text.lines().enumerate() {
                if !matcher.is_match(line) {
                    continue;
                }
                total += 1;
                if entries.len() >= limit || truncated {
                    continue;
                }
                let hit = SearchHit {
                    path: f.display.clone(),
                    category: f.category,
                    line: i + 1,
                    text: preview(line, MAX_LINE_CHARS),
                    scope: f.scope,
                };
                // The budget is on the serialised size the caller will send on.
                let size = serde_json::to_vec(&hit).map(|v| v.len()).unwrap_or(0);
                if bytes + size > MAX_TOTAL_BYTES {
                    truncated = true;
                    continue;
                }
                bytes += size;
                entries.push(hit);
            }
        }
        let returned = entries.len();
        Ok(SearchResults {
            success: true,
            query: query.to_string(),
            entries,
            total_count: total,
            returned_count: returned,
            truncated: truncated || total > returned,
            skipped_files: skipped,
            searched_files: files.len(),
        })
    }

    /// Every `.md` file of the caller's scopes (global first, then own user directory).
    fn visible_files(&self, actor: &Actor) -> Vec<Visible> {
        let mut out = Vec::new();
        let root = self.memory_root();
        let mut global = Vec::new();
        walk(&root, &root, 0, true, &mut global);
        for rel in global {
            let category = if rel == "MEMORY.md" {
                SearchCategory::Primary
            } else {
                SearchCategory::Topic
            };
            out.push(Visible {
                scope_rank: 0,
                scope: Scope::Global,
                category,
                display: format!("agent/memory/{rel}"),
                path: root.join(&rel),
            });
        }
        let key = actor.user_key();
        let uroot = self.user_root(&key);
        let mut mine = Vec::new();
        if is_real_dir(&root.join("users")) && is_real_dir(&uroot) {
            walk(&uroot, &uroot, 0, false, &mut mine);
        }
        for rel in mine {
            let category = if rel == "MEMORY.md" || rel == "USER.md" {
                SearchCategory::Primary
            } else {
                SearchCategory::Topic
            };
            out.push(Visible {
                scope_rank: 1,
                scope: Scope::User,
                category,
                display: format!("agent/memory/users/{key}/{rel}"),
                path: uroot.join(&rel),
            });
        }
        out
    }
}

fn is_real_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// Collect relative paths of `.md` regular files; symlinks and dot-entries are skipped, and
/// at the global root the per-user and legacy activity trees are excluded.
fn walk(root: &Path, dir: &Path, depth: usize, global_root: bool, out: &mut Vec<String>) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut items: Vec<_> = rd.filter_map(|e| e.ok()).collect();
    items.sort_by_key(|e| e.file_name());
    for e in items {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if global_root && depth == 0 && (name == "users" || name == "activity") {
            continue;
        }
        let Ok(ft) = e.file_type() else { continue };
        let path = e.path();
        if ft.is_symlink() {
            continue;
        }
        if ft.is_dir() {
            walk(root, &path, depth + 1, global_root, out);
        } else if ft.is_file()
            && name.ends_with(".md")
            && let Ok(rel) = path.strip_prefix(root)
        {
            out.push(rel.to_string_lossy().into_owned());
        }
    }
}
