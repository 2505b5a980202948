//! Where a user's file lives, and the checks on the way there: user keys, no symlinks,
//! 0700 directories, 0600 database files.

use super::*;

/// Validate a user key and refuse internal users (spec §2.1: `system` and empty ids have no
/// personal history).
pub fn check_user_key(user: &UserKey) -> Result<()> {
    let k = user.as_str();
    let well_formed = k.len() == 32
        && k.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !well_formed {
        return Err(HistoryError::InvalidUser);
    }
    for internal in ["system", "System", "SYSTEM", ""] {
        if UserKey::for_user(&UserId(internal.to_owned())) == *user {
            return Err(HistoryError::InvalidUser);
        }
    }
    Ok(())
}

pub fn users_root(data_dir: &Path) -> PathBuf {
    data_dir
        .join("agent")
        .join("runtime")
        .join("history")
        .join("users")
}

pub fn db_path(data_dir: &Path, user: &UserKey) -> PathBuf {
    users_root(data_dir).join(user.as_str()).join("state.db")
}

/// Refuse symlinks; `Ok(false)` when the path does not exist.
pub(crate) fn check_not_symlink(path: &Path, want_dir: bool) -> Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(meta) => {
            let ok = if want_dir {
                meta.file_type().is_dir()
            } else {
                meta.file_type().is_file()
            };
            if meta.file_type().is_symlink() || !ok {
                return Err(HistoryError::UnsafePath(path.to_path_buf()));
            }
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err(path)(e)),
    }
}

pub(crate) fn chmod(path: &Path, mode: u32) -> Result<()> {
    // By path, never through a new fd: closing an fd would drop SQLite's POSIX locks.
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io_err(path))
}

/// Create the user directory (0700) and the database file (0600) if missing.
pub(crate) fn prepare_files(data_dir: &Path, user: &UserKey) -> Result<PathBuf> {
    let users = users_root(data_dir);
    let user_dir = users.join(user.as_str());
    let history = users
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| users.clone());
    for dir in [&history, &users, &user_dir] {
        if !check_not_symlink(dir, true)? {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_err(dir))?;
            check_not_symlink(dir, true)?;
        }
        chmod(dir, 0o700)?;
    }
    let db = user_dir.join("state.db");
    if !check_not_symlink(&db, false)? {
        // O_EXCL refuses a symlink planted between the check and the create.
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&db)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                check_not_symlink(&db, false)?;
            }
            Err(e) => return Err(io_err(&db)(e)),
        }
    }
    for side in ["state.db-wal", "state.db-shm"] {
        let p = user_dir.join(side);
        if fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(HistoryError::UnsafePath(p));
        }
    }
    Ok(db)
}

pub(crate) fn tighten_sidecars(db: &Path) -> Result<()> {
    chmod(db, 0o600)?;
    for suffix in ["-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        let p = PathBuf::from(p);
        if check_not_symlink(&p, false)? {
            chmod(&p, 0o600)?;
        }
    }
    Ok(())
}
