//! Property test: arbitrary query text never causes an SQL error or a panic: every search
//! answers (or, past the term limit, says the query is too complex).
#![expect(clippy::unwrap_used, reason = "test assertions")]

use crate::common::*;
use mpa_history::recall::{DiscoverRequest, SearchOutcome, Sort};
use mpa_history::{HistoryError, SearchRequest};
use proptest::prelude::*;
use std::sync::OnceLock;

struct Fixture {
    rt: tokio::runtime::Runtime,
    env: Env,
    user: mpa_redact::UserKey,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let env = env();
        let user = user("fuzz");
        rt.block_on(async {
            env.session(
                &user,
                meta("s1", "web"),
                &[
                    "docker networking fixed",
                    "订阅成功 100%完成",
                    "C++ (problem) {test}",
                ],
                1.0,
            )
            .await;
            env.session(
                &user,
                meta("s2", "cron"),
                &["chat-send P2.2 my-app.config.ts", "\"quoted\" AND OR NOT *"],
                2.0,
            )
            .await;
        });
        Fixture { rt, env, user }
    })
}

fn query_text() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "AND",
        "OR",
        "NOT",
        "NEAR",
        "\"",
        "*",
        "(",
        ")",
        ":",
        "^",
        "-",
        ".",
        "_",
        "%",
        "\\",
        "'",
        "docker",
        "订阅",
        "订",
        "한국어",
        "日本語",
        "😀",
        " ",
        "  ",
        "\u{e000}",
        "\u{e001}",
        "0",
        "col:",
        "+",
        "{",
        "}",
        "NEAR(",
        "\u{0}",
        "\t",
        "é",
        "ＡＢＣ",
    ]);
    prop_oneof![
        prop::collection::vec(atoms, 0..16).prop_map(|v| v.concat()),
        any::<String>().prop_map(|s| s.chars().take(200).collect()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_queries_always_answer(query in query_text(), rs in prop::sample::select(vec![vec![], vec!["tool"], vec!["user", "assistant", "tool"]]), sort in prop::sample::select(vec![Sort::Relevance, Sort::Newest, Sort::Oldest])) {
        let f = fixture();
        for req in [
            SearchRequest::Discover(DiscoverRequest { roles: roles(&rs), sort, ..q(&query) }),
            in_session_req("s1", &query),
        ] {
            match f.rt.block_on(f.env.try_run(&f.user, None, req.clone())) {
                Ok(r) => prop_assert!(
                    matches!(r.outcome, SearchOutcome::Discover(_) | SearchOutcome::InSession(_)),
                    "{:?}: {:?}", req, r
                ),
                Err(HistoryError::QueryTooComplex { .. }) => {}
                Err(e) => prop_assert!(false, "{:?}: {}", req, e),
            }
        }
    }
}
