//! `skill_manage`: batch planning, journaled commit with rollback, delete/archive, recovery.

use crate::catalog::{SkillSource, sha256_hex, support_files};
use crate::durable_fs::{self, MutationLock};
use crate::ownership::{self, CreatedBy, Record, Sidecar};
use crate::patch_matcher::{self, PatchError};
use crate::threat;
use crate::validate::{self, FileTarget};
use crate::{Error, Result, SkillHub, WriteOrigin};
use mpa_protocol::{Actor, UserKey};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Test seam called after each journaled commit step (see [`SkillHub::with_commit_hook`]).
pub type CommitHook = Arc<dyn Fn(usize) + Send + Sync>;

const MAX_OPS: usize = 20;
const TXN_DIR: &str = ".skills-txn";
const ARCHIVE_OWNER: &str = ".archive-owner.json";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpArgs {
    action: String,
    name: String,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    old_string: Option<String>,
    #[serde(default)]
    new_string: Option<String>,
    #[serde(default)]
    replace_all: bool,
    #[serde(default)]
    file_path: Option<String>,
    #[serde(default)]
    file_content: Option<String>,
    #[serde(default)]
    absorbed_into: Option<String>,
}

/// A refusal of one operation, rendered as `Operation N: …`.
struct OpFail {
    error: String,
    extra: Map<String, Value>,
}

impl OpFail {
    fn new(error: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            extra: Map::new(),
        }
    }

    fn with(mut self, k: &str, v: Value) -> Self {
        self.extra.insert(k.into(), v);
        self
    }
}

/// Everything a batch will do, computed before any byte is written.
#[derive(Default)]
struct Plan {
    order: Vec<PathBuf>,
    staged: HashMap<PathBuf, Option<String>>,
    destructive: HashSet<PathBuf>,
    new_skills: HashMap<String, PathBuf>,
    results: Vec<Value>,
    skills: Vec<String>,
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
    fn claim(&mut self, path: &Path, rel: &str, done: &str) -> std::result::Result<(), OpFail> {
        if self.destructive.insert(path.to_path_buf()) {
            Ok(())
        } else {
            Err(OpFail::new(format!(
                "'{rel}' is already {done} earlier in this batch; one destructive change per file."
            )))
        }
    }

    /// Record a planned operation's result and the skill it touches.
    fn record(&mut self, name: &str, result: Value) {
        self.results.push(result);
        if !self.skills.iter().any(|s| s == name) {
            self.skills.push(name.to_string());
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct JournalEntry {
    path: PathBuf,
    existed: bool,
    backup: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    id: String,
    entries: Vec<JournalEntry>,
    /// Directories created by the batch, outermost first.
    new_dirs: Vec<PathBuf>,
}

#[derive(Debug, Serialize, Deserialize)]
struct ArchiveOwner {
    record: Option<Record>,
    absorbed_into: String,
    category: Option<String>,
    archived_at: String,
}

fn fail(msg: impl Into<String>) -> Value {
    json!({"success": false, "error": msg.into()})
}

fn io(context: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(context, e)
}

impl SkillHub {
    /// The `skill_manage` tool: `{operations: [...]}` (a lone op object is accepted too).
    pub fn skill_manage(&self, actor: &Actor, origin: &WriteOrigin, args: Value) -> Value {
        let ops = match parse_ops(&args) {
            Ok(o) => o,
            Err(e) => return fail(e),
        };
        if ops.iter().any(|o| o.action == "delete") && ops.len() > 1 {
            return fail("delete must be the only operation in its batch.");
        }
        if let WriteOrigin::BackgroundReview(t) = origin
            && t.is_cancelled()
        {
            return fail(Error::Cancelled.to_string());
        }
        let key = actor.user_key();
        let root = self.learning_root(&key);
        let _guard = match MutationLock::acquire(&root) {
            Ok(g) => g,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return fail(Error::Busy.to_string());
            }
            Err(e) => return fail(format!("cannot lock the skill store: {e}")),
        };
        let mut sidecar = match ownership::load(&self.personal_root(&key)) {
            Ok(s) => s,
            Err(e) => return fail(e.to_string()),
        };
        if ops[0].action == "delete" {
            return match self.delete(&key, origin, &ops[0], &mut sidecar) {
                Ok(v) => v,
                Err(f) => op_fail_body(1, f),
            };
        }
        let mut plan = Plan::default();
        for (i, op) in ops.iter().enumerate() {
            if let WriteOrigin::BackgroundReview(t) = origin
                && t.is_cancelled()
            {
                return fail(Error::Cancelled.to_string());
            }
            if let Err(f) = self.plan_op(&key, origin, op, &mut plan, &mut sidecar) {
                return op_fail_body(i + 1, f);
            }
        }
        match self.commit(&key, origin, &plan, &sidecar) {
            Ok(()) => json!({
                "success": true,
                "applied": ops.len(),
                "skills": plan.skills,
                "results": plan.results,
            }),
            Err(e) => fail(format!(
                "{e}. No files were changed (the batch was rolled back)."
            )),
        }
    }

    fn resolve(
        &self,
        key: &UserKey,
        plan: &Plan,
        name: &str,
    ) -> std::result::Result<(PathBuf, bool), OpFail> {
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
    fn guard(
        &self,
        origin: &WriteOrigin,
        sidecar: &Sidecar,
        name: &str,
        created_in_batch: bool,
    ) -> std::result::Result<(), OpFail> {
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

    /// Background read-before-write: the file on disk must hash to what `skill_view` saw in
    /// this review.
    fn read_check(
        &self,
        key: &UserKey,
        origin: &WriteOrigin,
        plan: &Plan,
        path: &Path,
        rel: &str,
        name: &str,
    ) -> std::result::Result<(), OpFail> {
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
        match self.read_mark(key, origin, path) {
            None => Err(OpFail::new(format!(
                "Read before write: '{rel}' of skill '{name}' has not been viewed in this review. {hint}"
            ))
            .with("_read_before_write_required", json!(true))),
            Some(h) if h != current => Err(OpFail::new(format!(
                "Read before write: '{rel}' of skill '{name}' changed after it was viewed. {hint}"
            ))
            .with("_read_before_write_required", json!(true))),
            Some(_) => Ok(()),
        }
    }

    fn current_text(plan: &Plan, path: &Path) -> Option<String> {
        match plan.staged.get(path) {
            Some(staged) => staged.clone(),
            None => fs::read_to_string(path).ok(),
        }
    }

    fn plan_op(
        &self,
        key: &UserKey,
        origin: &WriteOrigin,
        op: &OpArgs,
        plan: &mut Plan,
        sidecar: &mut Sidecar,
    ) -> std::result::Result<(), OpFail> {
        let name = op.name.trim();
        match op.action.as_str() {
            "create" => {
                validate::check_name(name, "skill name").map_err(OpFail::new)?;
                if let Some(c) = &op.category {
                    validate::check_name(c, "category").map_err(OpFail::new)?;
                }
                if plan.new_skills.contains_key(name) || self.find(key, name).is_some() {
                    return Err(OpFail::new(format!(
                        "A skill named '{name}' already exists; patch it instead of creating a duplicate."
                    )));
                }
                let content = op.content.clone().unwrap_or_default();
                validate::check_skill_md(&content, name, validate::NEW_DESCRIPTION_CHARS)
                    .map_err(|e| OpFail::new(format!("Invalid SKILL.md: {e}.")))?;
                scan(&content)?;
                let root = self.personal_root(key);
                let dir = match &op.category {
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
                plan.stage(md, Some(content));
                plan.new_skills.insert(name.to_string(), dir);
                plan.record(
                    name,
                    json!({"action": "create", "name": name, "path": format!("{name}/SKILL.md")}),
                );
                Ok(())
            }
            "patch" | "write_file" | "remove_file" => {
                let (dir, fresh) = self.resolve(key, plan, name)?;
                self.guard(origin, sidecar, name, fresh)?;
                let fp = if op.action == "write_file" || op.action == "remove_file" {
                    match op.file_path.as_deref() {
                        Some(f) if !f.trim().is_empty() => Some(f),
                        _ => return Err(OpFail::new(format!("{} needs file_path.", op.action))),
                    }
                } else {
                    op.file_path.as_deref()
                };
                let target = validate::check_file_path(name, fp).map_err(OpFail::new)?;
                let (path, rel) = match &target {
                    FileTarget::SkillMd => (dir.join("SKILL.md"), "SKILL.md".to_string()),
                    FileTarget::Support(parts) => (
                        durable_fs::contained_join(&dir, parts)
                            .map_err(|e| OpFail::new(format!("Invalid file_path: {e}.")))?,
                        parts.join("/"),
                    ),
                };
                if op.action != "patch" && target == FileTarget::SkillMd {
                    return Err(OpFail::new(
                        "SKILL.md is changed with patch (old_string/new_string, or content for a full rewrite), never with write_file/remove_file.",
                    ));
                }
                self.read_check(key, origin, plan, &path, &rel, name)?;
                match op.action.as_str() {
                    "patch" => self.plan_patch(op, name, fresh, plan, path, &rel, &target),
                    "write_file" => {
                        let content = op.file_content.clone().unwrap_or_default();
                        if content.chars().count() > validate::MAX_CONTENT_CHARS
                            || content.len() > validate::MAX_FILE_BYTES
                        {
                            return Err(OpFail::new(
                                "file_content is over the limit (100,000 characters and 1 MiB).",
                            ));
                        }
                        scan(&content)?;
                        plan.claim(&path, &rel, "written or removed")?;
                        plan.stage(path, Some(content));
                        plan.record(
                            name,
                            json!({"action": "write_file", "name": name, "file_path": rel}),
                        );
                        Ok(())
                    }
                    _ => {
                        if Self::current_text(plan, &path).is_none() {
                            return Err(OpFail::new(format!(
                                "'{rel}' does not exist in skill '{name}'."
                            ))
                            .with("available_files", json!(support_files(&dir))));
                        }
                        plan.claim(&path, &rel, "written or removed")?;
                        plan.stage(path, None);
                        plan.record(
                            name,
                            json!({"action": "remove_file", "name": name, "file_path": rel}),
                        );
                        Ok(())
                    }
                }
            }
            "delete" => Err(OpFail::new(
                "delete must be the only operation in its batch.",
            )),
            other => Err(OpFail::new(format!(
                "Unknown action '{other}'. Use create, patch, write_file, remove_file or delete."
            ))),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn plan_patch(
        &self,
        op: &OpArgs,
        name: &str,
        fresh: bool,
        plan: &mut Plan,
        path: PathBuf,
        rel: &str,
        target: &FileTarget,
    ) -> std::result::Result<(), OpFail> {
        let Some(current) = Self::current_text(plan, &path) else {
            return Err(OpFail::new(format!(
                "'{rel}' does not exist in skill '{name}'."
            )));
        };
        let (next, result) = if let Some(content) = &op.content {
            if op.old_string.is_some() || op.new_string.is_some() {
                return Err(OpFail::new(
                    "A full rewrite (content) cannot be combined with old_string/new_string.",
                ));
            }
            plan.claim(&path, rel, "rewritten")?;
            (
                content.clone(),
                json!({"action": "patch", "name": name, "file_path": rel, "rewrite": true}),
            )
        } else {
            let Some(old) = op.old_string.as_deref() else {
                return Err(OpFail::new(
                    "patch needs old_string (a unique part of the current text) and new_string, or content for a full rewrite. View the file with skill_view first.",
                ));
            };
            let new = op.new_string.as_deref().unwrap_or("");
            match patch_matcher::apply(&current, old, new, op.replace_all) {
                Ok(r) => {
                    let res = json!({
                        "action": "patch",
                        "name": name,
                        "file_path": rel,
                        "replacements": r.count,
                        "strategy": r.strategy.name(),
                    });
                    (r.content, res)
                }
                Err(e) => {
                    let mut f = OpFail::new(e.to_string());
                    if matches!(e, PatchError::NoMatch { .. }) {
                        f = f.with(
                            "file_preview",
                            json!(current.chars().take(500).collect::<String>()),
                        );
                    }
                    return Err(f);
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

    fn hook(&self, step: usize) {
        if let Some(h) = &self.commit_hook {
            h(step);
        }
    }

    /// Journaled commit: back up, write the manifest, apply, drop the journal.
    fn commit(
        &self,
        key: &UserKey,
        origin: &WriteOrigin,
        plan: &Plan,
        sidecar: &Sidecar,
    ) -> Result<()> {
        let personal = self.personal_root(key);
        let mut writes: Vec<(PathBuf, Option<Vec<u8>>)> = plan
            .order
            .iter()
            .map(|p| {
                (
                    p.clone(),
                    plan.staged
                        .get(p)
                        .cloned()
                        .flatten()
                        .map(String::into_bytes),
                )
            })
            .collect();
        writes.push((
            personal.join(ownership::SIDECAR),
            Some(ownership::encode(sidecar)?),
        ));

        let id = uuid::Uuid::new_v4().simple().to_string();
        let txn = self.learning_root(key).join(TXN_DIR).join(&id);
        durable_fs::ensure_dir(&txn).map_err(io("cannot create the batch journal"))?;
        let mut entries = Vec::new();
        for (n, (path, _)) in writes.iter().enumerate() {
            let existed = fs::symlink_metadata(path).is_ok_and(|m| m.is_file());
            let backup = if existed {
                let name = format!("orig-{n}");
                let bytes = fs::read(path).map_err(io("cannot back up a skill file"))?;
                durable_fs::atomic_write(&txn.join(&name), &bytes)
                    .map_err(io("cannot back up a skill file"))?;
                Some(name)
            } else {
                None
            };
            entries.push(JournalEntry {
                path: path.clone(),
                existed,
                backup,
            });
        }
        let mut new_dirs: Vec<PathBuf> = Vec::new();
        for (path, _) in &writes {
            let mut missing = Vec::new();
            let mut cur = path.parent();
            while let Some(d) = cur {
                if d.exists() || !d.starts_with(&personal) {
                    break;
                }
                missing.push(d.to_path_buf());
                cur = d.parent();
            }
            for d in missing.into_iter().rev() {
                if !new_dirs.contains(&d) {
                    new_dirs.push(d);
                }
            }
        }
        let manifest = Manifest {
            id: id.clone(),
            entries,
            new_dirs,
        };
        let bytes = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| Error::Invalid(format!("cannot encode the batch journal: {e}")))?;
        durable_fs::atomic_write(&txn.join("manifest.json"), &bytes)
            .map_err(io("cannot write the batch journal"))?;

        let applied = (|| -> Result<()> {
            for (step, (path, content)) in writes.iter().enumerate() {
                if let WriteOrigin::BackgroundReview(t) = origin
                    && t.is_cancelled()
                {
                    return Err(Error::Cancelled);
                }
                match content {
                    Some(bytes) => durable_fs::atomic_write(path, bytes)
                        .map_err(io("cannot write a skill file"))?,
                    None => {
                        fs::remove_file(path).map_err(io("cannot remove a skill file"))?;
                        if let Some(parent) = path.parent() {
                            // An emptied support directory goes too (non-empty ones stay).
                            let _ = fs::remove_dir(parent);
                        }
                    }
                }
                self.hook(step + 1);
            }
            Ok(())
        })();
        match applied {
            Ok(()) => {
                let _ = fs::remove_dir_all(&txn);
                Ok(())
            }
            Err(e) => {
                rollback(&txn, &manifest);
                Err(e)
            }
        }
    }

    fn delete(
        &self,
        key: &UserKey,
        origin: &WriteOrigin,
        op: &OpArgs,
        sidecar: &mut Sidecar,
    ) -> std::result::Result<Value, OpFail> {
        let name = op.name.trim();
        let plan = Plan::default();
        let (dir, _) = self.resolve(key, &plan, name)?;
        if sidecar.get(name).is_some_and(|r| r.pinned) {
            return Err(OpFail::new(format!(
                "Skill '{name}' is pinned and cannot be deleted; the user can unpin it with /skills unpin {name}."
            )));
        }
        let personal = self.personal_root(key);
        let category = dir
            .parent()
            .filter(|p| *p != personal)
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        match origin {
            WriteOrigin::Foreground => {
                let quarantine =
                    personal.join(format!(".deleted-{}", uuid::Uuid::new_v4().simple()));
                fs::rename(&dir, &quarantine)
                    .map_err(|e| OpFail::new(format!("Cannot delete skill '{name}': {e}")))?;
                self.hook(1);
                let record = sidecar.remove(name);
                if let Err(e) = ownership::save(&personal, sidecar) {
                    let _ = fs::rename(&quarantine, &dir);
                    if let Some(r) = record {
                        sidecar.insert(name.to_string(), r);
                    }
                    return Err(OpFail::new(format!("Cannot delete skill '{name}': {e}")));
                }
                let cleanup_pending = fs::remove_dir_all(&quarantine).is_err();
                remove_empty_category(&dir, &personal);
                Ok(json!({
                    "success": true,
                    "applied": 1,
                    "skills": [name],
                    "results": [{"action": "delete", "name": name}],
                    "cleanup_pending": cleanup_pending,
                }))
            }
            WriteOrigin::BackgroundReview(_) => {
                self.guard(origin, sidecar, name, false)?;
                let md = dir.join("SKILL.md");
                self.read_check(key, origin, &plan, &md, "SKILL.md", name)?;
                let target = op.absorbed_into.as_deref().map(str::trim).unwrap_or("");
                if target.is_empty() {
                    return Err(OpFail::new(
                        "A background delete needs absorbed_into naming the skill that now holds this content.",
                    ));
                }
                if target == name {
                    return Err(OpFail::new("absorbed_into must name a different skill."));
                }
                if self.find(key, target).is_none() {
                    return Err(OpFail::new(format!(
                        "absorbed_into names '{target}', which does not exist."
                    )));
                }
                let archive_root = personal.join(".archive");
                durable_fs::ensure_dir(&archive_root)
                    .map_err(|e| OpFail::new(format!("Cannot archive skill '{name}': {e}")))?;
                let mut dest = archive_root.join(name);
                if fs::symlink_metadata(&dest).is_ok() {
                    dest = archive_root.join(format!(
                        "{name}-{}",
                        chrono::Utc::now().format("%Y%m%d%H%M%S")
                    ));
                }
                if fs::symlink_metadata(&dest).is_ok() {
                    return Err(OpFail::new(format!(
                        "Cannot archive skill '{name}': an archive of the same second exists; retry later."
                    )));
                }
                fs::rename(&dir, &dest)
                    .map_err(|e| OpFail::new(format!("Cannot archive skill '{name}': {e}")))?;
                let record = sidecar.remove(name);
                let owner = ArchiveOwner {
                    record: record.clone(),
                    absorbed_into: target.to_string(),
                    category,
                    archived_at: chrono::Utc::now().to_rfc3339(),
                };
                let saved = serde_json::to_vec_pretty(&owner)
                    .map_err(|e| Error::Invalid(e.to_string()))
                    .and_then(|b| {
                        durable_fs::atomic_write(&dest.join(ARCHIVE_OWNER), &b)
                            .map_err(io("cannot write the archive record"))
                    })
                    .and_then(|()| ownership::save(&personal, sidecar));
                if let Err(e) = saved {
                    let _ = fs::remove_file(dest.join(ARCHIVE_OWNER));
                    let _ = fs::rename(&dest, &dir);
                    if let Some(r) = record {
                        sidecar.insert(name.to_string(), r);
                    }
                    return Err(OpFail::new(format!("Cannot archive skill '{name}': {e}")));
                }
                remove_empty_category(&dir, &personal);
                Ok(json!({
                    "success": true,
                    "applied": 1,
                    "skills": [name],
                    "results": [{"action": "delete", "name": name, "archived": true, "absorbed_into": target}],
                }))
            }
        }
    }

    /// Restore an archived skill (`/skills restore`). Caller holds the lock.
    pub(crate) fn restore_archived(&self, key: &UserKey, name: &str) -> Result<String> {
        validate::check_name(name, "skill name").map_err(Error::Invalid)?;
        if self.find(key, name).is_some() {
            return Err(Error::Refused(format!(
                "A skill named '{name}' already exists (personal or public); nothing was restored."
            )));
        }
        let personal = self.personal_root(key);
        let archive_root = personal.join(".archive");
        let exact = archive_root.join(name);
        let src = if fs::symlink_metadata(&exact).is_ok_and(|m| m.is_dir()) {
            exact
        } else {
            let prefix = format!("{name}-");
            let mut candidates: Vec<String> = fs::read_dir(&archive_root)
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| {
                            n.strip_prefix(&prefix).is_some_and(|ts| {
                                ts.len() == 14 && ts.bytes().all(|b| b.is_ascii_digit())
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            candidates.sort();
            match candidates.pop() {
                Some(n) => archive_root.join(n),
                None => {
                    return Err(Error::Invalid(format!("No archived skill named '{name}'.")));
                }
            }
        };
        let owner: Option<ArchiveOwner> = fs::read(src.join(ARCHIVE_OWNER))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let category = owner.as_ref().and_then(|o| o.category.clone());
        let dest = match &category {
            Some(c) if validate::check_name(c, "category").is_ok() => personal.join(c).join(name),
            _ => personal.join(name),
        };
        if fs::symlink_metadata(&dest).is_ok() {
            return Err(Error::Refused(format!(
                "The destination directory for '{name}' already exists; nothing was restored."
            )));
        }
        let md = fs::read_to_string(src.join("SKILL.md"))
            .map_err(io("the archived SKILL.md is unreadable"))?;
        validate::check_skill_md(&md, name, validate::DESCRIPTION_CHARS)
            .map_err(|e| Error::Invalid(format!("The archived SKILL.md is invalid: {e}")))?;
        let mut sidecar = ownership::load(&personal)?;
        if let Some(parent) = dest.parent() {
            durable_fs::ensure_dir(parent).map_err(io("cannot restore the skill"))?;
        }
        fs::rename(&src, &dest).map_err(io("cannot restore the skill"))?;
        let _ = fs::remove_file(dest.join(ARCHIVE_OWNER));
        let mut record = owner
            .and_then(|o| o.record)
            .unwrap_or_else(|| Record::new(CreatedBy::Agent));
        record.absorbed_into = None;
        sidecar.insert(name.to_string(), record);
        ownership::save(&personal, &sidecar)?;
        Ok(format!("Restored skill '{name}'."))
    }

    /// At host start: roll back interrupted batches, remove quarantine directories and stale
    /// temp files, drop ownership records of skills that no longer exist. Returns a report.
    pub fn recover_on_start(&self) -> Vec<String> {
        let mut report = Vec::new();
        let Ok(rd) = fs::read_dir(self.users_root()) else {
            return report;
        };
        for user in rd.filter_map(|e| e.ok()) {
            let uname = user.file_name().to_string_lossy().into_owned();
            let lroot = user.path();
            // A crashed writer's flock died with it; a live one (another host process) wins.
            let _guard = match MutationLock::acquire(&lroot) {
                Ok(g) => g,
                Err(e) => {
                    report.push(format!(
                        "user {uname}: skipped recovery, store is locked ({e})"
                    ));
                    continue;
                }
            };
            let txn_root = lroot.join(TXN_DIR);
            if let Ok(txns) = fs::read_dir(&txn_root) {
                for t in txns.filter_map(|e| e.ok()) {
                    let dir = t.path();
                    let manifest: Option<Manifest> = fs::read(dir.join("manifest.json"))
                        .ok()
                        .and_then(|b| serde_json::from_slice(&b).ok());
                    match manifest {
                        Some(m) => {
                            rollback(&dir, &m);
                            report.push(format!(
                                "user {uname}: rolled back interrupted skill batch {} ({} file(s) restored to their previous state)",
                                m.id,
                                m.entries.len()
                            ));
                        }
                        None => {
                            let _ = fs::remove_dir_all(&dir);
                            report.push(format!(
                                "user {uname}: removed an unfinished skill batch journal (no file had been changed)"
                            ));
                        }
                    }
                }
            }
            let personal = lroot.join("skills");
            if let Ok(items) = fs::read_dir(&personal) {
                for e in items.filter_map(|e| e.ok()) {
                    let n = e.file_name().to_string_lossy().into_owned();
                    if n.starts_with(".deleted-") {
                        match fs::remove_dir_all(e.path()) {
                            Ok(()) => report.push(format!(
                                "user {uname}: removed quarantine directory {n} left by an interrupted delete"
                            )),
                            Err(err) => report.push(format!(
                                "user {uname}: quarantine directory {n} could not be removed: {err}"
                            )),
                        }
                    }
                }
            }
            let removed = remove_temp_files(&personal, 0);
            if removed > 0 {
                report.push(format!(
                    "user {uname}: removed {removed} stale temporary file(s)"
                ));
            }
            if let Ok(mut sidecar) = ownership::load(&personal) {
                let key_dirs = crate::catalog::personal_names(&personal);
                let before = sidecar.len();
                sidecar.retain(|name, _| key_dirs.contains(name));
                if sidecar.len() != before && ownership::save(&personal, &sidecar).is_ok() {
                    report.push(format!(
                        "user {uname}: dropped {} ownership record(s) of skills that no longer exist",
                        before - sidecar.len()
                    ));
                }
            }
        }
        report
    }
}

fn remove_empty_category(skill_dir: &Path, personal: &Path) {
    if let Some(parent) = skill_dir.parent()
        && parent != personal
    {
        let _ = fs::remove_dir(parent);
    }
}

fn remove_temp_files(dir: &Path, depth: usize) -> usize {
    if depth > 6 {
        return 0;
    }
    let Ok(rd) = fs::read_dir(dir) else { return 0 };
    let mut n = 0;
    for e in rd.filter_map(|e| e.ok()) {
        let Ok(t) = e.file_type() else { continue };
        let name = e.file_name().to_string_lossy().into_owned();
        if t.is_dir() && !t.is_symlink() {
            n += remove_temp_files(&e.path(), depth + 1);
        } else if t.is_file()
            && name.starts_with('.')
            && name.contains(".tmp-")
            && fs::remove_file(e.path()).is_ok()
        {
            n += 1;
        }
    }
    n
}

/// Restore every journaled path in reverse order, remove directories the batch created,
/// then drop the journal. Each restore is itself an atomic write.
fn rollback(txn: &Path, m: &Manifest) {
    for e in m.entries.iter().rev() {
        match (&e.backup, e.existed) {
            (Some(b), true) => {
                if let Ok(bytes) = fs::read(txn.join(b)) {
                    let _ = durable_fs::atomic_write(&e.path, &bytes);
                }
            }
            _ => {
                let _ = fs::remove_file(&e.path);
            }
        }
    }
    for d in m.new_dirs.iter().rev() {
        let _ = fs::remove_dir(d);
    }
    let _ = fs::remove_dir_all(txn);
}

fn scan(text: &str) -> std::result::Result<(), OpFail> {
    match threat::first_block(text) {
        Some(f) => Err(OpFail::new(f.block_message())),
        None => Ok(()),
    }
}

fn op_fail_body(n: usize, f: OpFail) -> Value {
    let mut obj = Map::new();
    obj.insert("success".into(), json!(false));
    obj.insert(
        "error".into(),
        json!(format!(
            "Operation {n}: {} No operations were applied.",
            f.error
        )),
    );
    obj.insert("operation".into(), json!(n));
    obj.extend(f.extra);
    Value::Object(obj)
}

fn parse_ops(args: &Value) -> std::result::Result<Vec<OpArgs>, String> {
    let Some(obj) = args.as_object() else {
        return Err("Arguments must be a JSON object.".into());
    };
    let items: Vec<Value> = match obj.get("operations") {
        Some(Value::Array(a)) => {
            if obj.len() > 1 {
                return Err("Pass only operations at the top level.".into());
            }
            a.clone()
        }
        Some(_) => return Err("operations must be an array.".into()),
        None if obj.contains_key("action") => vec![args.clone()],
        None => return Err("operations is required: [{action, name, ...}].".into()),
    };
    if items.is_empty() || items.len() > MAX_OPS {
        return Err(format!(
            "operations must hold 1 to {MAX_OPS} items (got {}).",
            items.len()
        ));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let op: OpArgs = serde_json::from_value(v)
                .map_err(|e| format!("Operation {}: invalid operation: {e}.", i + 1))?;
            for (field, value) in [
                ("content", &op.content),
                ("old_string", &op.old_string),
                ("new_string", &op.new_string),
                ("file_content", &op.file_content),
            ] {
                if value
                    .as_ref()
                    .is_some_and(|s| s.chars().count() > validate::MAX_CONTENT_CHARS)
                {
                    return Err(format!(
                        "Operation {}: {field} is longer than {} characters.",
                        i + 1,
                        validate::MAX_CONTENT_CHARS
                    ));
                }
            }
            Ok(op)
        })
        .collect()
}
