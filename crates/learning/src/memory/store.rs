//! One memory file and its rules: which store, where it lives, its budget, its lock.

use super::Memory;
use super::entries::{join, parse};
use crate::ActorKey;
use crate::durable_fs::{self, MutationLock};
use crate::{Error, Result};
use mpa_protocol::Actor;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which file of a scope: environment notes or the user profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// `MEMORY.md`: facts about the environment.
    Memory,
    /// `USER.md`: who the user is and what they prefer.
    User,
}

impl Target {
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Memory => "memory",
            Target::User => "user",
        }
    }

    pub fn file_name(self) -> &'static str {
        match self {
            Target::Memory => "MEMORY.md",
            Target::User => "USER.md",
        }
    }
}

/// Whose file: the shared global `MEMORY.md` (admins write it) or the caller's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Global,
    User,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::User => "user",
        }
    }
}

/// One memory file and its rules.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    pub scope: Scope,
    pub target: Target,
    pub path: PathBuf,
    /// Directory whose `.mutation.lock` serialises writers.
    pub lock_root: PathBuf,
    pub limit: usize,
    /// Display path relative to the data directory.
    pub label: String,
}

impl Memory {
    pub(crate) fn store(&self, actor: &Actor, scope: Scope, target: Target) -> Store {
        let limit = match target {
            Target::Memory => self.cfg.memory_char_limit,
            Target::User => self.cfg.user_char_limit,
        };
        match scope {
            Scope::Global => Store {
                scope,
                target,
                path: self.memory_root().join(target.file_name()),
                lock_root: self.memory_root(),
                limit,
                label: format!("agent/memory/{}", target.file_name()),
            },
            Scope::User => {
                let key = actor.user_key();
                Store {
                    scope,
                    target,
                    path: self.user_root(&key).join(target.file_name()),
                    lock_root: self.user_root(&key),
                    limit,
                    label: format!("agent/memory/users/{key}/{}", target.file_name()),
                }
            }
        }
    }
}

impl Store {
    /// The raw text and its entries (missing file = empty; unreadable = error, never empty).
    pub(crate) fn read(&self) -> Result<(String, Vec<String>)> {
        let raw = durable_fs::read_optional(&self.path)
            .map_err(|e| Error::io(format!("cannot read {}", self.label), e))?
            .unwrap_or_default();
        let list = parse(&raw);
        Ok((raw, list))
    }

    pub(crate) fn write(&self, list: &[String]) -> Result<()> {
        let mut text = join(list);
        if !text.is_empty() {
            text.push('\n');
        }
        durable_fs::atomic_write(&self.path, text.as_bytes())
            .map_err(|e| Error::io(format!("cannot write {}", self.label), e))
    }

    /// Take the store's lock, then read the file under it (a writer always re-reads: another
    /// writer may have changed it since the caller last looked).
    pub(crate) fn lock_and_read(&self) -> Result<(MutationLock, String, Vec<String>)> {
        let guard = MutationLock::acquire(&self.lock_root)
            .map_err(|e| Error::lock("memory", format!("cannot write {}", self.label), e))?;
        let (raw, list) = self.read()?;
        Ok((guard, raw, list))
    }
}
