//! Tests that need an external program (python3, Chromium, node, …) run it when present; when it
//! is missing they skip with a notice, unless `MPA_REQUIRE_ALL_TESTS=1` (set by `.ci/run`), under
//! which a missing program fails the test.

use std::io::Write as _;

/// Whether a test may use `what` (`present` = it was found). Missing: panics under
/// `MPA_REQUIRE_ALL_TESTS=1`, otherwise prints a `SKIPPED` notice and returns `false`.
///
/// The notice is written to the process's stderr directly, not through `eprintln!`, which the
/// test harness captures (and hides) for passing tests.
pub fn external_program(what: &str, present: bool) -> bool {
    if present {
        return true;
    }
    if std::env::var("MPA_REQUIRE_ALL_TESTS").as_deref() == Ok("1") {
        panic!("{what} is required (MPA_REQUIRE_ALL_TESTS=1) but missing");
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: {what} not available; install it (see .ci/run) to run this test"
    );
    false
}
