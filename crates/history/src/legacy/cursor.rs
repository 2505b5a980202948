//! Resume cursors: one JSON file per import (last source row id per source), saved atomically
//! after each appended page, and whether any import is still unfinished.

use super::*;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct CursorFile {
    pub(crate) version: u32,
    /// False from the start of a run until every source of that run is drained.
    pub(crate) complete: bool,
    pub(crate) updated_at: String,
    #[serde(default)]
    pub(crate) sources: BTreeMap<String, SourceCursor>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct SourceCursor {
    pub(crate) last_id: i64,
    pub(crate) complete: bool,
}

pub(crate) fn history_root(data_dir: &Path) -> PathBuf {
    data_dir.join("agent").join("runtime").join("history")
}

pub(crate) fn load_cursor(path: &Path) -> Result<CursorFile> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            HistoryError::InvalidInput(format!(
                "import cursor {} is unreadable ({e}); delete it to restart the import \
                 (re-importing is idempotent)",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(CursorFile {
            version: 1,
            ..CursorFile::default()
        }),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// Write-to-temp, fsync, rename: a crash leaves either the old or the new cursor, never a torn one.
pub(crate) fn save_cursor(path: &Path, cursor: &mut CursorFile) -> Result<()> {
    use std::io::Write as _;
    cursor.version = 1;
    cursor.updated_at = chrono::Utc::now().to_rfc3339();
    let bytes = serde_json::to_vec_pretty(cursor)
        .map_err(|e| HistoryError::InvalidInput(format!("cannot encode import cursor: {e}")))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    ensure_private_dir(dir)?;
    let tmp = path.with_extension("json.tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o600);
    }
    let mut f = opts.open(&tmp).map_err(io_err(&tmp))?;
    f.write_all(&bytes).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io_err(path))?;
    Ok(())
}

pub(crate) fn ensure_private_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        b.mode(0o700);
    }
    b.create(dir).map_err(io_err(dir))
}

/// `{complete:false, note}` while an import that can affect `user` is unfinished (a cursor file
/// present and not complete, or unreadable); `None` when there is nothing to report.
pub fn legacy_import_pending(data_dir: &Path, user: &UserKey) -> bool {
    let mut files = vec![history_root(data_dir).join(MOVIEPILOT_CURSOR)];
    let user_dir = store::users_root(data_dir).join(user.as_str());
    if let Ok(entries) = std::fs::read_dir(&user_dir) {
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("import-") && name.ends_with("-cursor.json") {
                files.push(e.path());
            }
        }
    }
    files.iter().filter(|p| p.is_file()).any(|p| {
        std::fs::read(p)
            .ok()
            .and_then(|b| serde_json::from_slice::<CursorFile>(&b).ok())
            .is_none_or(|c| !c.complete)
    })
}
