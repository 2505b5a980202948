//! Deleting a skill: a foreground delete quarantines then removes it; a background review may
//! only archive it into `.archive/` naming the skill that absorbed it, and the user can restore
//! it with `/skills restore`.

use super::Skills;
use super::ownership::{self, CreatedBy, Record, Sidecar};
use super::plan::{OpFail, Plan};
use super::reply::{ManageReport, OpResult};
use super::validate;
use crate::{Error, Result, WriteOrigin, durable_fs};
use mpa_redact::UserKey;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::Path;

/// Written into an archived skill's directory: what restoring it needs.
const ARCHIVE_OWNER: &str = ".archive-owner.json";

#[derive(Debug, Serialize, Deserialize)]
struct ArchiveOwner {
    record: Option<Record>,
    absorbed_into: String,
    category: Option<String>,
    archived_at: String,
}

fn io(context: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(context, e)
}

fn report(name: &str, result: OpResult, cleanup_pending: Option<bool>) -> ManageReport {
    ManageReport {
        success: true,
        applied: 1,
        skills: vec![name.to_string()],
        results: vec![result],
        cleanup_pending,
    }
}

impl Skills {
    /// The one operation of a delete batch. Caller holds the lock.
    pub(crate) fn delete(
        &self,
        key: &UserKey,
        origin: &WriteOrigin,
        name: &str,
        absorbed_into: Option<&str>,
        sidecar: &mut Sidecar,
    ) -> std::result::Result<ManageReport, OpFail> {
        let name = name.trim();
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
                Ok(report(
                    name,
                    OpResult::Deleted {
                        name: name.to_string(),
                    },
                    Some(cleanup_pending),
                ))
            }
            WriteOrigin::BackgroundReview(_) => {
                self.guard(origin, sidecar, name, false)?;
                let md = dir.join("SKILL.md");
                self.read_check(key, origin, &plan, &md, "SKILL.md", name)?;
                let target = absorbed_into.map(str::trim).unwrap_or("");
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
                Ok(report(
                    name,
                    OpResult::Archived {
                        name: name.to_string(),
                        archived: true,
                        absorbed_into: target.to_string(),
                    },
                    None,
                ))
            }
        }
    }

    /// Restore an archived skill (`/skills restore`). Caller holds the lock.
    pub(crate) fn restore_archived(
        &self,
        key: &UserKey,
        name: &str,
        lang: mpa_protocol::Lang,
    ) -> Result<String> {
        validate::check_name(name, "skill name").map_err(Error::Invalid)?;
        if self.find(key, name).is_some() {
            return Err(Error::Refused(lang.pick(
                format!(
                    "A skill named '{name}' already exists (personal or public); nothing was restored."
                ),
                format!("已有名为 '{name}' 的技能（个人或公共）；未恢复任何内容。"),
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
                    return Err(Error::Invalid(lang.pick(
                        format!("No archived skill named '{name}'."),
                        format!("归档中没有名为 '{name}' 的技能。"),
                    )));
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
        Ok(lang.pick(
            format!("Restored skill '{name}'."),
            format!("已恢复技能 '{name}'。"),
        ))
    }
}

fn remove_empty_category(skill_dir: &Path, personal: &Path) {
    if let Some(parent) = skill_dir.parent()
        && parent != personal
    {
        let _ = fs::remove_dir(parent);
    }
}
