#![expect(clippy::unwrap_used, reason = "test assertions")]
//! History recall at scale (issue 12 item 7), through the typed API: every match that passes
//! the filters is ranked, so an older best match is found among tens of thousands of newer ones,
//! and newer matches that the filters drop (hidden sources, rewound rows, tool rows) cannot crowd
//! it out — with and without the posting lists of complete id segments.
//! Also: retention removes tombstones older than the cutoff.

use mpa_history::recall::{DiscoverRequest, SearchOutcome};
use mpa_history::{
    CapturedMessage, History, HistoryConfig, Provenance, Role, SearchContext, SearchRequest,
    SessionMeta,
};
use mpa_protocol::UserId;
use mpa_redact::UserKey;

fn user(name: &str) -> UserKey {
    UserKey::for_user(&UserId(name.to_owned()))
}

fn msg(uid: String, role: Role, content: String, at: i64) -> CapturedMessage {
    CapturedMessage {
        message_uid: uid,
        role,
        content,
        tool_name: None,
        tool_call_id: None,
        tool_calls: None,
        ts: chrono::DateTime::from_timestamp(at, 0),
        provenance: Provenance::Observed,
    }
}

fn meta(id: &str, source: &str) -> SessionMeta {
    SessionMeta {
        session_id: id.to_owned(),
        source: source.to_owned(),
        ..Default::default()
    }
}

/// `sessions` sessions of 100 messages each whose every message matches `zeta` once, in a
/// longer sentence (an ordinary BM25 score), appended oldest first from `t0`.
async fn common_matches(
    h: &History,
    u: &UserKey,
    prefix: &str,
    source: &str,
    sessions: usize,
    t0: i64,
) {
    let mut batches = Vec::new();
    for s in 0..sessions {
        let sid = format!("{prefix}{s:05}");
        let msgs = (0..100)
            .map(|i| {
                let role = if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                let text = format!(
                    "zeta status report {s} {i} about the nightly library scan and its results"
                );
                msg(format!("{sid}-{i}"), role, text, t0 + (s * 100 + i) as i64)
            })
            .collect();
        batches.push((meta(&sid, source), msgs));
        if batches.len() == 50 {
            h.append_many(u, std::mem::take(&mut batches))
                .await
                .unwrap();
        }
    }
    if !batches.is_empty() {
        h.append_many(u, batches).await.unwrap();
    }
}

async fn top_sessions(h: &History, u: &UserKey, query: &str) -> (Vec<String>, &'static str) {
    let mut req = DiscoverRequest::new(query);
    req.limit = 3;
    let r = h
        .search(u, &SearchContext::default(), SearchRequest::Discover(req))
        .await
        .unwrap();
    let SearchOutcome::Discover(d) = r.outcome else {
        panic!("not a discover: {:?}", r.outcome);
    };
    (
        d.hits.into_iter().map(|h| h.session_id).collect(),
        d.search_path,
    )
}

/// The planted message: oldest of all, short and dense in the term, so its BM25 is the best
/// of every visible match.
async fn plant(h: &History, u: &UserKey) {
    let m = msg(
        "planted-0".into(),
        Role::User,
        "zeta zeta zeta".into(),
        1_000,
    );
    h.append(u, meta("planted", "web"), vec![m]).await.unwrap();
}

/// A history with ranking statistics for segments of `segment_ids` ids (built after the data is
/// in, by [`with_statistics`]), or, with `None`, the default segments (none complete here).
fn history(dir: &std::path::Path, segment_ids: Option<i64>) -> History {
    let mut cfg = HistoryConfig::new(dir);
    if let Some(n) = segment_ids {
        cfg.rank_segment_ids = n;
        cfg.background_backfill = false;
    }
    History::new(cfg)
}

async fn with_statistics(h: &History, u: &UserKey, segment_ids: Option<i64>) {
    if segment_ids.is_some() {
        let sum = h.build_ranking(u, |_, _| {}).await.unwrap();
        assert!(sum.segments_written >= 2, "{sum:?}");
        assert_eq!(h.status(u).await.unwrap().ranking.pending, 0);
    }
}

async fn older_best_match(segment_ids: Option<i64>) {
    let dir = tempfile::tempdir().unwrap();
    let h = history(dir.path(), segment_ids);
    let u = user("scale");
    plant(&h, &u).await;
    common_matches(&h, &u, "c", "web", 500, 10_000).await;
    with_statistics(&h, &u, segment_ids).await;
    let (top, path) = top_sessions(&h, &u, "zeta").await;
    assert_eq!(path, "fts5");
    assert!(top.iter().any(|s| s == "planted"), "top 3: {top:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_older_best_match_among_50000_newer_matches_is_in_the_top_3() {
    older_best_match(None).await;
}

/// The same with every older segment summarised: the walk skips segments whose bound is below
/// the rows already found, and still reaches the oldest one, whose bound is the best.
#[tokio::test(flavor = "multi_thread")]
async fn an_older_best_match_is_found_through_segment_statistics() {
    older_best_match(Some(4096)).await;
}

async fn filtered_crowd(segment_ids: Option<i64>) {
    let dir = tempfile::tempdir().unwrap();
    let h = history(dir.path(), segment_ids);
    let u = user("crowd");
    plant(&h, &u).await;
    common_matches(&h, &u, "c", "web", 500, 10_000).await;
    // 10,000 newer matches that score better than the planted one but must never be shown:
    // 5,000 in hidden-source sessions, 5,000 rewound.
    let dense = |sid: &str, i: usize| {
        msg(
            format!("{sid}-{i}"),
            Role::User,
            "zeta zeta zeta zeta".into(),
            900_000 + i as i64,
        )
    };
    let mut batches = Vec::new();
    for s in 0..50 {
        let sid = format!("hidden{s:03}");
        batches.push((
            meta(&sid, "subagent"),
            (0..100).map(|i| dense(&sid, i)).collect(),
        ));
    }
    h.append_many(&u, batches).await.unwrap();
    let mut uids = Vec::new();
    for s in 0..50 {
        let sid = format!("undone{s:03}");
        let msgs: Vec<_> = (0..100).map(|i| dense(&sid, i)).collect();
        uids.push((
            sid.clone(),
            msgs.iter()
                .map(|m| m.message_uid.clone())
                .collect::<Vec<_>>(),
        ));
        h.append(&u, meta(&sid, "web"), msgs).await.unwrap();
    }
    for (sid, ids) in uids {
        assert_eq!(h.mark_rewound(&u, &sid, ids).await.unwrap(), 100);
    }
    with_statistics(&h, &u, segment_ids).await;
    let (top, _) = top_sessions(&h, &u, "zeta").await;
    assert!(top.iter().any(|s| s == "planted"), "top 3: {top:?}");
    assert!(
        top.iter()
            .all(|s| !s.starts_with("hidden") && !s.starts_with("undone")),
        "filtered rows shown: {top:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn newer_filtered_matches_do_not_crowd_out_an_older_best_match() {
    filtered_crowd(None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn newer_filtered_matches_do_not_crowd_out_an_older_best_match_with_statistics() {
    filtered_crowd(Some(4096)).await;
}

/// 10,000 newer tool rows that match better than the planted message (the term fills their
/// tool name) — discover searches user and assistant messages, so none of them may push the
/// planted message out.
async fn tool_crowd(segment_ids: Option<i64>) {
    let dir = tempfile::tempdir().unwrap();
    let h = history(dir.path(), segment_ids);
    let u = user("tools");
    plant(&h, &u).await;
    common_matches(&h, &u, "c", "web", 500, 10_000).await;
    let mut batches = Vec::new();
    for s in 0..100 {
        let sid = format!("tools{s:03}");
        let msgs = (0..100)
            .map(|i| {
                let mut m = msg(
                    format!("{sid}-{i}"),
                    Role::Tool,
                    "ok".into(),
                    900_000 + i as i64,
                );
                // Six occurrences in a seven-token row: a better BM25 than the planted one.
                m.tool_name = Some("zeta zeta zeta zeta zeta zeta".into());
                m.tool_call_id = Some(format!("call_{i}"));
                m
            })
            .collect();
        batches.push((meta(&sid, "web"), msgs));
        if batches.len() == 50 {
            h.append_many(&u, std::mem::take(&mut batches))
                .await
                .unwrap();
        }
    }
    h.append_many(&u, batches).await.unwrap();
    with_statistics(&h, &u, segment_ids).await;
    let (top, _) = top_sessions(&h, &u, "zeta").await;
    assert!(top.iter().any(|s| s == "planted"), "top 3: {top:?}");
    assert!(
        top.iter().all(|s| !s.starts_with("tools")),
        "tool rows shown: {top:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn newer_matching_tool_rows_do_not_crowd_out_an_older_best_match() {
    tool_crowd(None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn newer_matching_tool_rows_do_not_crowd_out_an_older_best_match_with_statistics() {
    tool_crowd(Some(4096)).await;
}

#[tokio::test]
async fn cleanup_removes_tombstones_older_than_the_retention_period() {
    let dir = tempfile::tempdir().unwrap();
    let h = History::new(HistoryConfig::new(dir.path()));
    let u = user("tomb");
    let now = chrono::Utc::now().timestamp();
    h.append(
        &u,
        meta("recent", "web"),
        vec![msg("r".into(), Role::User, "x".into(), now)],
    )
    .await
    .unwrap();
    h.delete_session(&u, "recent").await.unwrap();
    h.delete_session(&u, "long-gone").await.unwrap();
    // Age one tombstone past the 30-day retention, as if deleted 40 days ago.
    let conn = rusqlite::Connection::open(h.db_path(&u)).unwrap();
    conn.execute(
        "UPDATE deleted_sessions SET deleted_at = ?1 WHERE id = 'long-gone'",
        [(now - 40 * 86_400) as f64],
    )
    .unwrap();
    let r = h.cleanup(&u, 30).await.unwrap();
    assert_eq!(r.tombstones_removed, 1);
    let left: Vec<String> = conn
        .prepare("SELECT id FROM deleted_sessions ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(left, vec!["recent".to_owned()]);
    assert_eq!(h.status(&u).await.unwrap().tombstones, 1);
    // The young tombstone still keeps a late append out.
    let late = h
        .append(
            &u,
            meta("recent", "web"),
            vec![msg("r2".into(), Role::User, "y".into(), now)],
        )
        .await
        .unwrap();
    assert!(late.tombstoned);
}
