//! The rendered snapshot's cap for files grown by other writers.

use mpa_learning::memory::capped;

#[test]
fn cap_keeps_head_and_tail() {
    let text = "a".repeat(3000) + &"b".repeat(3000);
    let out = capped(&text, 1375);
    assert!(out.starts_with(&"a".repeat(2800)));
    assert!(out.ends_with(&"b".repeat(800)));
    assert!(out.contains("2400 chars truncated"));
    assert_eq!(capped("short", 1375), "short");
}
