//! Background backfill and automatic FTS corruption recovery (spec §11, §12.1, §18 items 30–35):
//! rebuild triggers (tokenizer version change, missing index, detached index), the gap scan
//! while building, appends and deletes racing a backfill, the pause between batches, shutdown,
//! task limits, and corruption found during a search.

#![expect(clippy::unwrap_used, reason = "test assertions")]

use crate::common::{OutcomeExt, current, env, meta, msg, q, read_req, session_ids, user};
use mpa_history::backfill::pause_after;
use mpa_history::recall::{DiscoverRequest, DiscoverResult, Sort};
use mpa_history::{
    BackfillOptions, CapturedMessage, History, HistoryConfig, IndexState, IndexStatus, Role,
    SearchRequest, SessionMeta,
};
use mpa_redact::UserKey;
use std::path::Path;
use std::time::{Duration, Instant};

fn hub_at(dir: &Path, background: bool, batch: usize) -> History {
    let mut cfg = HistoryConfig::new(dir);
    cfg.background_backfill = background;
    cfg.backfill_batch = batch;
    History::new(cfg)
}

fn raw(hub: &History, u: &UserKey) -> rusqlite::Connection {
    rusqlite::Connection::open(hub.db_path(u)).unwrap()
}

fn texts(n: usize, f: impl Fn(usize) -> String) -> Vec<CapturedMessage> {
    (0..n)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            msg(&format!("m{i}"), role, &f(i), 1_700_000_000.0 + i as f64)
        })
        .collect()
}

fn tokenizer_version(hub: &History, u: &UserKey) -> String {
    raw(hub, u)
        .query_row(
            "SELECT value FROM state_meta WHERE key = 'tokenizer_version:cjk_unicode61'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

/// Make the CJK index look as if another tokenizer version had written it.
fn mark_tokenizer_stale(hub: &History, u: &UserKey) {
    raw(hub, u)
        .execute(
            "UPDATE state_meta SET value = '0' WHERE key = 'tokenizer_version:cjk_unicode61'",
            [],
        )
        .unwrap();
}

/// Append `n` alternating user/assistant messages `text(i)` to a `web` session.
async fn put(hub: &History, u: &UserKey, sid: &str, n: usize, text: impl Fn(usize) -> String) {
    hub.append(u, meta(sid, "web"), texts(n, text))
        .await
        .unwrap();
}

/// Run the foreground backfill flat out until every index is ready.
async fn drain(hub: &History, u: &UserKey, batch: usize) -> mpa_history::BackfillSummary {
    let opts = BackfillOptions {
        batch,
        paced: false,
        rebuild: false,
    };
    hub.backfill(u, opts, |_| {}).await.unwrap()
}

/// A discover and the index status that came with it.
async fn search(hub: &History, u: &UserKey, req: DiscoverRequest) -> (DiscoverResult, IndexStatus) {
    let r = hub
        .search(u, &current(None), SearchRequest::Discover(req))
        .await
        .unwrap();
    (r.outcome.discover(), r.index_status)
}

/// A discover of up to `limit` sessions.
fn upto(query: &str, limit: usize) -> DiscoverRequest {
    DiscoverRequest { limit, ..q(query) }
}

/// Summed progress of the building indexes (`None` once every index is ready).
async fn building_progress(hub: &History, u: &UserKey) -> Option<i64> {
    let s = states(hub, u).await;
    s.iter().any(|(_, st)| !st.is_ready()).then(|| {
        s.iter()
            .map(|(_, st)| match st {
                IndexState::Building { progress, .. } => *progress,
                _ => 0,
            })
            .sum()
    })
}

/// Waits (polling, with a deadline) until the background backfill commits another batch after
/// `seen`, or finishes.
async fn wait_for_a_batch(hub: &History, u: &UserKey, seen: Option<i64>) -> Option<i64> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let now = building_progress(hub, u).await;
        if now.is_none() || now != seen {
            return now;
        }
        assert!(
            Instant::now() < until,
            "the backfill stopped advancing at {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn states(hub: &History, u: &UserKey) -> Vec<(String, IndexState)> {
    hub.status(u)
        .await
        .unwrap()
        .backfill
        .into_iter()
        .map(|p| (p.index.to_owned(), p.state))
        .collect()
}

async fn wait_ready(hub: &History, u: &UserKey) {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let s = states(hub, u).await;
        if s.iter().all(|(_, st)| st.is_ready()) {
            return;
        }
        assert!(Instant::now() < until, "backfill did not finish: {s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tokenizer_version_change_rebuilds_cjk_and_gap_rows_stay_findable() {
    let dir = tempfile::tempdir().unwrap();
    let u = user("tokver");
    {
        let hub = hub_at(dir.path(), false, 500);
        let old = texts(30, |i| format!("第{i}条：订阅的剧集已经下载完成"));
        hub.append(&u, meta("old", "web"), old).await.unwrap();
        assert_eq!(tokenizer_version(&hub, &u), "1");
        mark_tokenizer_stale(&hub, &u);
    }
    let hub = hub_at(dir.path(), false, 7);
    let st = states(&hub, &u).await;
    assert_eq!(st[0].1, IndexState::Ready);
    assert_eq!(st[1].1, IndexState::Ready);
    assert_eq!(
        st[2],
        (
            "messages_fts_cjk".to_owned(),
            IndexState::Building {
                high: 30,
                progress: 0
            }
        )
    );

    // While building: index_status says so, yet the old rows are found through the gap scan.
    let (out, status) = search(&hub, &u, DiscoverRequest::new("订阅")).await;
    assert!(!status.messages_fts_cjk, "{out:?}");
    assert_eq!(out.search_path, "cjk");
    assert_eq!(session_ids(&out), vec!["old"]);
    let gap = out.gap_scan.clone().unwrap();
    assert_eq!(
        (gap.index, gap.unindexed_ids),
        ("messages_fts_cjk", [1, 30])
    );
    let mpa_history::recall::Snippet::Text(snippet) = &out.hits[0].snippet else {
        panic!("{out:?}")
    };
    assert!(snippet.contains("订阅"));

    // A row appended meanwhile (id > high) is indexed at once by the id-gated trigger.
    let new = texts(2, |_| "新订阅：沙丘".to_owned());
    hub.append(&u, meta("new", "web"), new).await.unwrap();
    let (out, _) = search(&hub, &u, DiscoverRequest::new("沙丘")).await;
    assert_eq!(session_ids(&out), vec!["new"]);
    assert_eq!(
        out.gap_scan.unwrap().hits,
        0,
        "found in the index, not the gap"
    );

    let mut seen = Vec::new();
    let summary = hub
        .backfill(
            &u,
            BackfillOptions {
                batch: 7,
                paced: false,
                rebuild: false,
            },
            |p| seen.push((p.done, p.total)),
        )
        .await
        .unwrap();
    assert_eq!(summary.resumed_from.total, 30);
    assert_eq!(
        summary.rows_indexed, 30,
        "each old row indexed exactly once"
    );
    assert_eq!(summary.batches, 5, "30 ids in batches of 7");
    assert_eq!(seen.first(), Some(&(0, 30)));
    assert_eq!(seen.last(), Some(&(30, 30)));
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "{seen:?}");

    let (out, status) = search(&hub, &u, upto("订阅", 5)).await;
    assert!(status.messages_fts_cjk);
    assert_eq!(out.search_path, "cjk");
    assert!(out.gap_scan.is_none());
    let mut ids = session_ids(&out);
    ids.sort();
    assert_eq!(ids, vec!["new", "old"]);
    assert!(hub.check(&u, false).await.unwrap().healthy());
    assert_eq!(
        tokenizer_version(&hub, &u),
        "1",
        "the rebuilt index records the current version"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn appends_and_deletes_racing_a_background_backfill_leave_every_index_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let u = user("racer");
    {
        let hub = hub_at(dir.path(), false, 500);
        for s in 0..12 {
            let m = texts(4, |i| {
                format!("session {s} line {i}: 磁力链接 magnet tracker 第{s}集")
            });
            hub.append(&u, meta(&format!("s{s}"), "web"), m)
                .await
                .unwrap();
        }
        // All three indexes missing (e.g. dropped by hand): the next open rebuilds them.
        raw(&hub, &u)
            .execute_batch(
                "DROP TABLE messages_fts; DROP TABLE messages_fts_trigram; DROP TABLE messages_fts_cjk;",
            )
            .unwrap();
    }
    let hub = hub_at(dir.path(), true, 3);
    let st = states(&hub, &u).await;
    assert!(
        st.iter()
            .all(|(_, s)| matches!(s, IndexState::Building { high: 48, .. })),
        "{st:?}"
    );
    // The append schedules the background task; then keep writing while it runs, a round after
    // each batch it commits.
    let mut seen = building_progress(&hub, &u).await;
    for round in 0..6 {
        let extra = texts(3, |i| format!("late {round}-{i} 磁力链接 magnet"));
        hub.append(&u, meta(&format!("late{round}"), "web"), extra)
            .await
            .unwrap();
        hub.delete_session(&u, &format!("s{}", round * 2))
            .await
            .unwrap();
        assert!(hub.backfill_scheduler_stats().scheduled <= 1);
        if seen.is_some() {
            seen = wait_for_a_batch(&hub, &u, seen).await;
        }
    }
    wait_ready(&hub, &u).await;
    let report = hub.check(&u, false).await.unwrap();
    assert!(report.healthy(), "{report:?}");
    assert!(report.indexes.iter().all(|i| i.ready && i.ok), "{report:?}");
    assert_eq!(report.messages, 12 * 4 - 6 * 4 + 6 * 3);

    for (query, path) in [("magnet", "fts5"), ("磁力链接", "cjk")] {
        let req = DiscoverRequest {
            detail: mpa_history::recall::Detail::Index,
            ..q(query)
        };
        let (out, _) = search(&hub, &u, req).await;
        assert_eq!(out.search_path, path, "{out:?}");
        let ids = session_ids(&out);
        for s in (0..12).step_by(2) {
            assert!(
                !ids.contains(&format!("s{s}")),
                "deleted s{s} found: {ids:?}"
            );
        }
        assert_eq!(ids.len(), 10, "6 kept + 6 late sessions, limit 10: {ids:?}");
    }
    for s in (1..12).step_by(2) {
        let (out, _) = search(&hub, &u, DiscoverRequest::new(format!("\"第{s}集\""))).await;
        assert_eq!(session_ids(&out), vec![format!("s{s}")], "{out:?}");
    }
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn paced_backfill_pauses_at_least_the_duty_cycle_between_batches() {
    let dir = tempfile::tempdir().unwrap();
    let u = user("pacer");
    let hub = hub_at(dir.path(), false, 500);
    put(&hub, &u, "a", 40, |i| format!("row {i} 电影")).await;
    let mut marks: Vec<(Instant, f64)> = Vec::new();
    hub.backfill(
        &u,
        BackfillOptions {
            batch: 10,
            paced: true,
            rebuild: true,
        },
        |p| marks.push((Instant::now(), p.last_batch_seconds)),
    )
    .await
    .unwrap();
    // Start report + 4 batches of 10 ids (three indexes each).
    assert_eq!(marks.len(), 5);
    for w in marks[1..].windows(2) {
        let gap = w[1].0 - w[0].0;
        let want = Duration::from_millis(200).max(Duration::from_secs_f64(4.0 * w[0].1));
        assert!(gap >= want, "pause {gap:?} < {want:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_cancels_between_batches_and_a_later_run_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let u = user("stopper");
    {
        let hub = hub_at(dir.path(), false, 500);
        for s in 0..5 {
            put(&hub, &u, &format!("s{s}"), 40, |i| {
                format!("s{s} row {i} 纪录片")
            })
            .await;
        }
        mark_tokenizer_stale(&hub, &u);
    }
    let hub = hub_at(dir.path(), true, 5);
    // A search opens the store (cjk building) and schedules the task.
    search(&hub, &u, DiscoverRequest::new("纪录片")).await;
    let until = Instant::now() + Duration::from_secs(30);
    let progress = loop {
        if let IndexState::Building { progress, .. } = states(&hub, &u).await[2].1
            && progress > 0
        {
            break progress;
        }
        assert!(Instant::now() < until, "backfill never advanced");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    hub.shutdown().await;
    let stats = hub.backfill_scheduler_stats();
    assert_eq!((stats.running, stats.scheduled), (0, 0), "{stats:?}");
    let after = states(&hub, &u).await[2].1;
    let IndexState::Building { progress: p1, high } = after else {
        panic!("finished before shutdown: {after:?}")
    };
    assert!(p1 >= progress && p1 < high);
    assert_eq!(p1 % 5, 0, "progress only moves by whole batches");
    // Shutdown waited for every task to end (running 0 above), and calls made afterwards
    // schedule nothing, so nothing can move the progress any more.
    search(&hub, &u, DiscoverRequest::new("纪录片")).await;
    let stats = hub.backfill_scheduler_stats();
    assert_eq!((stats.running, stats.scheduled), (0, 0), "{stats:?}");
    assert_eq!(
        states(&hub, &u).await[2].1,
        after,
        "nothing runs after shutdown"
    );

    let hub2 = hub_at(dir.path(), false, 500);
    let s = drain(&hub2, &u, 500).await;
    assert_eq!(s.resumed_from.done, p1 as u64);
    assert_eq!(s.rows_indexed as i64, high - p1);
    assert!(hub2.check(&u, false).await.unwrap().healthy());
}

#[tokio::test(flavor = "multi_thread")]
async fn at_most_one_task_per_user_and_eight_per_process() {
    let dir = tempfile::tempdir().unwrap();
    let users: Vec<UserKey> = (0..10).map(|i| user(&format!("many{i}"))).collect();
    {
        let hub = hub_at(dir.path(), false, 500);
        for u in &users {
            put(&hub, u, "s", 12, |i| format!("row {i} 动画")).await;
            mark_tokenizer_stale(&hub, u);
        }
    }
    // Batches of one row: each task needs 12 batches and 11 pauses of >= 0.2 s.
    let hub = hub_at(dir.path(), true, 1);
    for _ in 0..3 {
        for u in &users {
            search(&hub, u, DiscoverRequest::new("动画")).await;
        }
    }
    let stats = hub.backfill_scheduler_stats();
    assert_eq!(stats.scheduled, 10, "one task per user: {stats:?}");
    let until = Instant::now() + Duration::from_secs(90);
    let mut saw_full = false;
    loop {
        let s = hub.backfill_scheduler_stats();
        assert!(s.running <= 8 && s.peak_running <= 8, "{s:?}");
        assert!(s.scheduled <= 10, "{s:?}");
        saw_full |= s.running == 8;
        if s.scheduled == 0 {
            break;
        }
        assert!(Instant::now() < until, "tasks did not finish: {s:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(saw_full, "eight tasks ran at once");
    assert_eq!(hub.backfill_scheduler_stats().peak_running, 8);
    for u in &users {
        let (_, status) = search(&hub, u, DiscoverRequest::new("动画")).await;
        assert!(status.messages_fts_cjk);
        assert!(hub.check(u, false).await.unwrap().healthy());
    }
}

/// Corrupt the largest data block of one index's shadow table.
fn corrupt(hub: &History, u: &UserKey, table: &str) {
    raw(hub, u)
        .execute(
            &format!(
                "UPDATE {table}_data SET block = zeroblob(length(block)) \
                 WHERE id = (SELECT max(id) FROM {table}_data)"
            ),
            [],
        )
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn corruption_found_by_a_search_detaches_that_index_retries_and_rebuilds() {
    let e = env();
    let dir = e.dir.path().to_path_buf();
    let u = user("corrupt");
    let hub = hub_at(&dir, false, 500);
    hub.append(
        &u,
        meta("old", "cli"),
        texts(60, |i| {
            format!("Interstellar 星际穿越 download number {i} finished")
        }),
    )
    .await
    .unwrap();
    corrupt(&hub, &u, "messages_fts");

    let (out, status) = search(&hub, &u, DiscoverRequest::new("Interstellar")).await;
    assert_eq!(
        session_ids(&out),
        vec!["old"],
        "retried once, answered: {out:?}"
    );
    assert_eq!(out.search_path, "like", "the detached index is not read");
    assert!(!status.messages_fts);
    assert!(status.messages_fts_cjk);
    let st = states(&hub, &u).await;
    assert_eq!(st[0].1, IndexState::Detached);
    assert!(st[1].1.is_ready() && st[2].1.is_ready(), "{st:?}");
    let c = raw(&hub, &u);
    let triggers: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'messages_fts%' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert!(
        !triggers
            .iter()
            .any(|t| t.starts_with("messages_fts_a") || t.starts_with("messages_fts_b")),
        "the corrupt index's triggers are gone: {triggers:?}"
    );
    assert_eq!(
        triggers.len(),
        4,
        "the other indexes keep theirs: {triggers:?}"
    );
    let rows: i64 = c
        .query_row("SELECT COUNT(*) FROM messages", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 60, "message rows untouched");

    // Read mode and appends keep working.
    let read = hub
        .search(&u, &current(None), read_req("old"))
        .await
        .unwrap();
    assert_eq!(read.outcome.read().message_count, 60);
    hub.append(
        &u,
        meta("new", "cli"),
        texts(2, |_| "Interstellar rewatch 重温".into()),
    )
    .await
    .unwrap();

    // The next open (or the background task) rebuilds it through the backfill.
    let s = drain(&hub, &u, 1).await;
    assert_eq!(s.rows_indexed, 62);
    let (out, _) = search(&hub, &u, upto("Interstellar", 5)).await;
    assert_eq!(out.search_path, "fts5");
    let mut ids = session_ids(&out);
    ids.sort();
    assert_eq!(ids, vec!["new", "old"]);
    assert!(hub.check(&u, false).await.unwrap().healthy());
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_cjk_index_is_rebuilt_in_the_background_after_a_search() {
    let dir = tempfile::tempdir().unwrap();
    let u = user("corrupt-cjk");
    let hub = hub_at(dir.path(), true, 500);
    let session = |i: usize| SessionMeta {
        session_id: format!("s{i}"),
        source: "web".into(),
        ..Default::default()
    };
    for i in 0..4 {
        hub.append(
            &u,
            session(i),
            texts(25, |j| format!("第{i}部 字幕 下载 {j}")),
        )
        .await
        .unwrap();
    }
    corrupt(&hub, &u, "messages_fts_cjk");
    let (out, status) = search(&hub, &u, q("字幕")).await;
    assert!(!status.messages_fts_cjk, "{out:?}");
    assert_eq!(out.search_path, "like");
    assert_eq!(session_ids(&out).len(), 4);
    // The search scheduled the rebuild.
    wait_ready(&hub, &u).await;
    let (out, _) = search(&hub, &u, q("字幕")).await;
    assert_eq!(out.search_path, "cjk");
    assert_eq!(session_ids(&out).len(), 4);
    assert!(hub.check(&u, false).await.unwrap().healthy());
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn building_base_index_serves_english_queries_with_the_gap_scan() {
    let dir = tempfile::tempdir().unwrap();
    let u = user("base-gap");
    {
        let hub = hub_at(dir.path(), false, 500);
        put(&hub, &u, "old-ok", 4, |i| {
            format!("docker networking fixed {i}")
        })
        .await;
        put(&hub, &u, "old-broken", 4, |i| {
            format!("docker broken tls {i}")
        })
        .await;
        raw(&hub, &u)
            .execute_batch("DROP TABLE messages_fts;")
            .unwrap();
    }
    let hub = hub_at(dir.path(), false, 500);
    put(&hub, &u, "new", 2, |i| {
        format!("docker compose upgrade {i}")
    })
    .await;
    let newest = DiscoverRequest {
        sort: Sort::Newest,
        ..upto("docker", 5)
    };
    let (out, status) = search(&hub, &u, newest).await;
    assert_eq!(out.search_path, "fts5", "{out:?}");
    assert!(!status.messages_fts);
    let gap = out.gap_scan.clone().unwrap();
    assert_eq!((gap.unindexed_ids, gap.hits), ([1, 8], 8));
    // Every session's messages use the same clock (t0 + i): the newest rows are the last ones
    // of the 4-message sessions (ties broken by id), so gap rows sort in with indexed ones.
    assert_eq!(session_ids(&out), vec!["old-broken", "old-ok", "new"]);
    // NOT is honoured inside the gap too.
    let (out, _) = search(&hub, &u, upto("docker NOT broken", 5)).await;
    let mut ids = session_ids(&out);
    ids.sort();
    assert_eq!(ids, vec!["new", "old-ok"], "{out:?}");
    // Phrases keep their word order in the gap scan.
    let (out, _) = search(&hub, &u, DiscoverRequest::new("\"networking fixed\"")).await;
    assert_eq!(session_ids(&out), vec!["old-ok"], "{out:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn corruption_found_by_an_append_detaches_and_the_append_lands() {
    let dir = tempfile::tempdir().unwrap();
    let u = user("corrupt-append");
    let hub = hub_at(dir.path(), false, 500);
    for s in 0..3 {
        put(&hub, &u, &format!("s{s}"), 50, |i| {
            format!("Blade Runner 银翼杀手 copy {s} {i}")
        })
        .await;
    }
    // Zero every block of the base index: an insert has to read its structure record.
    raw(&hub, &u)
        .execute(
            "UPDATE messages_fts_data SET block = zeroblob(length(block))",
            [],
        )
        .unwrap();
    let report = hub
        .append(
            &u,
            meta("new", "web"),
            texts(5, |i| format!("Blade Runner 2049 {i}")),
        )
        .await
        .unwrap();
    assert_eq!(
        report.inserted, 5,
        "the append is retried once after the detach"
    );
    let st = states(&hub, &u).await;
    assert_eq!(st[0].1, IndexState::Detached, "{st:?}");
    assert!(st[1].1.is_ready() && st[2].1.is_ready(), "{st:?}");
    let read = hub
        .search(&u, &current(None), read_req("new"))
        .await
        .unwrap();
    assert_eq!(read.outcome.read().message_count, 5);
    let (out, _) = search(&hub, &u, q("Blade")).await;
    assert_eq!(out.search_path, "like");
    assert_eq!(session_ids(&out).len(), 4);
    drain(&hub, &u, 500).await;
    let (out, _) = search(&hub, &u, q("Blade")).await;
    assert_eq!(out.search_path, "fts5");
    assert_eq!(session_ids(&out).len(), 4);
    assert!(hub.check(&u, false).await.unwrap().healthy());
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_cjk_index_routes_fall_back_and_rows_written_meanwhile_are_found_after() {
    let dir = tempfile::tempdir().unwrap();
    let u = user("no-cjk");
    let hub = hub_at(dir.path(), false, 500);
    put(&hub, &u, "s1", 1, |_| "我们下载订阅成功了".into()).await;
    put(&hub, &u, "s2", 2, |i| ["去广西玩", "桂林山水"][i].into()).await;
    put(&hub, &u, "s3", 1, |_| "修改youer服务端的计划".into()).await;
    // The CJK index goes away as after a confirmed corruption (triggers dropped, detached);
    // this process keeps its store open and runs no background task, so it stays away.
    raw(&hub, &u)
        .execute_batch(
            "DROP TRIGGER messages_fts_cjk_ai; DROP TRIGGER messages_fts_cjk_bd; \
             INSERT INTO state_meta (key, value) VALUES ('messages_fts_cjk', 'detached');",
        )
        .unwrap();
    let route = |q: &'static str| {
        let hub = hub.clone();
        let u = u.clone();
        async move {
            let (r, status) = search(&hub, &u, upto(q, 5)).await;
            assert!(!status.messages_fts_cjk, "{r:?}");
            (r.search_path.to_owned(), session_ids(&r))
        }
    };
    // §18.24: 3+ characters without the CJK index → trigram.
    assert_eq!(
        route("下载订阅").await,
        ("trigram".into(), vec!["s1".into()])
    );
    // §18.25: 2 characters without it → like, still found.
    assert_eq!(route("订阅").await, ("like".into(), vec!["s1".into()]));
    // §18.27: 2-character OR terms are never sent to trigram.
    assert_eq!(
        route("广西 OR 桂林 OR 漓江").await,
        ("like".into(), vec!["s2".into()])
    );
    // §18.28: Latin fused to CJK through the trigram substring retry.
    assert_eq!(route("youer").await, ("trigram".into(), vec!["s3".into()]));

    // §18.30: written while the index was away, found through cjk once the rebuild is done.
    put(&hub, &u, "s4", 1, |_| "新的订阅规则已经保存".into()).await;
    drain(&hub, &u, 500).await;
    let (r, status) = search(&hub, &u, upto("订阅", 5)).await;
    assert_eq!(r.search_path, "cjk");
    assert!(status.messages_fts_cjk);
    let mut ids = session_ids(&r);
    ids.sort();
    assert_eq!(ids, vec!["s1", "s4"]);
    assert!(hub.check(&u, false).await.unwrap().healthy());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_background_backfill_backs_off_instead_of_retrying_on_every_call() {
    let dir = tempfile::tempdir().unwrap();
    let u = user("failing");
    {
        let hub = hub_at(dir.path(), false, 500);
        put(&hub, &u, "s", 10, |i| format!("plain english row {i}")).await;
        mark_tokenizer_stale(&hub, &u);
    }
    let hub = hub_at(dir.path(), true, 500);
    // Opening starts the rebuild; then the index's content view disappears, so every batch
    // fails (as a damaged file would).
    assert!(matches!(
        states(&hub, &u).await[2].1,
        IndexState::Building { .. }
    ));
    raw(&hub, &u)
        .execute_batch("DROP VIEW messages_fts_cjk_src;")
        .unwrap();
    search(&hub, &u, DiscoverRequest::new("english")).await;
    let until = Instant::now() + Duration::from_secs(30);
    while hub.backfill_scheduler_stats().scheduled > 0 {
        assert!(Instant::now() < until, "the failing task never ended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for _ in 0..5 {
        let (out, _) = search(&hub, &u, DiscoverRequest::new("english")).await;
        assert_eq!(out.search_path, "fts5");
        assert_eq!(
            hub.backfill_scheduler_stats().scheduled,
            0,
            "no new task while backing off"
        );
    }
    assert!(matches!(
        states(&hub, &u).await[2].1,
        IndexState::Building { progress: 0, .. }
    ));
    hub.shutdown().await;
}

#[test]
fn the_pause_is_four_batches_long_and_at_least_200_ms() {
    assert_eq!(
        pause_after(Duration::from_millis(10)),
        Duration::from_millis(200)
    );
    assert_eq!(
        pause_after(Duration::from_millis(100)),
        Duration::from_millis(400)
    );
}
