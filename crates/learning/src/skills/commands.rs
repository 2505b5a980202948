//! `/skills restore|adopt|pin|unpin NAME` — the user's own text API for ownership, pins and the
//! archive. Parsed by the host from the user's latest message, never from tool arguments.

use super::Skills;
use super::catalog::SkillSource;
use super::ownership::{self, CreatedBy, Record};
use super::validate;
use crate::ActorKey;
use crate::durable_fs::MutationLock;
use mpa_protocol::Actor;

const USAGE: &str =
    "Usage: /skills restore NAME · /skills adopt NAME · /skills pin NAME · /skills unpin NAME";

impl Skills {
    /// Handle `/skills …` typed by the user. `None` when `text` is not a skills command.
    pub fn user_command(&self, actor: &Actor, text: &str) -> Option<String> {
        let mut words = text.split_whitespace();
        if words.next()? != "/skills" {
            return None;
        }
        let (Some(sub), Some(name), None) = (words.next(), words.next(), words.next()) else {
            return Some(USAGE.to_string());
        };
        if !matches!(sub, "restore" | "adopt" | "pin" | "unpin") {
            return Some(USAGE.to_string());
        }
        if let Err(e) = validate::check_name(name, "skill name") {
            return Some(e);
        }
        let key = actor.user_key();
        let _guard = match MutationLock::acquire(&self.learning_root(&key)) {
            Ok(g) => g,
            Err(e) => return Some(format!("Skills are busy ({e}); try again.")),
        };
        if sub == "restore" {
            return Some(match self.restore_archived(&key, name) {
                Ok(m) => m,
                Err(e) => e.to_string(),
            });
        }
        match self.find(&key, name) {
            None => return Some(format!("No personal skill named '{name}'.")),
            Some(s) if s.source == SkillSource::Public => {
                return Some(format!(
                    "'{name}' is a public skill; only personal skills can be adopted or pinned."
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
                format!("Background review may now maintain '{name}' (unless it is pinned).")
            }
            "pin" => {
                record.pinned = true;
                format!(
                    "Pinned '{name}': background review will not change it and it cannot be deleted."
                )
            }
            _ => {
                record.pinned = false;
                format!("Unpinned '{name}'.")
            }
        };
        Some(match ownership::save(&personal, &sidecar) {
            Ok(()) => msg,
            Err(e) => e.to_string(),
        })
    }
}
