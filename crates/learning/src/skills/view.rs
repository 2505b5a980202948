//! Reading one skill file. A view records the content hash, which a background review's later
//! write must match (read-before-write).

use super::Skills;
use super::catalog::{SkillSource, sha256_hex, support_files};
use super::reply::SkillFile;
use super::validate::{self, FileTarget};
use crate::ActorKey;
use crate::{Error, Result, WriteOrigin, durable_fs};
use mpa_protocol::Actor;
use std::fs;

/// Larger files are refused rather than registering a truncated read.
const MAX_VIEW_BYTES: u64 = 512 * 1024;

impl Skills {
    /// `SKILL.md` of skill `name` (`file_path` `None`), or one support file of it.
    pub fn view(
        &self,
        actor: &Actor,
        origin: &WriteOrigin,
        name: &str,
        file_path: Option<&str>,
    ) -> Result<SkillFile> {
        let key = actor.user_key();
        let name = name.trim();
        if name.is_empty() || name.contains('/') || name.contains('\\') || name.starts_with('.') {
            return Err(Error::Invalid(format!("Invalid skill name '{name}'.")));
        }
        let Some(skill) = self.find(&key, name) else {
            return Err(Error::Invalid(format!(
                "Skill '{name}' not found. Use skills_list to see available skills."
            )));
        };
        let target = validate::check_file_path(name, file_path).map_err(Error::Invalid)?;
        let (path, rel) = match &target {
            FileTarget::SkillMd => (skill.dir.join("SKILL.md"), "SKILL.md".to_string()),
            FileTarget::Support(parts) => match durable_fs::contained_join(&skill.dir, parts) {
                Ok(p) => (p, parts.join("/")),
                Err(e) => return Err(Error::Invalid(format!("Invalid file_path: {e}."))),
            },
        };
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => m,
            _ => {
                return Err(Error::Invalid(format!(
                    "File '{rel}' not found in skill '{name}'."
                )));
            }
        };
        if meta.len() > MAX_VIEW_BYTES {
            return Err(Error::Invalid(format!(
                "File '{rel}' is {} bytes, over the 512 KiB view limit.",
                meta.len()
            )));
        }
        let bytes = fs::read(&path).map_err(|e| Error::io(format!("Cannot read '{rel}'"), e))?;
        let Ok(content) = String::from_utf8(bytes) else {
            return Err(Error::Invalid(format!("File '{rel}' is not UTF-8 text.")));
        };
        self.record_read(&key, origin, &path, sha256_hex(content.as_bytes()));
        let linked_files = (target == FileTarget::SkillMd).then(|| support_files(&skill.dir));
        Ok(SkillFile {
            success: true,
            name: name.to_string(),
            file_path: rel,
            content,
            editable: skill.source == SkillSource::Personal,
            source: skill.source,
            linked_files,
        })
    }
}
