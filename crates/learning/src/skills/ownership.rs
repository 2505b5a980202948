//! The host-written ownership sidecar `<personal-root>/.ownership.json`.

use crate::{Error, Result, durable_fs};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub const SIDECAR: &str = ".ownership.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CreatedBy {
    Agent,
    User,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub created_by: CreatedBy,
    #[serde(default)]
    pub pinned: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absorbed_into: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

impl Record {
    pub fn new(created_by: CreatedBy) -> Self {
        Self {
            created_by,
            pinned: false,
            absorbed_into: None,
            created_at: Some(chrono::Utc::now().to_rfc3339()),
        }
    }
}

pub type Sidecar = BTreeMap<String, Record>;

/// Load the sidecar; missing = empty, corrupt = error (never silently empty, which would
/// drop pins and ownership).
pub fn load(root: &Path) -> Result<Sidecar> {
    let path = root.join(SIDECAR);
    match durable_fs::read_optional(&path) {
        Ok(None) => Ok(Sidecar::new()),
        Ok(Some(text)) => serde_json::from_str(&text).map_err(|e| {
            Error::Invalid(format!(
                "the skill ownership file is corrupt ({e}); skills cannot be changed until it is repaired"
            ))
        }),
        Err(e) => Err(Error::io("cannot read the skill ownership file", e)),
    }
}

pub fn encode(sidecar: &Sidecar) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(sidecar)
        .map_err(|e| Error::Invalid(format!("cannot encode the skill ownership file: {e}")))
}

pub fn save(root: &Path, sidecar: &Sidecar) -> Result<()> {
    let bytes = encode(sidecar)?;
    durable_fs::atomic_write(&root.join(SIDECAR), &bytes)
        .map_err(|e| Error::io("cannot write the skill ownership file", e))
}
