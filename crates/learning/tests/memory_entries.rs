//! Memory entries: parsing, the character budget, previews.

use mpa_learning::memory::entries::{chars, join, parse, preview, thousands, usage};

#[test]
fn parse_trims_dedups_and_keeps_bare_section_sign() {
    let raw = " a \n§\nb § c\n§\n\n§\na\n";
    assert_eq!(parse(raw), vec!["a".to_string(), "b § c".to_string()]);
}

#[test]
fn usage_counts_delimiters_and_code_points() {
    let e = vec!["x".repeat(686), "y".repeat(686)];
    assert_eq!(usage(&e), 1375);
    assert_eq!(usage(&["中文".to_string()]), 2);
    assert_eq!(usage(&[]), 0);
    assert_eq!(chars(&join(&e)), 1375);
}

#[test]
fn helpers() {
    assert_eq!(preview("abcdef", 3), "abc...");
    assert_eq!(preview("abc", 3), "abc");
    assert_eq!(thousands(1375), "1,375");
    assert_eq!(thousands(100), "100");
    assert_eq!(thousands(1_000_000), "1,000,000");
}
