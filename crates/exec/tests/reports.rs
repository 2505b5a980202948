//! Reports: JSON-escaped clipping and the honest outcome of a session.

use mpa_exec::{SessionStatus, clip_json_escaped};
use mpa_protocol::Outcome;

#[test]
fn clipping_counts_escaped_characters() {
    assert_eq!(clip_json_escaped("abc", 3), ("abc".into(), false));
    assert_eq!(clip_json_escaped("abcd", 3), ("abc".into(), true));
    assert_eq!(clip_json_escaped("a\"b", 2), ("a".into(), true));
    assert_eq!(clip_json_escaped("世界世界", 2), ("世界".into(), true));
    assert_eq!(clip_json_escaped("\u{1}x", 6), ("\u{1}".into(), true));
}

#[test]
fn outcomes_follow_the_honesty_rules() {
    use SessionStatus::*;
    assert_eq!(Running.outcome(None), Outcome::Pending);
    assert_eq!(Exited.outcome(Some(0)), Outcome::Succeeded);
    assert_eq!(Exited.outcome(Some(2)), Outcome::Failed);
    assert_eq!(Exited.outcome(None), Outcome::Unknown);
    assert_eq!(Killed.outcome(Some(0)), Outcome::Failed);
    assert_eq!(Error.outcome(None), Outcome::Failed);
}
