//! `/skills restore|adopt|pin|unpin NAME` and the `<personal_skills>` prompt block.

use crate::SkillHub;
use crate::catalog::{SkillSource, short_description};
use crate::durable_fs::MutationLock;
use crate::ownership::{self, CreatedBy, Record};
use crate::validate;
use mpa_protocol::Actor;

const USAGE: &str =
    "Usage: /skills restore NAME · /skills adopt NAME · /skills pin NAME · /skills unpin NAME";

impl SkillHub {
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
