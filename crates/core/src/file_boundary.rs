//! The agent's file boundary: which local files a caller's tools may read (`read_file`,
//! `view_image(file_path=…)`). Administrators read under the working directory and the data
//! directory; everyone else only their own folders of the data directory
//! (`<data>/agent/runtime/<kind>/users/<user-key>/`: terminal output, Python spill files, their
//! skills).
//!
//! A path is judged twice: as written (`..` folded lexically, a relative path taken from the
//! caller's first root) and as it really is (every symlink resolved), each against the roots as
//! they really are, and the file is opened without following a final symlink. A path outside,
//! one that climbs out with `..`, and one whose symlink leads out are refused with the same
//! words, so a refusal tells nothing about what lies outside.

use mpa_protocol::Actor;
use mpa_redact::UserKey;
use std::path::{Component, Path, PathBuf};

/// The refusal every path outside the caller's roots gets (the same, whatever the path).
pub const ACCESS_DENIED: &str =
    "this path is outside the folders you may read / 路径不在允许读取的目录内";

/// Why a path was refused: the tool's error code and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRefusal {
    pub code: &'static str,
    pub message: String,
}

impl PathRefusal {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    fn denied() -> Self {
        Self::new("local_path_access_denied", ACCESS_DENIED)
    }
}

#[derive(Debug, Clone)]
pub struct FileBoundary {
    workdir: PathBuf,
    data_dir: PathBuf,
}

impl FileBoundary {
    pub fn new(workdir: impl Into<PathBuf>, data_dir: impl Into<PathBuf>) -> Self {
        Self {
            workdir: workdir.into(),
            data_dir: data_dir.into(),
        }
    }

    /// The folders `actor` may read, as configured (the first is where relative paths start).
    pub fn roots_for(&self, actor: &Actor) -> Vec<PathBuf> {
        if actor.is_admin {
            return vec![self.workdir.clone(), self.data_dir.clone()];
        }
        let key = UserKey::for_user(&actor.user_id);
        let runtime = self.data_dir.join("agent/runtime");
        let mut roots = vec![runtime.join("code/users").join(key.as_str())];
        if let Ok(kinds) = std::fs::read_dir(&runtime) {
            for kind in kinds.flatten() {
                let own = kind.path().join("users").join(key.as_str());
                if !roots.contains(&own) {
                    roots.push(own);
                }
            }
        }
        roots
    }

    /// The real path of a regular file `actor` may read (blocking: call off the runtime).
    pub fn resolve(&self, actor: &Actor, path: &str) -> Result<PathBuf, PathRefusal> {
        if path.trim().is_empty() || path.contains('\0') {
            return Err(PathRefusal::new(
                "local_path_invalid",
                "file_path must be a non-empty path",
            ));
        }
        let roots = self.roots_for(actor);
        let Some(base) = roots.first() else {
            return Err(PathRefusal::denied());
        };
        let written = normalise(&base.join(path));
        let real_roots: Vec<PathBuf> = roots
            .iter()
            .filter_map(|r| std::fs::canonicalize(r).ok())
            .collect();
        let inside = |p: &Path| {
            roots.iter().any(|r| p.starts_with(normalise(r)))
                || real_roots.iter().any(|r| p.starts_with(r))
        };
        if !inside(&written) {
            return Err(PathRefusal::denied());
        }
        let real = std::fs::canonicalize(&written).map_err(|_| {
            PathRefusal::new(
                "local_file_unavailable",
                "the file does not exist or cannot be read / 文件不存在或无法读取",
            )
        })?;
        if !real_roots.iter().any(|r| real.starts_with(r)) {
            return Err(PathRefusal::denied());
        }
        match std::fs::metadata(&real) {
            Ok(m) if m.is_file() => Ok(real),
            Ok(_) => Err(PathRefusal::new(
                "local_path_invalid",
                "file_path names a directory or a special file, not a regular file",
            )),
            Err(_) => Err(PathRefusal::new(
                "local_file_unavailable",
                "the file does not exist or cannot be read / 文件不存在或无法读取",
            )),
        }
    }

    /// Opens a path [`FileBoundary::resolve`] returned, refusing a symlink swapped in since.
    pub fn open(real: &Path) -> std::io::Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(real)
    }
}

/// `.` dropped and `..` folded without touching the file system (`/..` stays `/`).
fn normalise(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_dot_is_folded_lexically() {
        assert_eq!(
            normalise(Path::new("/a/b/../../../etc")),
            PathBuf::from("/etc")
        );
        assert_eq!(normalise(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
    }
}
