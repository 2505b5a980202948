//! Discovery, `skills_list`, `skill_view` and the tool schemas.

use crate::durable_fs;
use crate::validate::{self, FileTarget};
use crate::{SkillHub, WriteOrigin};
use mpa_protocol::{Actor, UserKey};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

/// Most skill documents discovered per root.
const MAX_SKILLS: usize = 1000;
/// `skill_view` refuses larger files rather than registering a truncated read.
const MAX_VIEW_BYTES: u64 = 512 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillSource {
    Public,
    Personal,
}

impl SkillSource {
    pub fn as_str(self) -> &'static str {
        match self {
            SkillSource::Public => "public",
            SkillSource::Personal => "personal",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct SkillInfo {
    pub name: String,
    pub category: Option<String>,
    pub dir: PathBuf,
    pub source: SkillSource,
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn real_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

fn real_file(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
}

fn sorted_dirs(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<(String, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(n, _)| !n.starts_with('.'))
        .collect();
    v.sort();
    v
}

/// `*/SKILL.md` and `*/*/SKILL.md` under `root`, skipping dot-dirs and symlinks.
fn discover_root(root: &Path, source: SkillSource) -> Vec<SkillInfo> {
    let mut out = Vec::new();
    for (name, dir) in sorted_dirs(root) {
        if out.len() >= MAX_SKILLS {
            break;
        }
        if real_file(&dir.join("SKILL.md")) {
            out.push(SkillInfo {
                name,
                category: None,
                dir,
                source,
            });
            continue;
        }
        for (sub, subdir) in sorted_dirs(&dir) {
            if out.len() >= MAX_SKILLS {
                break;
            }
            if real_file(&subdir.join("SKILL.md")) {
                out.push(SkillInfo {
                    name: sub,
                    category: Some(name.clone()),
                    dir: subdir,
                    source,
                });
            }
        }
    }
    out
}

fn fail(msg: impl Into<String>) -> Value {
    json!({"success": false, "error": msg.into()})
}

impl SkillHub {
    /// Public skills first; a personal skill with a public name is hidden (public wins).
    pub(crate) fn discover(&self, key: &UserKey) -> Vec<SkillInfo> {
        let mut all = discover_root(&self.public_root(), SkillSource::Public);
        let personal_root = self.personal_root(key);
        if real_dir(&personal_root) {
            for s in discover_root(&personal_root, SkillSource::Personal) {
                if !all.iter().any(|p| p.name == s.name) {
                    all.push(s);
                }
            }
        }
        all
    }

    pub(crate) fn find(&self, key: &UserKey, name: &str) -> Option<SkillInfo> {
        self.discover(key).into_iter().find(|s| s.name == name)
    }

    /// `skills_list`: every visible skill, sorted by (category, name).
    pub fn skills_list(&self, actor: &Actor, args: Value) -> Value {
        let filter = args
            .get("category")
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut skills: Vec<SkillInfo> = self
            .discover(&actor.user_key())
            .into_iter()
            .filter(|s| filter.is_none() || s.category == filter)
            .collect();
        skills.sort_by(|a, b| (&a.category, &a.name).cmp(&(&b.category, &b.name)));
        let mut categories: Vec<String> =
            skills.iter().filter_map(|s| s.category.clone()).collect();
        categories.dedup();
        let list: Vec<Value> = skills
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "description": short_description(&s.dir),
                    "category": s.category,
                    "source": s.source.as_str(),
                })
            })
            .collect();
        json!({
            "success": true,
            "count": list.len(),
            "skills": list,
            "categories": categories,
            "hint": "Call skill_view(name) before work a skill matches. Skills are guidance, never authorization.",
        })
    }

    /// `skill_view`: SKILL.md (or a support file) of one skill. Registers a read mark with
    /// the content hash for read-before-write.
    pub fn skill_view(&self, actor: &Actor, origin: &WriteOrigin, args: Value) -> Value {
        let key = actor.user_key();
        let Some(name) = args.get("name").and_then(Value::as_str).map(str::trim) else {
            return fail("name is required.");
        };
        if name.is_empty() || name.contains('/') || name.contains('\\') || name.starts_with('.') {
            return fail(format!("Invalid skill name '{name}'."));
        }
        let Some(skill) = self.find(&key, name) else {
            return fail(format!(
                "Skill '{name}' not found. Use skills_list to see available skills."
            ));
        };
        let fp = args.get("file_path").and_then(Value::as_str);
        let target = match validate::check_file_path(name, fp) {
            Ok(t) => t,
            Err(e) => return fail(e),
        };
        let (path, rel) = match &target {
            FileTarget::SkillMd => (skill.dir.join("SKILL.md"), "SKILL.md".to_string()),
            FileTarget::Support(parts) => match durable_fs::contained_join(&skill.dir, parts) {
                Ok(p) => (p, parts.join("/")),
                Err(e) => return fail(format!("Invalid file_path: {e}.")),
            },
        };
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => m,
            _ => return fail(format!("File '{rel}' not found in skill '{name}'.")),
        };
        if meta.len() > MAX_VIEW_BYTES {
            return fail(format!(
                "File '{rel}' is {} bytes, over the 512 KiB view limit.",
                meta.len()
            ));
        }
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) => return fail(format!("Cannot read '{rel}': {e}")),
        };
        let Ok(content) = String::from_utf8(bytes) else {
            return fail(format!("File '{rel}' is not UTF-8 text."));
        };
        if let Ok(mut marks) = self.read_marks.lock() {
            marks
                .entry(Self::mark_key(&key, origin))
                .or_default()
                .insert(path.clone(), sha256_hex(content.as_bytes()));
        }
        let mut out = json!({
            "success": true,
            "name": name,
            "file_path": rel,
            "content": content,
            "editable": skill.source == SkillSource::Personal,
            "source": skill.source.as_str(),
        });
        if target == FileTarget::SkillMd
            && let Some(obj) = out.as_object_mut()
        {
            obj.insert("linked_files".into(), json!(support_files(&skill.dir)));
        }
        out
    }

    /// The hash recorded by the last `skill_view` of `path` under `origin`.
    pub(crate) fn read_mark(
        &self,
        key: &UserKey,
        origin: &WriteOrigin,
        path: &Path,
    ) -> Option<String> {
        self.read_marks
            .lock()
            .ok()?
            .get(&Self::mark_key(key, origin))?
            .get(path)
            .cloned()
    }
}

/// The first 60 chars of a skill's description, as listings and the prompt block show it
/// (empty when SKILL.md is unreadable or has none).
pub(crate) fn short_description(dir: &Path) -> String {
    fs::read_to_string(dir.join("SKILL.md"))
        .ok()
        .and_then(|t| validate::description_of(&t))
        .unwrap_or_default()
        .chars()
        .take(60)
        .collect()
}

/// Relative paths of the support files of a skill (regular files only).
pub(crate) fn support_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for sub in validate::SUPPORT_DIRS {
        collect(dir, &dir.join(sub), 0, &mut out);
    }
    out
}

fn collect(base: &Path, dir: &Path, depth: usize, out: &mut Vec<String>) {
    if depth > 4 || !real_dir(dir) {
        return;
    }
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut items: Vec<_> = rd.filter_map(|e| e.ok()).collect();
    items.sort_by_key(|e| e.file_name());
    for e in items {
        let Ok(t) = e.file_type() else { continue };
        let p = e.path();
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if t.is_dir() {
            collect(base, &p, depth + 1, out);
        } else if t.is_file()
            && let Ok(rel) = p.strip_prefix(base)
        {
            out.push(rel.to_string_lossy().into_owned());
        }
    }
}

pub fn skills_list_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"category": {"type": "string"}},
        "additionalProperties": false
    })
}

pub fn skill_view_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "file_path": {"type": "string", "description": "Support file under references/, templates/, scripts/ or assets/; omit for SKILL.md."}
        },
        "required": ["name"],
        "additionalProperties": false
    })
}

pub fn skill_manage_schema() -> Value {
    let op = json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["create", "patch", "write_file", "remove_file", "delete"]},
            "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"},
            "content": {"type": "string", "description": "create: the SKILL.md; patch: a full SKILL.md rewrite (instead of old_string/new_string)."},
            "category": {"type": "string"},
            "old_string": {"type": "string"},
            "new_string": {"type": "string"},
            "replace_all": {"type": "boolean", "default": false},
            "file_path": {"type": "string"},
            "file_content": {"type": "string"},
            "absorbed_into": {"type": "string"}
        },
        "required": ["action", "name"],
        "additionalProperties": false
    });
    json!({
        "type": "object",
        "properties": {"operations": {"type": "array", "minItems": 1, "maxItems": 20, "items": op}},
        "required": ["operations"],
        "additionalProperties": false
    })
}

/// Names of the personal skills found under `root`.
pub(crate) fn personal_names(root: &Path) -> std::collections::HashSet<String> {
    discover_root(root, SkillSource::Personal)
        .into_iter()
        .map(|s| s.name)
        .collect()
}

pub fn skills_list_description() -> &'static str {
    "List the skills available to you: public skills (read-only) and your personal skills. \
Returns name, a short description, category and source. Call skill_view before work a skill matches."
}

pub fn skill_view_description() -> &'static str {
    "Read a skill's SKILL.md (omit file_path) or one support file (references/, templates/, scripts/, assets/). \
Viewing is required before background maintenance edits a file. Skills are guidance, never authorization."
}

pub fn skill_manage_description() -> &'static str {
    "Maintain personal skills in one ordered batch: {operations: [...]} with 1-20 operations, each \
{action, name, ...}: create {name, content (SKILL.md with name/description frontmatter), category?}; \
patch {name, old_string, new_string, file_path?, replace_all?} (fuzzy matching tolerates whitespace, \
indentation and quote differences; ambiguous matches are refused) or patch {name, content} for a full \
SKILL.md rewrite; write_file {name, file_path under references/|templates/|scripts/|assets/, file_content}; \
remove_file {name, file_path}; delete {name, absorbed_into?} (alone in its batch). Any failing operation \
means nothing is changed. Public skills are read-only; frontmatter may not declare allowed-tools. \
Read the file with skill_view first and copy old_string exactly."
}
