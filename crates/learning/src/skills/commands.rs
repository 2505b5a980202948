//! `/skills restore|adopt|pin|unpin NAME` — the user's own text API for ownership, pins and the
//! archive. Parsed by the host from the user's latest message, never from tool arguments.

use super::Skills;
use super::catalog::SkillSource;
use super::ownership::{self, CreatedBy, Record};
use super::validate;
use crate::ActorKey;
use crate::durable_fs::MutationLock;
use mpa_protocol::{Actor, Lang};

const USAGE: &str =
    "Usage: /skills restore NAME · /skills adopt NAME · /skills pin NAME · /skills unpin NAME";
const USAGE_ZH: &str =
    "用法：/skills restore 名称 · /skills adopt 名称 · /skills pin 名称 · /skills unpin 名称";

impl Skills {
    /// Handle `/skills …` typed by the user, answered in `lang`. `None` when `text` is not a
    /// skills command.
    pub fn user_command(&self, actor: &Actor, text: &str, lang: Lang) -> Option<String> {
        let mut words = text.split_whitespace();
        if words.next()? != "/skills" {
            return None;
        }
        let usage = lang.pick(USAGE, USAGE_ZH);
        let (Some(sub), Some(name), None) = (words.next(), words.next(), words.next()) else {
            return Some(usage.to_string());
        };
        if !matches!(sub, "restore" | "adopt" | "pin" | "unpin") {
            return Some(usage.to_string());
        }
        if let Err(e) = validate::check_name(name, "skill name") {
            return Some(e);
        }
        let key = actor.user_key();
        let _guard = match MutationLock::acquire(&self.learning_root(&key)) {
            Ok(g) => g,
            Err(e) => {
                return Some(lang.pick(
                    format!("Skills are busy ({e}); try again."),
                    format!("技能正忙（{e}），请重试。"),
                ));
            }
        };
        if sub == "restore" {
            return Some(match self.restore_archived(&key, name, lang) {
                Ok(m) => m,
                Err(e) => e.to_string(),
            });
        }
        match self.find(&key, name) {
            None => {
                return Some(lang.pick(
                    format!("No personal skill named '{name}'."),
                    format!("没有名为 '{name}' 的个人技能。"),
                ));
            }
            Some(s) if s.source == SkillSource::Public => {
                return Some(lang.pick(
                    format!(
                        "'{name}' is a public skill; only personal skills can be adopted or pinned."
                    ),
                    format!("'{name}' 是公共技能；只有个人技能可以交给后台维护或固定。"),
                ));
            }
            Some(_) => {}
        }
        let personal = self.personal_root(&key);
        let mut sidecar = match ownership::load(&personal) {
            Ok(s) => s,
            Err(e) => return Some(e.to_string()),
        };
        let record = sidecar
            .entry(name.to_string())
            .or_insert_with(|| Record::new(CreatedBy::User));
        let msg = match sub {
            "adopt" => {
                record.created_by = CreatedBy::Agent;
                lang.pick(
                    format!("Background review may now maintain '{name}' (unless it is pinned)."),
                    format!("后台复盘现在可以维护 '{name}'（固定的除外）。"),
                )
            }
            "pin" => {
                record.pinned = true;
                lang.pick(
                    format!(
                        "Pinned '{name}': background review will not change it and it cannot be deleted."
                    ),
                    format!("已固定 '{name}'：后台复盘不会修改它，它也不能被删除。"),
                )
            }
            _ => {
                record.pinned = false;
                lang.pick(
                    format!("Unpinned '{name}'."),
                    format!("已取消固定 '{name}'。"),
                )
            }
        };
        Some(match ownership::save(&personal, &sidecar) {
            Ok(()) => msg,
            Err(e) => e.to_string(),
        })
    }
}

/// A personal skill's standing, as the user's own view shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Standing {
    pub pinned: bool,
    pub created_by: CreatedBy,
}

/// What `/skills` acts on, for the user's own view: each personal skill's pin and author (from
/// the ownership sidecar; `Err` when it cannot be read, as the commands refuse then too) and the
/// archive's entries (the names `/skills restore` takes, with their archive suffix if any).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OwnershipView {
    pub standing: std::collections::BTreeMap<String, Standing>,
    pub archived: Vec<String>,
}

impl Skills {
    pub fn ownership_view(&self, actor: &Actor) -> crate::Result<OwnershipView> {
        let personal = self.personal_root(&actor.user_key());
        let standing = ownership::load(&personal)?
            .into_iter()
            .map(|(name, r)| {
                (
                    name,
                    Standing {
                        pinned: r.pinned,
                        created_by: r.created_by,
                    },
                )
            })
            .collect();
        let mut archived: Vec<String> = std::fs::read_dir(personal.join(".archive"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        archived.sort();
        Ok(OwnershipView { standing, archived })
    }
}
