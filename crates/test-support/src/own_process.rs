//! A test that changes something process-wide (the environment, the subreaper flag, a reaper
//! thread) runs again in a process of its own, spawned from the same test binary with only that
//! test selected: the crate keeps one test binary, and nothing leaks into its other tests.

/// Set in the spawned process to the one test it runs.
const SELECTED: &str = "MPA_TEST_OWN_PROCESS";

/// `true` in the test binary's own process: the test `path::name` (its module path as
/// `module_path!()` gives it, the test function's name) has just run, and passed, in a process
/// of its own — the caller returns. `false` in that process: the caller runs the test's body.
///
/// # Panics
/// When the spawned process cannot start, or the test failed (or did not run) there; the
/// message carries its output.
#[expect(
    clippy::expect_used,
    reason = "only tests call this: a panic is their failure"
)]
pub fn respawned(module_path: &str, name: &str) -> bool {
    // `module_path!()` starts with the test binary's crate name, which the harness omits.
    let test = match module_path.split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    };
    if std::env::var(SELECTED).is_ok_and(|t| t == test) {
        return false;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args([test.as_str(), "--exact", "--test-threads=1", "--nocapture"])
        .env(SELECTED, &test)
        .output()
        .expect("the test binary starts again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success()
            && stdout.contains(&format!("test {test} ... ok"))
            && stdout.contains("test result: ok. 1 passed"),
        "{test} in a process of its own:\n{stdout}\n{stderr}"
    );
    true
}

/// Runs the rest of the calling test in a process of its own (see [`respawned`]).
#[macro_export]
macro_rules! in_own_process {
    ($name:ident) => {
        if $crate::own_process::respawned(module_path!(), stringify!($name)) {
            return;
        }
    };
}
