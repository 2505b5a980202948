//! Free space on the data directory's file system (issue 24, item 3): a host whose disk is
//! (nearly) full cannot save what it answers, so it says so in `/healthz` and refuses new turns
//! below a floor (`MPA_MIN_FREE_MB`, [`AgentConfig::min_free_bytes`](crate::AgentConfig))
//! instead of acknowledging turns it may lose.

use crate::services::Services;
use serde::Serialize;
use std::path::Path;

/// Default floor: 64 MiB — room for a few snapshots, WAL checkpoints and evidence appends.
pub const DEFAULT_MIN_FREE_BYTES: u64 = 64 * 1024 * 1024;

/// Space on the file system that holds the data directory, as an unprivileged writer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DiskStatus {
    pub available_bytes: u64,
    pub total_bytes: u64,
    /// The configured floor (0 = not checked).
    pub floor_bytes: u64,
    /// Below the floor: new turns are refused.
    pub low: bool,
}

/// Available and total bytes of the file system holding `path`.
#[expect(
    clippy::useless_conversion,
    reason = "statvfs counts are u32 on some targets, u64 on this one"
)]
pub fn space(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a NUL-terminated path that outlives the call, and `st` points to writable
    // memory of the struct's size; statvfs only writes the struct.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled the struct.
    let st = unsafe { st.assume_init() };
    let unit = u64::from(st.f_frsize);
    Ok((
        u64::from(st.f_bavail).saturating_mul(unit),
        u64::from(st.f_blocks).saturating_mul(unit),
    ))
}

/// The data directory's free space against the configured floor; `None` when it cannot be read
/// (a file system without statvfs is never reported full).
pub fn status(services: &Services) -> Option<DiskStatus> {
    let dir = services.store.path().parent()?;
    let (available_bytes, total_bytes) = match space(dir) {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(error = %e, "free space of the data directory unknown");
            return None;
        }
    };
    let floor_bytes = services.cfg.min_free_bytes;
    Some(DiskStatus {
        available_bytes,
        total_bytes,
        floor_bytes,
        low: floor_bytes > 0 && available_bytes < floor_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_directory_has_space_and_a_missing_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (available, total) = space(dir.path()).unwrap();
        assert!(total > 0 && available <= total);
        assert!(space(&dir.path().join("missing")).is_err());
    }
}
