//! Start-up recovery: roll back interrupted batches, remove quarantine directories and stale
//! temp files, drop ownership records of skills that no longer exist.

use super::Skills;
use super::catalog::personal_names;
use super::journal::{TXN_DIR, read_manifest, rollback};
use super::ownership;
use crate::durable_fs::MutationLock;
use std::fs;
use std::path::Path;

impl Skills {
    /// Recover every user's store. Returns one report line per thing done.
    pub fn recover_on_start(&self) -> Vec<String> {
        let mut report = Vec::new();
        let Ok(rd) = fs::read_dir(self.users_root()) else {
            return report;
        };
        for user in rd.filter_map(|e| e.ok()) {
            let uname = user.file_name().to_string_lossy().into_owned();
            let lroot = user.path();
            // A crashed writer's flock died with it; a live one (another host process) wins.
            let _guard = match MutationLock::acquire(&lroot) {
                Ok(g) => g,
                Err(e) => {
                    report.push(format!(
                        "user {uname}: skipped recovery, store is locked ({e})"
                    ));
                    continue;
                }
            };
            let txn_root = lroot.join(TXN_DIR);
            if let Ok(txns) = fs::read_dir(&txn_root) {
                for t in txns.filter_map(|e| e.ok()) {
                    let dir = t.path();
                    match read_manifest(&dir) {
                        Some(m) => {
                            rollback(&dir, &m);
                            report.push(format!(
                                "user {uname}: rolled back interrupted skill batch {} ({} file(s) restored to their previous state)",
                                m.id,
                                m.len()
                            ));
                        }
                        None => {
                            let _ = fs::remove_dir_all(&dir);
                            report.push(format!(
                                "user {uname}: removed an unfinished skill batch journal (no file had been changed)"
                            ));
                        }
                    }
                }
            }
            let personal = lroot.join("skills");
            if let Ok(items) = fs::read_dir(&personal) {
                for e in items.filter_map(|e| e.ok()) {
                    let n = e.file_name().to_string_lossy().into_owned();
                    if n.starts_with(".deleted-") {
                        match fs::remove_dir_all(e.path()) {
                            Ok(()) => report.push(format!(
                                "user {uname}: removed quarantine directory {n} left by an interrupted delete"
                            )),
                            Err(err) => report.push(format!(
                                "user {uname}: quarantine directory {n} could not be removed: {err}"
                            )),
                        }
                    }
                }
            }
            let removed = remove_temp_files(&personal, 0);
            if removed > 0 {
                report.push(format!(
                    "user {uname}: removed {removed} stale temporary file(s)"
                ));
            }
            if let Ok(mut sidecar) = ownership::load(&personal) {
                let key_dirs = personal_names(&personal);
                let before = sidecar.len();
                sidecar.retain(|name, _| key_dirs.contains(name));
                if sidecar.len() != before && ownership::save(&personal, &sidecar).is_ok() {
                    report.push(format!(
                        "user {uname}: dropped {} ownership record(s) of skills that no longer exist",
                        before - sidecar.len()
                    ));
                }
            }
        }
        report
    }
}

fn remove_temp_files(dir: &Path, depth: usize) -> usize {
    if depth > 6 {
        return 0;
    }
    let Ok(rd) = fs::read_dir(dir) else { return 0 };
    let mut n = 0;
    for e in rd.filter_map(|e| e.ok()) {
        let Ok(t) = e.file_type() else { continue };
        let name = e.file_name().to_string_lossy().into_owned();
        if t.is_dir() && !t.is_symlink() {
            n += remove_temp_files(&e.path(), depth + 1);
        } else if t.is_file()
            && name.starts_with('.')
            && name.contains(".tmp-")
            && fs::remove_file(e.path()).is_ok()
        {
            n += 1;
        }
    }
    n
}
