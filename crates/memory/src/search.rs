//! `search_memory`: read-only line search over the caller's visible memory files.
//!
//! Scopes: global (`agent/memory/`, without `users/` and the legacy `activity/`), then the
//! caller's own directory. Other users' directories are never listed or read; symlinks and
//! hidden entries are skipped; `file_path` must name a file found in those scopes.

use crate::MemoryHub;
use crate::entries::preview;
use crate::hub::err_body;
use mpa_protocol::Actor;
use regex::{Regex, RegexBuilder};
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};

const MAX_QUERY_CHARS: usize = 256;
const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
const MAX_LINE_CHARS: usize = 1200;
const MAX_TOTAL_BYTES: usize = 32 * 1024;
const DEFAULT_LIMIT: u64 = 20;
const MAX_LIMIT: u64 = 50;
const MAX_DEPTH: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Category {
    Primary,
    Topic,
}

impl Category {
    fn as_str(self) -> &'static str {
        match self {
            Category::Primary => "primary",
            Category::Topic => "topic",
        }
    }
}

struct Visible {
    scope_rank: u8,
    scope: &'static str,
    category: Category,
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

impl MemoryHub {
    /// The `search_memory` tool.
    pub fn search_memory_tool(&self, actor: &Actor, args: Value) -> Value {
        let Some(obj) = args.as_object() else {
            return err_body("Arguments must be a JSON object.");
        };
        let query = obj
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        if query.is_empty() {
            return err_body("query is required.");
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return err_body("query is longer than 256 characters.");
        }
        let category = obj.get("category").and_then(Value::as_str).unwrap_or("all");
        let wanted: &[Category] = match category {
            "primary" => &[Category::Primary],
            "topic" => &[Category::Topic],
            "all" => &[Category::Primary, Category::Topic],
            other => {
                return err_body(&format!(
                    "Invalid category '{other}'. Use primary, topic or all."
                ));
            }
        };
        let use_regex = obj
            .get("use_regex")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let limit = obj
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_LIMIT)
            .clamp(1, MAX_LIMIT) as usize;
        let matcher = if use_regex {
            match RegexBuilder::new(query)
                .case_insensitive(true)
                .size_limit(1 << 20)
                .build()
            {
                Ok(r) => Matcher::Regex(r),
                Err(e) => return err_body(&format!("Invalid regular expression: {e}")),
            }
        } else {
            Matcher::Literal(query.to_lowercase())
        };
        let mut files = self.visible_files(actor);
        if let Some(fp) = obj.get("file_path").and_then(Value::as_str) {
            files.retain(|f| f.display == fp);
            if files.is_empty() {
                return err_body(
                    "file_path is not a memory file visible to you; use a path returned by an earlier search_memory result.",
                );
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
            match fs::metadata(&f.path) {
                Ok(m) if m.len() > MAX_FILE_BYTES => {
                    skipped.push(json!({"path": f.display, "reason": "larger than 2 MiB"}));
                    continue;
                }
                Err(_) => {
                    skipped.push(json!({"path": f.display, "reason": "unreadable"}));
                    continue;
                }
                Ok(_) => {}
            }
            let Ok(text) = fs::read_to_string(&f.path) else {
                skipped.push(json!({"path": f.display, "reason": "unreadable or not UTF-8"}));
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
                let e = json!({
                    "path": f.display,
                    "category": f.category.as_str(),
                    "line": i + 1,
                    "text": preview(line, MAX_LINE_CHARS),
                    "scope": f.scope,
                });
                let size = e.to_string().len();
                if bytes + size > MAX_TOTAL_BYTES {
                    truncated = true;
                    continue;
                }
                bytes += size;
                entries.push(e);
            }
        }
        let returned = entries.len();
        json!({
            "success": true,
            "query": query,
            "entries": entries,
            "total_count": total,
            "returned_count": returned,
            "truncated": truncated || total > returned,
            "skipped_files": skipped,
            "searched_files": files.len(),
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
                Category::Primary
            } else {
                Category::Topic
            };
            out.push(Visible {
                scope_rank: 0,
                scope: "global",
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
                Category::Primary
            } else {
                Category::Topic
            };
            out.push(Visible {
                scope_rank: 1,
                scope: "user",
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
