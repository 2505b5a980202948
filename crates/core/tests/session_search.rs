//! The `session_search` tool's JSON: argument parsing (limits, unknown keys, relative times,
//! which arguments choose which mode), how results and failures are rendered (previews, detail
//! sizes, capability fields, `query_timeout`, `storage_unavailable`, `query_too_complex`). What
//! history finds and why lives in mpa-history's own tests (typed API).
#![expect(clippy::unwrap_used, reason = "test assertions")]

use mpa_core::history::{History, HistoryConfig, search_json};
use mpa_history::{CapturedMessage, Provenance, Role, SessionMeta};
use mpa_protocol::UserId;
use mpa_redact::UserKey;
use serde_json::{Value, json};

struct Env {
    dir: tempfile::TempDir,
    hub: History,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let hub = History::new(HistoryConfig::new(dir.path()));
    Env { dir, hub }
}

fn user(name: &str) -> UserKey {
    UserKey::for_user(&UserId(name.to_owned()))
}

fn meta(id: &str, source: &str) -> SessionMeta {
    SessionMeta {
        session_id: id.to_owned(),
        source: source.to_owned(),
        ..Default::default()
    }
}

impl Env {
    /// Alternating user/assistant messages, one second apart from `t0`; returns their ids.
    async fn session(&self, u: &UserKey, m: SessionMeta, texts: &[&str], t0: f64) -> Vec<i64> {
        let sid = m.session_id.clone();
        let msgs: Vec<CapturedMessage> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| CapturedMessage {
                message_uid: format!("{sid}-{i}"),
                role: if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                content: (*t).to_owned(),
                tool_name: None,
                tool_call_id: None,
                tool_calls: None,
                ts: chrono::DateTime::from_timestamp_micros(((t0 + i as f64) * 1e6) as i64),
                provenance: Provenance::Observed,
            })
            .collect();
        for chunk in msgs.chunks(100) {
            self.hub.append(u, m.clone(), chunk.to_vec()).await.unwrap();
        }
        let conn = rusqlite::Connection::open(self.hub.db_path(u)).unwrap();
        let mut st = conn
            .prepare("SELECT id FROM messages WHERE session_id = ?1 ORDER BY id")
            .unwrap();
        st.query_map([sid], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    }

    /// The tool's answer to `args`, as the model gets it.
    async fn search(&self, u: &UserKey, current: Option<&str>, args: Value) -> Value {
        search_json(&self.hub, u, current.map(str::to_owned), args).await
    }
}

fn session_ids(v: &Value) -> Vec<String> {
    v["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {v}"))
        .iter()
        .map(|r| r["session_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn limits_are_validated_not_clamped() {
    let e = env();
    let u = user("a");
    for i in 0..12 {
        e.session(
            &u,
            meta(&format!("s{i}"), "web"),
            &["common needle"],
            i as f64,
        )
        .await;
    }
    let r = e.search(&u, None, json!({"query": "needle"})).await;
    assert_eq!(r["count"], 3);
    let r = e
        .search(&u, None, json!({"query": "needle", "limit": 10}))
        .await;
    assert_eq!(r["count"], 10);
    for bad in [
        json!({"query": "x", "limit": 11}),
        json!({"query": "x", "limit": 0}),
        json!({"session_id": "s1", "around_message_id": 1, "window": 21}),
        json!({"around_message_id": 3}),
        json!({"query": "x", "role_filter": "system"}),
        json!({"query": "x", "after": "2026-01-02", "before": "2026-01-01"}),
        json!({"query": "x", "sort": "random"}),
        json!({"query": "x", "detail": "huge"}),
        json!({"query": "q".repeat(1025)}),
        json!({"query": "x", "exclude_session_ids": vec!["a"; 21].iter().enumerate().map(|(i, _)| i.to_string()).collect::<Vec<_>>()}),
        json!("not an object"),
    ] {
        let r = e.search(&u, None, bad.clone()).await;
        assert_eq!(r["error"], "invalid_arguments", "{bad}: {r}");
        assert_eq!(r["success"], false);
    }
}

#[tokio::test]
async fn unknown_parameters_naming_users_or_paths_are_rejected() {
    let e = env();
    let u = user("b");
    e.session(&u, meta("same", "web"), &["beta other"], 10.0)
        .await;
    for bad in ["user", "profile", "db", "path"] {
        let r = e
            .search(&u, None, json!({"query": "alpha", bad: "a"}))
            .await;
        assert_eq!(r["error"], "invalid_arguments", "{bad}: {r}");
        assert_eq!(r["message"], format!("unknown parameter: {bad}"), "{r}");
    }
}

#[tokio::test]
async fn relative_time_bounds_are_accepted() {
    let e = env();
    let u = user("a");
    e.session(&u, meta("chat", "web"), &["window word"], 150.0)
        .await;
    let r = e
        .search(&u, None, json!({"query": "window", "after": "7d"}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["count"], 0, "the session is older than a week: {r}");
    let r = e
        .search(
            &u,
            None,
            json!({"query": "window", "after": "24h", "before": "1h"}),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    let r = e
        .search(
            &u,
            None,
            json!({"query": "window", "after": "100", "before": "200"}),
        )
        .await;
    assert_eq!(session_ids(&r), vec!["chat"], "{r}");
}

#[tokio::test]
async fn mode_follows_the_arguments() {
    let e = env();
    let u = user("a");
    let ids = e
        .session(&u, meta("s", "web"), &["first words", "second words"], 1.0)
        .await;
    for (args, mode) in [
        (json!({}), "browse"),
        (json!({"limit": 5}), "browse"),
        (json!({"query": "words"}), "discover"),
        (json!({"session_id": "s"}), "read"),
        (
            json!({"session_id": "s", "query": "second"}),
            "session_search",
        ),
        (
            json!({"session_id": "s", "around_message_id": ids[0], "query": "ignored"}),
            "scroll",
        ),
        (json!({"query": "   "}), "browse"),
    ] {
        let r = e.search(&u, None, args.clone()).await;
        assert_eq!(r["mode"], mode, "{args}: {r}");
    }
}

#[tokio::test]
async fn browse_preview_collapses_whitespace_and_is_capped() {
    let e = env();
    let u = user("a");
    e.session(
        &u,
        SessionMeta {
            title: Some("First".into()),
            ..meta("s1", "web")
        },
        &["hello\n\nthere   friend", "reply"],
        1.0,
    )
    .await;
    e.session(&u, meta("s2", "cli"), &[&"long ".repeat(40)], 5.0)
        .await;
    let r = e.search(&u, None, json!({"limit": 10})).await;
    assert_eq!(session_ids(&r), vec!["s2", "s1"]);
    let s1 = &r["results"][1];
    for k in [
        "session_id",
        "title",
        "source",
        "started_at",
        "last_active",
        "message_count",
        "preview",
    ] {
        assert!(s1.get(k).is_some(), "{k}");
    }
    assert_eq!(s1["preview"], "hello there friend");
    let long = r["results"][0]["preview"].as_str().unwrap();
    assert!(long.ends_with("..."), "{long}");
    assert!(long.chars().count() <= 83, "{long}");
}

#[tokio::test]
async fn every_success_carries_capability_fields() {
    let e = env();
    let u = user("a");
    let ids = e
        .session(&u, meta("a", "web"), &["docker networking fixed"], 10.0)
        .await;
    for args in [
        json!({}),
        json!({"query": "docker"}),
        json!({"session_id": "a"}),
        json!({"session_id": "a", "around_message_id": ids[0]}),
        json!({"session_id": "a", "query": "docker"}),
    ] {
        let r = e.search(&u, None, args.clone()).await;
        assert_eq!(r["success"], true, "{args}");
        assert_eq!(r["legacy_import"]["complete"], true);
        for k in ["messages_fts", "messages_fts_trigram", "messages_fts_cjk"] {
            assert!(r["index_status"][k].is_boolean(), "{k}");
        }
    }
}

#[tokio::test]
async fn unfinished_legacy_import_is_rendered_with_an_inconclusive_note() {
    let e = env();
    let u = user("a");
    e.session(&u, meta("a", "web"), &["line one"], 10.0).await;
    let dir = e.hub.db_path(&u).parent().unwrap().to_path_buf();
    let cursor = json!({"version": 1, "complete": false, "updated_at": "",
                        "sources": {"/nowhere/state.db": {"last_id": 5, "complete": false}}});
    std::fs::write(dir.join("import-hermes-cursor.json"), cursor.to_string()).unwrap();
    let r = e.search(&u, None, json!({"query": "line"})).await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["legacy_import"]["complete"], false, "{r}");
    assert!(
        r["legacy_import"]["note"]
            .as_str()
            .unwrap()
            .contains("inconclusive"),
        "{r}"
    );
}

#[tokio::test]
async fn detail_index_is_smallest_and_titles_are_marked() {
    let e = env();
    let u = user("a");
    let texts: Vec<String> = (0..40)
        .map(|i| {
            if i == 25 {
                "the anchor target".to_owned()
            } else {
                format!("filler message {i}")
            }
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    e.session(&u, meta("big", "web"), &refs, 1.0).await;
    e.session(
        &u,
        meta("small", "web"),
        &["anchor target elsewhere", "x"],
        100.0,
    )
    .await;
    let size = |detail: &'static str| {
        let (e, u) = (&e, &u);
        async move {
            let r = e
                .search(
                    u,
                    None,
                    json!({"query": "anchor target", "limit": 5, "detail": detail}),
                )
                .await;
            for res in r["results"].as_array().unwrap() {
                assert_eq!(res.get("messages").is_none(), detail == "index", "{res}");
                assert!(res["match_message_id"].is_i64(), "{res}");
            }
            assert_eq!(r["candidate_limit"], 300);
            r.to_string().len()
        }
    };
    let (index, adaptive, full) = (
        size("index").await,
        size("adaptive").await,
        size("full").await,
    );
    assert!(
        index < adaptive && adaptive <= full,
        "{index} {adaptive} {full}"
    );

    let t = SessionMeta {
        title: Some("TLS repair".into()),
        ..meta("t", "web")
    };
    e.session(&u, t, &["unrelated words"], 300.0).await;
    let r = e.search(&u, None, json!({"query": "TLS repair"})).await;
    assert_eq!(r["results"][0]["matched_role"], "session_title", "{r}");
    assert_eq!(
        r["results"][0]["snippet"],
        "Session title matched: TLS repair"
    );
}

#[tokio::test]
async fn query_deadline_is_reported_as_query_timeout_with_a_hint() {
    let e = env();
    let u = user("a");
    let texts: Vec<String> = (0..200).map(|i| format!("文本内容 {i} 字")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    e.session(&u, meta("s", "web"), &refs, 1.0).await;
    let mut cfg = HistoryConfig::new(e.dir.path());
    cfg.query_deadline = std::time::Duration::from_nanos(1);
    let slow = History::new(cfg);
    let r = search_json(&slow, &u, None, json!({"query": "字"})).await;
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"], "query_timeout");
    assert_eq!(r["complete"], false);
    assert!(r["hint"].as_str().unwrap().contains("does not mean"));
}

#[tokio::test]
async fn damaged_history_file_is_reported_as_storage_unavailable() {
    let e = env();
    let u = user("a");
    let db = e.hub.db_path(&u);
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    std::fs::write(&db, vec![0x5a; 8192]).unwrap();
    let r = e.search(&u, None, json!({"query": "anything"})).await;
    assert_eq!(r["success"], false);
    assert_eq!(r["error"], "storage_unavailable", "{r}");
    assert_eq!(r["complete"], false);
    assert_eq!(
        r["message"],
        "this user's history file is damaged or unreadable"
    );
    assert!(
        !r.to_string().contains(&e.dir.path().display().to_string()),
        "no server path in what the model reads: {r}"
    );
    // An internal user has no history at all: a failure, never a crash.
    let system = UserKey::for_user(&UserId("system".into()));
    let r = e.search(&system, None, json!({})).await;
    assert_eq!(r["success"], false, "{r}");
}

#[tokio::test]
async fn session_search_outruns_its_deadline_201_terms_are_query_too_complex() {
    let e = env();
    let u = user("a");
    e.session(&u, meta("s", "web"), &[&vec!["a"; 3000].join(" ")], 1.0)
        .await;
    let query = vec!["a"; 201].join(" OR ");
    let r = e.search(&u, None, json!({"query": query})).await;
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"], "query_too_complex", "{r}");
    assert_eq!(r["complete"], false);
    assert!(r["message"].as_str().unwrap().contains("201 terms"), "{r}");
    assert!(
        r["hint"].as_str().unwrap().contains("few specific terms"),
        "{r}"
    );
}
