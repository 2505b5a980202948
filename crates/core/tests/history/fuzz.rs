//! Property test: arbitrary query text never causes an SQL error, a panic or a non-JSON result.

use super::common::*;
use proptest::prelude::*;
use serde_json::json;
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
    fn arbitrary_queries_always_return_tool_json(q in query_text(), roles in prop::sample::select(vec!["", "tool", "user,assistant,tool"]), sort in prop::sample::select(vec!["", "newest", "oldest"])) {
        let f = fixture();
        for args in [
            json!({"query": q, "role_filter": roles, "sort": sort, "limit": 10}),
            json!({"query": q, "session_id": "s1"}),
        ] {
            let r = f.rt.block_on(f.env.search(&f.user, None, args));
            prop_assert!(r.is_object());
            prop_assert_eq!(&r["success"], &json!(true), "{}", r);
            prop_assert!(r["results"].is_array() || r["messages"].is_array(), "{}", r);
        }
    }
}
