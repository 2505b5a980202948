//! The query sanitiser, relaxation, complexity limits and the LIKE compiler.

use mpa_history::query::*;

#[test]
fn sanitizer_table() {
    let cases = [
        ("hello world", "hello world"),
        ("hello AND", "hello"),
        ("OR world", "world"),
        ("***", ""),
        ("deploy*", "deploy*"),
        ("\"exact phrase\"", "\"exact phrase\""),
        ("chat-send", "\"chat-send\""),
        ("P2.2", "\"P2.2\""),
        ("my-app.config.ts", "\"my-app.config.ts\""),
        ("FUNCNAMEMARKER_UNIQUE", "\"FUNCNAMEMARKER_UNIQUE\""),
        ("TODO: fix", "TODO fix"),
        ("\"chat-send now\" x", "\"chat-send now\" x"),
    ];
    for (i, o) in cases {
        assert_eq!(sanitize(i), o, "input {i}");
    }
    assert!(!sanitize("\"unterminated").contains('"'));
    for s in ["C++", "(problem", "{test}"] {
        let out = sanitize(s);
        assert!(!out.contains(['+', '(', '{', '}']), "{s} -> {out}");
    }
    assert_eq!(sanitize("100%完成"), "100%完成");
    assert_eq!(sanitize("100% done"), "100 done");
}

#[test]
fn relax_and_quote() {
    assert_eq!(
        or_relaxed("\"docker networking\" tls").as_deref(),
        Some("\"docker networking\" OR tls")
    );
    assert_eq!(or_relaxed("a OR b"), None);
    assert_eq!(or_relaxed("a NOT b"), None);
    assert_eq!(or_relaxed("single"), None);
    assert_eq!(
        quote_each_token("广西 OR 桂林", false),
        "\"广西\" OR \"桂林\""
    );
    assert_eq!(strict_rebuild("a AND OR b"), "\"a\" AND \"b\"");
    assert_eq!(strict_rebuild("NOT x . y"), "\"x\" \"y\"");
}

#[test]
fn queries_beyond_the_term_or_operator_limit_are_too_complex() {
    let terms = |n: usize, sep: &str| vec!["a"; n].join(sep);
    assert!(check_complexity(&sanitize(&terms(MAX_QUERY_TERMS, " OR "))).is_ok());
    assert!(check_complexity(&sanitize(&terms(MAX_QUERY_TERMS, " "))).is_ok());
    for q in [
        terms(201, " OR "),
        terms(MAX_QUERY_TERMS + 1, " "),
        // Separators the sanitiser turns into spaces still count as terms.
        terms(MAX_QUERY_TERMS + 1, "+"),
    ] {
        let e = check_complexity(&sanitize(&q)).unwrap_err();
        assert!(
            matches!(
                e,
                mpa_history::error::HistoryError::QueryTooComplex {
                    max: MAX_QUERY_TERMS,
                    ..
                }
            ),
            "{e}"
        );
    }
    // A quoted phrase is one term however many words it holds.
    let phrase = format!("\"{}\"", terms(200, " "));
    assert!(check_complexity(&sanitize(&phrase)).is_ok());
}

#[test]
fn like_compiler() {
    let g = like_groups("docker NOT broken OR \"tls fix\"");
    assert_eq!(g.len(), 2);
    assert_eq!(
        g[0][1],
        LikeTerm {
            text: "broken".into(),
            negated: true
        }
    );
    assert_eq!(g[1][0].text, "tls fix");
    assert!(like_groups("NOT x").is_empty());
    assert_eq!(like_pattern("100%_a\\"), "%100\\%\\_a\\\\%");
}
