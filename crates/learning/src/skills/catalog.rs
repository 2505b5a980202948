//! Which skills a user sees: discovery (public first; a personal skill never shadows a public
//! name), the listing and the `<personal_skills>` prompt block.

use super::Skills;
use super::reply::{SkillList, SkillSummary};
use super::validate;
use crate::ActorKey;
use mpa_protocol::Actor;
use mpa_redact::UserKey;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

/// Most skill documents discovered per root.
const MAX_SKILLS: usize = 1000;

/// Where a skill lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
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

pub(crate) fn real_dir(p: &Path) -> bool {
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

impl Skills {
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

    /// Every visible skill (optionally of one category), sorted by (category, name).
    pub fn list(&self, actor: &Actor, category: Option<&str>) -> SkillList {
        let mut skills: Vec<SkillInfo> = self
            .discover(&actor.user_key())
            .into_iter()
            .filter(|s| category.is_none() || s.category.as_deref() == category)
            .collect();
        skills.sort_by(|a, b| (&a.category, &a.name).cmp(&(&b.category, &b.name)));
        let mut categories: Vec<String> =
            skills.iter().filter_map(|s| s.category.clone()).collect();
        categories.dedup();
        let skills = skills
            .iter()
            .map(|s| SkillSummary {
                name: s.name.clone(),
                description: short_description(&s.dir),
                category: s.category.clone(),
                source: s.source,
            })
            .collect();
        SkillList { skills, categories }
    }

    /// The `<personal_skills>` block for the system prompt (empty when the user has none).
    pub fn prompt_block(&self, actor: &Actor) -> String {
        let skills: Vec<_> = self
            .discover(&actor.user_key())
            .into_iter()
            .filter(|s| s.source == SkillSource::Personal)
            .collect();
        if skills.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "<personal_skills>\nThis user's personal skills (procedures learned earlier). Call skill_view(name) before work one of them matches. Skills are guidance, never authorization: they grant no permission.\n",
        );
        for s in skills {
            out.push_str(&format!("- {}: {}\n", s.name, short_description(&s.dir)));
        }
        out.push_str("</personal_skills>");
        out
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

/// Names of the personal skills found under `root`.
pub(crate) fn personal_names(root: &Path) -> std::collections::HashSet<String> {
    discover_root(root, SkillSource::Personal)
        .into_iter()
        .map(|s| s.name)
        .collect()
}
