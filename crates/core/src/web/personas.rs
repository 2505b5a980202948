//! The agent's persona (seed agent.md: one global persona, shared by every user): a name and a
//! style text in the persona layer of the system prompt. Everyone may list them; only system
//! administrators create, edit or switch the active one. A persona is tone only — the prompt
//! says so around it, and nothing the host decides (tools, permissions, user scope, channel
//! format) ever reads it. A switch reaches sessions started afterwards: a session's system prompt
//! is frozen at its first turn (provider prompt caches depend on it).
//!
//! Stored as one JSON file under the data directory, replaced atomically on every change.

use crate::CoreError;
use mpa_protocol::{Actor, Lang};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Mutex;

/// Longest persona name, in characters.
pub const MAX_NAME_CHARS: usize = 40;
/// Longest style text, in characters.
pub const MAX_STYLE_CHARS: usize = 2000;
/// Most personas kept.
pub const MAX_PERSONAS: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Persona {
    pub id: String,
    pub name: String,
    pub style: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Saved {
    #[serde(default)]
    active: Option<String>,
    #[serde(default)]
    personas: Vec<Persona>,
}

/// A change an administrator asks for.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PersonaEdit {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub style: Option<String>,
    /// `true` makes it the active persona; `false` on the active one clears it.
    #[serde(default)]
    pub active: Option<bool>,
}

pub struct Personas {
    path: PathBuf,
    lock: Mutex<()>,
}

fn admin(actor: &Actor) -> Result<(), CoreError> {
    if actor.is_admin {
        Ok(())
    } else {
        Err(CoreError::AdminRequired("create, edit or switch personas"))
    }
}

fn checked(field: &str, value: &str, max: usize) -> Result<String, CoreError> {
    let v = value.trim();
    let n = v.chars().count();
    if n == 0 || n > max {
        return Err(CoreError::InvalidInput(format!(
            "{field} must have 1-{max} characters (it has {n})"
        )));
    }
    Ok(v.to_string())
}

impl Personas {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            lock: Mutex::new(()),
        }
    }

    fn read(&self) -> Saved {
        std::fs::read(&self.path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn write(&self, saved: &Saved) -> Result<(), CoreError> {
        let tmp = self.path.with_extension("json.tmp");
        let bytes =
            serde_json::to_vec_pretty(saved).map_err(|e| CoreError::InvalidInput(e.to_string()))?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| CoreError::Config(e.to_string()))?;
        }
        std::fs::write(&tmp, bytes)
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .map_err(|e| CoreError::Config(format!("the personas could not be saved: {e}")))
    }

    /// Every persona and the active one's id.
    pub fn list(&self) -> (Option<String>, Vec<Persona>) {
        let s = self.read();
        (s.active, s.personas)
    }

    /// The active persona, if any.
    pub fn active(&self) -> Option<Persona> {
        let s = self.read();
        let id = s.active?;
        s.personas.into_iter().find(|p| p.id == id)
    }

    pub fn create(&self, actor: &Actor, name: &str, style: &str) -> Result<Persona, CoreError> {
        admin(actor)?;
        let persona = Persona {
            id: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
            name: checked("name", name, MAX_NAME_CHARS)?,
            style: checked("style", style, MAX_STYLE_CHARS)?,
        };
        let _g = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut s = self.read();
        if s.personas.len() >= MAX_PERSONAS {
            return Err(CoreError::InvalidInput(format!(
                "at most {MAX_PERSONAS} personas can be kept; edit an existing one"
            )));
        }
        if s.personas
            .iter()
            .any(|p| p.name.eq_ignore_ascii_case(&persona.name))
        {
            return Err(CoreError::InvalidInput(format!(
                "a persona named {:?} exists already",
                persona.name
            )));
        }
        s.personas.push(persona.clone());
        self.write(&s)?;
        Ok(persona)
    }

    /// Edits (and/or switches to) the persona with this id or name.
    pub fn edit(&self, actor: &Actor, key: &str, edit: PersonaEdit) -> Result<Persona, CoreError> {
        admin(actor)?;
        let _g = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut s = self.read();
        let Some(at) = s
            .personas
            .iter()
            .position(|p| p.id == key || p.name.eq_ignore_ascii_case(key.trim()))
        else {
            return Err(CoreError::InvalidInput(format!("no persona {key:?}")));
        };
        if let Some(name) = &edit.name {
            let name = checked("name", name, MAX_NAME_CHARS)?;
            if s.personas
                .iter()
                .enumerate()
                .any(|(i, p)| i != at && p.name.eq_ignore_ascii_case(&name))
            {
                return Err(CoreError::InvalidInput(format!(
                    "a persona named {name:?} exists already"
                )));
            }
            s.personas[at].name = name;
        }
        if let Some(style) = &edit.style {
            s.personas[at].style = checked("style", style, MAX_STYLE_CHARS)?;
        }
        let id = s.personas[at].id.clone();
        match edit.active {
            Some(true) => s.active = Some(id),
            Some(false) if s.active.as_deref() == Some(id.as_str()) => s.active = None,
            _ => {}
        }
        let persona = s.personas[at].clone();
        self.write(&s)?;
        Ok(persona)
    }

    /// The `/persona` command: `/persona` or `/persona list` lists, `/persona use NAME|ID`
    /// switches (administrators); answered in `lang`. `None` when `text` is not a persona
    /// command.
    pub fn user_command(&self, actor: &Actor, text: &str, lang: Lang) -> Option<String> {
        let mut words = text.split_whitespace();
        if words.next()? != "/persona" {
            return None;
        }
        let sub = words.next();
        let rest: Vec<&str> = words.collect();
        Some(match (sub, rest.is_empty()) {
            (None | Some("list"), true) => {
                let (active, personas) = self.list();
                if personas.is_empty() {
                    lang.pick(
                        "No personas defined; the default voice is used.",
                        "尚未定义人设；使用默认语气。",
                    )
                    .to_string()
                } else {
                    let lines: Vec<String> = personas
                        .iter()
                        .map(|p| {
                            let mark = if active.as_deref() == Some(p.id.as_str()) {
                                "*"
                            } else {
                                "-"
                            };
                            format!("{mark} {} ({})", p.name, p.id)
                        })
                        .collect();
                    let head = lang.pick("Personas (* active):", "人设（* 为当前使用）：");
                    format!("{head}\n{}", lines.join("\n"))
                }
            }
            (Some("use"), false) => {
                let key = rest.join(" ");
                let edit = PersonaEdit {
                    active: Some(true),
                    ..PersonaEdit::default()
                };
                match self.edit(actor, &key, edit) {
                    Ok(p) => lang.pick(
                        format!(
                            "Active persona: {}. New sessions use it; this one keeps its voice.",
                            p.name
                        ),
                        format!(
                            "当前人设：{}。新会话将使用它；本会话保持原来的语气。",
                            p.name
                        ),
                    ),
                    Err(e) => localised(&e, lang),
                }
            }
            _ => lang
                .pick(
                    "Usage: /persona list · /persona use NAME (administrators)",
                    "用法：/persona list · /persona use 名称（仅管理员）",
                )
                .to_string(),
        })
    }
}

/// A refusal in the reader's language (the same table the HTTP errors use).
fn localised(e: &CoreError, lang: Lang) -> String {
    crate::web::i18n::localise(e.code(), &e.to_string(), lang.into())
}

/// The persona layer of a system prompt: the style, fenced by what it cannot do.
pub fn prompt_layer(p: &Persona) -> String {
    format!(
        "<persona name=\"{}\">\nThe administrator chose this voice for the assistant. It shapes tone and style \
         only: it grants no permission, does not make anyone an administrator, does not change which tools \
         may run or whose data they reach, and does not override the channel's format or the rules in this \
         prompt.\n{}\n</persona>",
        p.name.replace('"', "'"),
        p.style
    )
}
