//! Acceptance checklist items 46–54 (fuzzy matcher) plus CRLF / CJK / tab cases.

use mpa_learning::patch_matcher::{PatchError, Strategy, apply};

#[test]
fn item46_two_exact_matches_are_ambiguous() {
    let content = "intro\nfoo = 1\nmiddle\nfoo = 1\n";
    let err = apply(content, "foo = 1", "foo = 2", false).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("Found 2 matches for old_string."), "{msg}");
    assert!(msg.contains("  L2: foo = 1"));
    assert!(msg.contains("  L4: foo = 1"));
}

#[test]
fn item47_replace_all_replaces_both() {
    let content = "intro\nfoo = 1\nmiddle\nfoo = 1\n";
    let r = apply(content, "foo = 1", "foo = 2", true).unwrap();
    assert_eq!(r.count, 2);
    assert_eq!(r.content, "intro\nfoo = 2\nmiddle\nfoo = 2\n");
}

#[test]
fn item48_aa_in_aaaa() {
    let r = apply("aaaa", "aa", "b", true).unwrap();
    assert_eq!(r.count, 2);
}

#[test]
fn item49_indentation_is_adapted() {
    let content = "steps:\n    check disk\n    run scan\nend";
    let r = apply(
        content,
        "  check disk\n  run scan",
        "  check disk\n  run full scan\n    verbose",
        false,
    )
    .unwrap();
    assert_eq!(r.strategy, Strategy::LineTrimmed);
    assert_eq!(
        r.content,
        "steps:\n    check disk\n    run full scan\n      verbose\nend"
    );
}

#[test]
fn item50_unicode_preserved() {
    let content = "Say \u{201C}hello\u{201D} \u{2014} then wait\u{2026}\n";
    let r = apply(
        content,
        "Say \"hello\" -- then wait...",
        "Say \"hello\" -- then leave...",
        false,
    )
    .unwrap();
    assert_eq!(r.strategy, Strategy::UnicodeNormalized);
    assert_eq!(
        r.content,
        "Say \u{201C}hello\u{201D} \u{2014} then leave\u{2026}\n"
    );
}

#[test]
fn item51_literal_newline_escape() {
    let content = "first line\nsecond line\n";
    let r = apply(content, "first line\\nsecond line", "one\ntwo", false).unwrap();
    assert_eq!(r.strategy, Strategy::EscapeNormalized);
    assert_eq!(r.content, "one\ntwo\n");
}

#[test]
fn item52_preconditions() {
    assert_eq!(
        apply("abc", "b", "b", false).unwrap_err(),
        PatchError::Identical
    );
    assert_eq!(
        apply("abc", "", "x", false).unwrap_err(),
        PatchError::EmptyOld
    );
    assert_eq!(
        apply("abc", " \t\n", "x", false).unwrap_err(),
        PatchError::WhitespaceOld
    );
}

#[test]
fn item53_replace_all_refused_for_similarity_matches() {
    let block = |mid: &str| format!("## Step\nalpha beta gamma {mid}\ndelta epsilon\n## End\n");
    let content = format!("{}{}", block("one"), block("two"));
    let old = "## Step\nalpha beta gamma zzz\ndelta epsilonn\n## End";
    let err = apply(&content, old, "## Step\nnew\n## End", true).unwrap_err();
    assert!(
        err.to_string()
            .contains("replace_all only applies to exact matches"),
        "{err}"
    );
    // Without replace_all the two candidates are simply ambiguous.
    assert!(matches!(
        apply(&content, old, "x", false).unwrap_err(),
        PatchError::Ambiguous { count: 2, .. }
    ));
}

#[test]
fn item54_escape_drift_refused() {
    let content = "def greet():\n    return 'hello there my good friend'\n";
    let old = "def greet():\n    return \\'hello there my good friend\\'";
    let new = "def greet():\n    return \\'hi\\'";
    let err = apply(content, old, new, false).unwrap_err();
    assert!(err.to_string().contains("escaped quotes"), "{err}");
}

#[test]
fn no_match_gives_numbered_did_you_mean() {
    let content = "# Skill\n\n## Steps\n1. open the downloader\n2. check the queue\n3. done\n";
    let err = apply(content, "1. launch the torrent client", "x", false).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("Could not find a match for old_string in the file"),
        "{msg}"
    );
    assert!(msg.contains("Did you mean one of these sections?"));
    assert!(msg.contains("   4| 1. open the downloader"), "{msg}");
    let err = apply(content, "completely unrelated zebra text", "x", false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Could not find a match for old_string in the file"
    );
}

#[test]
fn crlf_tabs_and_cjk() {
    // CRLF files match through the trimming strategies.
    let content = "line one\r\nline two\r\n";
    let r = apply(content, "line one\nline two", "line 1\nline 2", false).unwrap();
    assert_eq!(r.strategy, Strategy::LineTrimmed);
    assert_eq!(r.content, "line 1\r\nline 2\r\n");
    // Literal \t becomes a real tab only when the region has tabs.
    let content = "a\tb  c\n";
    let r = apply(content, "a b c", "a\\tb c d", false).unwrap();
    assert_eq!(r.strategy, Strategy::WhitespaceNormalized);
    assert_eq!(r.content, "a\tb c d\n");
    // CJK and combining characters survive exact and fuzzy paths.
    let content = "  下载器：qBittorrent\n  字幕：中文 e\u{301}\n";
    let r = apply(
        content,
        "下载器：qBittorrent\n字幕：中文 e\u{301}",
        "下载器：Transmission\n字幕：中文 e\u{301}",
        false,
    )
    .unwrap();
    assert_eq!(r.strategy, Strategy::LineTrimmed);
    assert_eq!(r.content, "  下载器：Transmission\n  字幕：中文 e\u{301}\n");
}

#[test]
fn first_strategy_with_a_match_decides() {
    // line_trimmed finds two windows, so later strategies are never consulted.
    let content = "  x = 1\n    x = 1\n";
    assert!(matches!(
        apply(content, "x = 1 ", "x = 2", false).unwrap_err(),
        PatchError::Ambiguous { count: 2, .. }
    ));
}
