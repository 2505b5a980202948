//! Planning a batch: every operation is validated and its file contents computed in memory
//! before any byte is written (the journal commits the plan).

use super::Skills;
use super::catalog::{SkillSource, sha256_hex, support_files};
use super::ownership::{CreatedBy, Record, Sidecar};
use super::reply::{ManageFailure, OpResult};
use super::request::{ManageOp, Patch};
use super::validate::{self, FileTarget};
use crate::patch_matcher::{self, PatchError};
use crate::{WriteOrigin, durable_fs, threat};
use mpa_redact::UserKey;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A refusal of one operation, answered as `Operation N: …`.
#[derive(Debug, Default)]
pub(crate) struct OpFail {
    error: String,
    read_before_write: bool,
    available_files: Option<Vec<String>>,
    file_preview: Option<String>,
}

impl OpFail {
    pub(crate) fn new(error: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            ..Self::default()
        }
    }

    /// The answer for operation `n` (1-based) of the batch.
    pub(crate) fn into_failure(self, n: usize) -> ManageFailure {
        ManageFailure {
            operation: Some(n),
            read_before_write_required: self.read_before_write.then_some(true),
            available_files: self.available_files,
            file_preview: self.file_preview,
            ..ManageFailure::new(format!(
                "Operation {n}: {} No operations were applied.",
                self.error
            ))
        }
    }
}

/// Everything a batch will do, computed before any byte is written.
#[derive(Default)]
pub(crate) struct Plan {
    /// Paths in the order they were first staged (the commit order).
    pub order: Vec<PathBuf>,
    /// New content per path; `None` removes the file.
    pub staged: HashMap<PathBuf, Option<String>>,
    destructive: HashSet<PathBuf>,
    new_skills: HashMap<String, PathBuf>,
    pub results: Vec<OpResult>,
    pub skills: Vec<String>,
}

impl Plan {
    fn stage(&mut self, path: PathBuf, content: Option<String>) {
        if !self.staged.contains_key(&path) {
            self.order.push(path.clone());
        }
        self.staged.insert(path, content);
    }

    /// Claim `path` for this batch's one destructive change (create, write, remove or full
    /// rewrite); a second claim is refused.
    fn claim(&mut self, path: &Path, rel: &str, done: &str) -> Result<(), OpFail> {
        if self.destructive.insert(path.to_path_buf()) {
            Ok(())
        } else {
            Err(OpFail::new(format!(
                "'{rel}' is already {done} earlier in this batch; one destructive change per file."
            )))
        }
    }

    /// Record a planned operation's result and the skill it touches.
    fn record(&mut self, name: &str, result: OpResult) {
        self.results.push(result);
        if !self.skills.iter().any(|s| s == name) {
            self.skills.push(name.to_string());
        }
    }

    fn current_text(&self, path: &Path) -> Option<String> {
        match self.staged.get(path) {
            Some(staged) => staged.clone(),
            None => fs::read_to_string(path).ok(),
        }
    }
}

pub(crate) fn scan(text: &str) -> Result<(), OpFail> {
    match threat::first_block(text) {
        Some(f) => Err(OpFail::new(f.block_message())),
        None => Ok(()),
    }
}

impl Skills {
    /// The directory of personal skill `name` (a skill created earlier in this batch counts),
    /// and whether it was created in this batch.
    pub(crate) fn resolve(
        &self,
        key: &UserKey,
        plan: &Plan,
        name: &str,
    ) -> Result<(PathBuf, bool), OpFail> {
        validate::check_name(name, "skill name").map_err(OpFail::new)?;
        if let Some(dir) = plan.new_skills.get(name) {
            return Ok((dir.clone(), true));
        }
        match self.find(key, name) {
            None => Err(OpFail::new(format!(
                "Skill '{name}' not found. Use skills_list, or create it first in this batch."
            ))),
            Some(s) if s.source == SkillSource::Public => Err(OpFail::new(format!(
                "Skill '{name}' is a public skill and read-only; record the change in a personal skill with another name."
            ))),
            Some(s) => Ok((s.dir, false)),
        }
    }

    /// The background guard: only agent-created, unpinned personal skills.
    pub(crate) fn guard(
        &self,
        origin: &WriteOrigin,
        sidecar: &Sidecar,
        name: &str,
        created_in_batch: bool,
    ) -> Result<(), OpFail> {
        if created_in_batch || matches!(origin, WriteOrigin::Foreground) {
            return Ok(());
        }
        match sidecar.get(name) {
            None => Err(OpFail::new(format!(
                "Background review may only maintain skills it created; '{name}' has no ownership record."
            ))),
            Some(r) if r.pinned => Err(OpFail::new(format!(
                "Skill '{name}' is pinned; background review may not change it."
            ))),
            Some(r) if r.created_by != CreatedBy::Agent => Err(OpFail::new(format!(
                "Skill '{name}' belongs to the user; background review may not change it (the user can allow it with /skills adopt {name})."
            ))),
            Some(_) => Ok(()),
        }
    }

    /// Background read-before-write: the file on disk must hash to what the review viewed.
    pub(crate) fn read_check(
        &self,
        key: &UserKey,
        origin: &WriteOrigin,
        plan: &Plan,
        path: &Path,
        rel: &str,
        name: &str,
    ) -> Result<(), OpFail> {
        if matches!(origin, WriteOrigin::Foreground) || plan.staged.contains_key(path) {
            return Ok(());
        }
        let Ok(bytes) = fs::read(path) else {
            return Ok(());
        };
        let current = sha256_hex(&bytes);
        let hint = format!(
            "Call skill_view(name=\"{name}\", file_path=\"{rel}\") once, then retry once; do not loop."
        );
        let stale = |why: &str| OpFail {
            read_before_write: true,
            ..OpFail::new(format!(
                "Read before write: '{rel}' of skill '{name}' {why}. {hint}"
            ))
        };
        match self.read_mark(key, origin, path) {
            None => Err(stale("has not been viewed in this review")),
            Some(h) if h != current => Err(stale("changed after it was viewed")),
            Some(_) => Ok(()),
        }
    }

    /// Validate one (non-delete) operation and add its effect to the plan.
    pub(crate) fn plan_op(
        &self,
        key: &UserKey,
        origin: &WriteOrigin,
        op: &ManageOp,
        plan: &mut Plan,
        sidecar: &mut Sidecar,
    ) -> Result<(), OpFail> {
        let name = op.name().trim();
        match op {
            ManageOp::Create {
                content, category, ..
            } => self.plan_create(
                key,
                origin,
                name,
                content,
                category.as_deref(),
                plan,
                sidecar,
            ),
            ManageOp::Patch(p) => {
                let (dir, fresh) = self.resolve(key, plan, name)?;
                self.guard(origin, sidecar, name, fresh)?;
                let (path, rel, target) = file_in(&dir, name, p.file_path.as_deref())?;
                self.read_check(key, origin, plan, &path, &rel, name)?;
                plan_patch(p, name, fresh, plan, path, &rel, &target)
            }
            ManageOp::WriteFile {
                file_path,
                file_content,
                ..
            } => {
                let (dir, fresh) = self.resolve(key, plan, name)?;
                self.guard(origin, sidecar, name, fresh)?;
                let (path, rel) = support_file_in(&dir, name, file_path, "write_file")?;
                self.read_check(key, origin, plan, &path, &rel, name)?;
                if file_content.chars().count() > validate::MAX_CONTENT_CHARS
                    || file_content.len() > validate::MAX_FILE_BYTES
                {
                    return Err(OpFail::new(
                        "file_content is over the limit (100,000 characters and 1 MiB).",
                    ));
                }
                scan(file_content)?;
                plan.claim(&path, &rel, "written or removed")?;
                plan.stage(path, Some(file_content.clone()));
                plan.record(
                    name,
                    OpResult::WriteFile {
                        name: name.to_string(),
                        file_path: rel,
                    },
                );
                Ok(())
            }
            ManageOp::RemoveFile { file_path, .. } => {
                let (dir, fresh) = self.resolve(key, plan, name)?;
                self.guard(origin, sidecar, name, fresh)?;
                let (path, rel) = support_file_in(&dir, name, file_path, "remove_file")?;
                self.read_check(key, origin, plan, &path, &rel, name)?;
                if plan.current_text(&path).is_none() {
                    return Err(OpFail {
                        available_files: Some(support_files(&dir)),
                        ..OpFail::new(format!("'{rel}' does not exist in skill '{name}'."))
                    });
                }
                plan.claim(&path, &rel, "written or removed")?;
                plan.stage(path, None);
                plan.record(
                    name,
                    OpResult::RemoveFile {
                        name: name.to_string(),
                        file_path: rel,
                    },
                );
                Ok(())
            }
            ManageOp::Delete { .. } => Err(OpFail::new(
                "delete must be the only operation in its batch.",
            )),
        }
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of one create operation plus the batch state it joins"
    )]
    fn plan_create(
        &self,
        key: &UserKey,
        origin: &WriteOrigin,
        name: &str,
        content: &str,
        category: Option<&str>,
        plan: &mut Plan,
        sidecar: &mut Sidecar,
    ) -> Result<(), OpFail> {
        validate::check_name(name, "skill name").map_err(OpFail::new)?;
        if let Some(c) = category {
            validate::check_name(c, "category").map_err(OpFail::new)?;
        }
        if plan.new_skills.contains_key(name) || self.find(key, name).is_some() {
            return Err(OpFail::new(format!(
                "A skill named '{name}' already exists; patch it instead of creating a duplicate."
            )));
        }
        validate::check_skill_md(content, name, validate::NEW_DESCRIPTION_CHARS)
            .map_err(|e| OpFail::new(format!("Invalid SKILL.md: {e}.")))?;
        scan(content)?;
        let root = self.personal_root(key);
        let dir = match category {
            Some(c) => root.join(c).join(name),
            None => root.join(name),
        };
        if fs::symlink_metadata(&dir).is_ok()
            && fs::read_dir(&dir)
                .map(|mut d| d.next().is_some())
                .unwrap_or(true)
        {
            return Err(OpFail::new(format!(
                "The directory for skill '{name}' already exists and is not empty."
            )));
        }
        let created_by = match origin {
            WriteOrigin::Foreground => CreatedBy::User,
            WriteOrigin::BackgroundReview(_) => CreatedBy::Agent,
        };
        sidecar.insert(name.to_string(), Record::new(created_by));
        let md = dir.join("SKILL.md");
        plan.destructive.insert(md.clone());
        plan.stage(md, Some(content.to_string()));
        plan.new_skills.insert(name.to_string(), dir);
        plan.record(
            name,
            OpResult::Create {
                name: name.to_string(),
                path: format!("{name}/SKILL.md"),
            },
        );
        Ok(())
    }
}

/// The file a patch changes: `SKILL.md` when `file_path` is absent, else a support file.
fn file_in(
    dir: &Path,
    name: &str,
    file_path: Option<&str>,
) -> Result<(PathBuf, String, FileTarget), OpFail> {
    let target = validate::check_file_path(name, file_path).map_err(OpFail::new)?;
    let (path, rel) = match &target {
        FileTarget::SkillMd => (dir.join("SKILL.md"), "SKILL.md".to_string()),
        FileTarget::Support(parts) => (
            durable_fs::contained_join(dir, parts)
                .map_err(|e| OpFail::new(format!("Invalid file_path: {e}.")))?,
            parts.join("/"),
        ),
    };
    Ok((path, rel, target))
}

/// The support file `write_file` / `remove_file` names (never `SKILL.md`).
fn support_file_in(
    dir: &Path,
    name: &str,
    file_path: &str,
    action: &str,
) -> Result<(PathBuf, String), OpFail> {
    if file_path.trim().is_empty() {
        return Err(OpFail::new(format!("{action} needs file_path.")));
    }
    let (path, rel, target) = file_in(dir, name, Some(file_path))?;
    if target == FileTarget::SkillMd {
        return Err(OpFail::new(
            "SKILL.md is changed with patch (old_string/new_string, or content for a full rewrite), never with write_file/remove_file.",
        ));
    }
    Ok((path, rel))
}

fn plan_patch(
    p: &Patch,
    name: &str,
    fresh: bool,
    plan: &mut Plan,
    path: PathBuf,
    rel: &str,
    target: &FileTarget,
) -> Result<(), OpFail> {
    let Some(current) = plan.current_text(&path) else {
        return Err(OpFail::new(format!(
            "'{rel}' does not exist in skill '{name}'."
        )));
    };
    let (next, result) = if let Some(content) = &p.content {
        if p.old_string.is_some() || p.new_string.is_some() {
            return Err(OpFail::new(
                "A full rewrite (content) cannot be combined with old_string/new_string.",
            ));
        }
        plan.claim(&path, rel, "rewritten")?;
        (
            content.clone(),
            OpResult::Rewritten {
                name: name.to_string(),
                file_path: rel.to_string(),
                rewrite: true,
            },
        )
    } else {
        let Some(old) = p.old_string.as_deref() else {
            return Err(OpFail::new(
                "patch needs old_string (a unique part of the current text) and new_string, or content for a full rewrite. View the file with skill_view first.",
            ));
        };
        let new = p.new_string.as_deref().unwrap_or("");
        match patch_matcher::apply(&current, old, new, p.replace_all) {
            Ok(r) => (
                r.content,
                OpResult::Patched {
                    name: name.to_string(),
                    file_path: rel.to_string(),
                    replacements: r.count,
                    strategy: r.strategy.name(),
                },
            ),
            Err(e) => {
                let file_preview = matches!(e, PatchError::NoMatch { .. })
                    .then(|| current.chars().take(500).collect());
                return Err(OpFail {
                    file_preview,
                    ..OpFail::new(e.to_string())
                });
            }
        }
    };
    if *target == FileTarget::SkillMd {
        let limit = if fresh {
            validate::NEW_DESCRIPTION_CHARS
        } else {
            validate::DESCRIPTION_CHARS
        };
        validate::check_skill_md(&next, name, limit)
            .map_err(|e| OpFail::new(format!("Patch would break SKILL.md structure: {e}.")))?;
    } else if next.chars().count() > validate::MAX_CONTENT_CHARS {
        return Err(OpFail::new(
            "The patched file would exceed 100,000 characters.",
        ));
    }
    scan(&next)?;
    plan.stage(path, Some(next));
    plan.record(name, result);
    Ok(())
}
