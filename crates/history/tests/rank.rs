//! The ranking's guarantees, each against FTS5 itself: the posting lists equal what FTS5
//! indexed, `mpa_rank` equals `bm25()` given the same idf, the expression model matches exactly
//! the rows FTS5 matches, and a walk returns exactly the order a full sort gives — also with
//! filters, rows above the last segment, and damaged lists.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_history::rank::expr::Query;
use mpa_history::rank::postings::Posting;
use mpa_history::rank::walk::parse_for_test;
use mpa_history::rank::*;
use mpa_history::{CapturedMessage, History, HistoryConfig, Provenance, Role, SessionMeta};
use mpa_protocol::UserId;
use mpa_redact::UserKey;
use rusqlite::Connection;
use std::collections::BTreeMap;

fn user() -> UserKey {
    UserKey::for_user(&UserId("rank-test".into()))
}

fn msg(uid: String, role: Role, content: String, tool_name: Option<&str>) -> CapturedMessage {
    CapturedMessage {
        message_uid: uid,
        role,
        content,
        tool_name: tool_name.map(str::to_owned),
        tool_call_id: None,
        tool_calls: None,
        ts: None,
        provenance: Provenance::Observed,
    }
}

/// Deterministic text from a small vocabulary, so terms repeat with varying frequencies and
/// document lengths (and old segments score differently from new ones).
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: [&str; 14] = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "Épsilon",
    "zeta",
    "订阅",
    "下载失败",
    "字幕",
    "三体",
    "dolby-vision",
    "x",
    "tracker",
    "REMUX",
];

fn text(g: &mut Gen, age: usize) -> String {
    let len = 1 + g.below(6 + (age as u64 % 7) * 3) as usize;
    let mut words = Vec::with_capacity(len);
    for _ in 0..len {
        let w = WORDS[g.below(WORDS.len() as u64) as usize];
        words.push(if g.below(5) == 0 {
            format!("{w}{w}")
        } else {
            w.to_owned()
        });
    }
    let sep = [" ", ", ", "。", " — ", ""][g.below(5) as usize];
    words.join(sep)
}

/// A store of `n` messages in sessions of 10 (every fifth a tool row with a body), with
/// statistics for complete segments of `size` ids.
async fn store(dir: &std::path::Path, n: usize, size: i64, seed: u64) -> History {
    let mut cfg = HistoryConfig::new(dir);
    cfg.background_backfill = false;
    cfg.rank_segment_ids = size;
    let h = History::new(cfg);
    let mut g = Gen(seed);
    let mut batches = Vec::new();
    for s in 0..n.div_ceil(10) {
        let sid = format!("s{s:05}");
        let source = if s % 9 == 4 { "cron" } else { "chat" };
        let msgs = (0..10)
            .filter(|i| s * 10 + i < n)
            .map(|i| {
                let age = s;
                match i % 5 {
                    4 => msg(
                        format!("{sid}-{i}"),
                        Role::Tool,
                        text(&mut g, age),
                        Some(["search", "tracker_status", "订阅"][g.below(3) as usize]),
                    ),
                    k => msg(
                        format!("{sid}-{i}"),
                        if k % 2 == 0 {
                            Role::User
                        } else {
                            Role::Assistant
                        },
                        text(&mut g, age),
                        None,
                    ),
                }
            })
            .collect();
        batches.push((
            SessionMeta {
                session_id: sid,
                source: source.into(),
                ..Default::default()
            },
            msgs,
        ));
        if batches.len() == 50 {
            h.append_many(&user(), std::mem::take(&mut batches))
                .await
                .unwrap();
        }
    }
    if !batches.is_empty() {
        h.append_many(&user(), batches).await.unwrap();
    }
    h.build_ranking(&user(), |_, _| {}).await.unwrap();
    h
}

fn connect(h: &History) -> Connection {
    mpa_history::store::pool::open_connection(
        &h.db_path(&user()),
        std::time::Duration::from_secs(5),
        mpa_protocol::Durability::Durable,
    )
    .unwrap()
}

fn fts5_varints(buf: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let mut v = 0u64;
        for i in 0..9 {
            let b = buf[at];
            at += 1;
            if i == 8 {
                v = (v << 8) | u64::from(b);
                break;
            }
            v = (v << 7) | u64::from(b & 0x7F);
            if b & 0x80 == 0 {
                break;
            }
        }
        out.push(v);
    }
    out
}

/// Per document of `lo..=hi`, what FTS5 stored: (length, searched-column term frequencies).
fn fts5_documents(
    conn: &Connection,
    index: RankIndex,
    lo: i64,
    hi: i64,
) -> BTreeMap<i64, (u32, BTreeMap<Vec<u8>, u32>)> {
    let table = index.table();
    let mut docs: BTreeMap<i64, (u32, BTreeMap<Vec<u8>, u32>)> = BTreeMap::new();
    let mut st = conn
        .prepare(&format!(
            "SELECT id, sz FROM {table}_docsize WHERE id BETWEEN ?1 AND ?2"
        ))
        .unwrap();
    let rows = st
        .query_map([lo, hi], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
        })
        .unwrap();
    for row in rows {
        let (id, sz) = row.unwrap();
        let len: u64 = fts5_varints(&sz).iter().sum();
        docs.insert(id, (len as u32, BTreeMap::new()));
    }
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.v_{table} USING fts5vocab(main, {table}, instance);"
    ))
    .unwrap();
    let cols = index.columns();
    let mut st = conn
        .prepare(&format!(
            "SELECT term, doc, col FROM temp.v_{table} WHERE doc BETWEEN ?1 AND ?2"
        ))
        .unwrap();
    let rows = st
        .query_map([lo, hi], |r| {
            Ok((
                r.get_ref(0)?.as_bytes()?.to_vec(),
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (term, doc, col) = row.unwrap();
        let c = cols.iter().position(|n| *n == col).unwrap();
        if c < index.searched_columns() {
            *docs.get_mut(&doc).unwrap().1.entry(term).or_default() += 1;
        }
    }
    docs
}

#[tokio::test]
async fn posting_lists_equal_what_fts5_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let h = store(dir.path(), 1200, 200, 7).await;
    let conn = connect(&h);
    for index in RankIndex::ALL {
        let segments = stats::segments(&conn, index).unwrap();
        assert_eq!(
            segments.len(),
            6,
            "{index:?}: 1200 ids, six complete segments of 200"
        );
        for seg in &segments {
            let docs = fts5_documents(&conn, index, seg.lo, seg.hi);
            let built = stats::build(&conn, index, seg.lo, seg.hi).unwrap();
            assert_eq!(built.docs as usize, docs.len(), "{index:?} {}", seg.lo);
            let mut want: BTreeMap<Vec<u8>, Vec<Posting>> = BTreeMap::new();
            for (id, (len, terms)) in &docs {
                for (term, tf) in terms {
                    want.entry(term.clone()).or_default().push(Posting {
                        id: *id,
                        tf: *tf,
                        len: *len,
                    });
                }
            }
            let got: BTreeMap<Vec<u8>, Vec<Posting>> = built.terms.iter().cloned().collect();
            assert_eq!(got.len(), built.terms.len(), "terms are unique");
            assert_eq!(got, want, "{index:?} segment {}", seg.lo);
            // What was written decodes to what was built.
            for (term, list) in built.terms.iter().take(20) {
                let stored = stats::term(&conn, index, term).unwrap();
                let (df, blob) = &stored[&seg.lo];
                assert_eq!(*df as usize, list.len());
                assert_eq!(postings::decode(seg.lo, seg.hi, blob).as_ref(), Some(list));
            }
        }
    }
}

#[test]
fn posting_blobs_round_trip_and_garbage_is_refused() {
    let list = vec![
        Posting {
            id: 5,
            tf: 1,
            len: 3,
        },
        Posting {
            id: 6,
            tf: 200,
            len: 70_000,
        },
        Posting {
            id: 300,
            tf: 2,
            len: 9,
        },
    ];
    let blob = postings::encode(1, &list);
    assert_eq!(postings::decode(1, 300, &blob), Some(list.clone()));
    assert_eq!(
        postings::decode(1, 299, &blob),
        None,
        "an id past the segment"
    );
    assert_eq!(postings::decode(1, 300, &[]), None);
    assert_eq!(
        postings::decode(1, 300, &blob[..blob.len() - 1]),
        None,
        "truncated"
    );
    let mut trailing = blob.clone();
    trailing.push(0);
    assert_eq!(postings::decode(1, 300, &trailing), None, "trailing bytes");
    assert_eq!(
        postings::decode(1, 300, &[1, 0, 1, 1]),
        None,
        "an id repeated"
    );
    assert_eq!(
        postings::decode(1, 300, &[1, 1, 0, 1]),
        None,
        "a zero frequency"
    );
}

/// FTS5's own idf for each phrase, from exact counts (what `bm25()` computes per statement).
fn fts5_idf(conn: &Connection, index: RankIndex, q: &Query) -> Vec<f64> {
    let table = index.table();
    let rows: f64 = conn
        .query_row(&format!("SELECT count(*) FROM {table}_docsize"), [], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap() as f64;
    q.phrases
        .iter()
        .map(|p| {
            let n: i64 = conn
                .query_row(
                    &format!("SELECT count(*) FROM {table} WHERE {table} MATCH ?1"),
                    [index.match_expr(&p.text)],
                    |r| r.get(0),
                )
                .unwrap();
            idf(rows, n as f64)
        })
        .collect()
}

const QUERIES: [(&str, RankIndex); 12] = [
    ("alpha", RankIndex::Base),
    ("alpha beta", RankIndex::Base),
    ("alpha OR zeta", RankIndex::Base),
    ("gamma NOT delta", RankIndex::Base),
    ("\"dolby-vision\" tracker", RankIndex::Base),
    ("epsilon OR x NOT remux", RankIndex::Base),
    ("alpha beta NOT gamma delta OR zeta AND x", RankIndex::Base),
    ("\"订阅\"", RankIndex::Cjk),
    ("\"下载失败\"", RankIndex::Cjk),
    ("\"三体\" \"订阅\"", RankIndex::Cjk),
    ("\"字幕\" OR \"三体\"", RankIndex::Cjk),
    ("\"订阅\" NOT \"字幕\"", RankIndex::Cjk),
];

#[tokio::test]
async fn mpa_rank_is_bm25_given_the_same_idf() {
    let dir = tempfile::tempdir().unwrap();
    let h = store(dir.path(), 600, 1 << 20, 11).await;
    let conn = connect(&h);
    for (expr, index) in QUERIES {
        let table = index.table();
        let q = parse_for_test(expr, index).unwrap();
        let idf = fts5_idf(&conn, index, &q);
        let plan = plan(&conn, index, expr, &Default::default(), &unbounded())
            .unwrap()
            .unwrap();
        // The averages record decodes to FTS5's own row count (the idf of the plan uses it).
        assert_eq!(plan.idf().len(), q.phrases.len());
        assert_eq!(
            plan.idf(),
            idf.as_slice(),
            "{expr}: exact counts on a small store"
        );
        let args: String = idf.iter().map(|v| format!(", {v:e}")).collect();
        let sql = format!(
            "SELECT rowid, bm25({table}), {}({table}, ?2{args}) FROM {table} WHERE {table} MATCH ?1",
            ffi::RANK_FUNCTION
        );
        let mut st = conn.prepare(&sql).unwrap();
        let got: Vec<(i64, f64, f64)> = st
            .query_map(
                rusqlite::params![index.match_expr(expr), plan.avgdl()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(!got.is_empty(), "{expr} matches something");
        for (id, bm25, ours) in got {
            assert!(
                (ours + bm25).abs() <= 1e-12 * bm25.abs().max(1.0),
                "{expr} row {id}: bm25 {bm25} vs mpa_rank {ours}"
            );
        }
    }
    // A wrong number of idf arguments is an error, never a silent score.
    let err = conn.query_row(
        "SELECT mpa_rank(messages_fts, 1.0) FROM messages_fts WHERE messages_fts MATCH 'alpha beta'",
        [],
        |r| r.get::<_, f64>(0),
    );
    assert!(err.is_err());
}

/// Random expressions over four words, each document holding a subset: the model's boolean
/// evaluation matches FTS5's MATCH exactly (precedence of implicit AND, NOT, AND, OR), and the
/// phrases it counts are those whose occurrences FTS5 reports to `mpa_rank`.
#[test]
fn the_expression_model_matches_what_fts5_matches() {
    let conn = Connection::open_in_memory().unwrap();
    ffi::register_rank_function(&conn).unwrap();
    conn.execute_batch("CREATE VIRTUAL TABLE t USING fts5(a);")
        .unwrap();
    let words = ["w0", "w1", "w2", "w3"];
    for mask in 0u32..16 {
        let doc: Vec<&str> = (0..4)
            .filter(|b| mask & (1 << b) != 0)
            .map(|b| words[b])
            .collect();
        conn.execute(
            "INSERT INTO t(rowid, a) VALUES (?1, ?2)",
            rusqlite::params![mask + 1, format!("pad {}", doc.join(" "))],
        )
        .unwrap();
    }
    let mut g = Gen(99);
    let ops = ["", " AND ", " OR ", " NOT ", " "];
    let mut not_free = 0;
    for _ in 0..600 {
        let n = 1 + g.below(5) as usize;
        let mut expr = String::new();
        let mut phrase_words = Vec::new();
        for i in 0..n {
            if i > 0 {
                expr.push_str(ops[1 + g.below(4) as usize]);
            }
            let w = g.below(4) as usize;
            phrase_words.push(w);
            expr.push_str(words[w]);
        }
        let q = parse_for_test(&expr, RankIndex::Base).expect("parses");
        assert_eq!(q.phrases.len(), n);
        let mut st = conn
            .prepare("SELECT rowid FROM t WHERE t MATCH ?1 ORDER BY rowid")
            .unwrap();
        let fts5: Vec<u32> = st
            .query_map([&expr], |r| r.get::<_, u32>(0))
            .unwrap()
            .map(|r| r.unwrap() - 1)
            .collect();
        let ours: Vec<u32> = (0u32..16)
            .filter(|mask| {
                let present = phrase_words
                    .iter()
                    .enumerate()
                    .filter(|(_, w)| mask & (1 << **w) != 0)
                    .fold(0u64, |m, (p, _)| m | (1 << p));
                q.matches(present)
            })
            .collect();
        assert_eq!(ours, fts5, "{expr}");
        // Scores with every idf 1 and avgdl 1: each word occurs once, so a phrase adds its
        // term exactly when FTS5 reports it.
        let args: String = (0..n).map(|_| ", 1.0").collect();
        let mut st = conn
            .prepare(&format!(
                "SELECT rowid, mpa_rank(t, 1.0{args}) FROM t WHERE t MATCH ?1 ORDER BY rowid"
            ))
            .unwrap();
        let scores: Vec<(u32, f64)> = st
            .query_map([&expr], |r| Ok((r.get::<_, u32>(0)? - 1, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (mask, fts5_score) in scores {
            let present = phrase_words
                .iter()
                .enumerate()
                .filter(|(_, w)| mask & (1 << **w) != 0)
                .fold(0u64, |m, (p, _)| m | (1 << p));
            let d = f64::from(1 + mask.count_ones());
            let ones = vec![1.0; n];
            let score_of = |counted: u64| {
                let freq: Vec<f64> = (0..n)
                    .map(|p| if counted & (1 << p) != 0 { 1.0 } else { 0.0 })
                    .collect();
                bm25(&freq, &ones, d, 1.0)
            };
            // Every phrase the row holds is a bound of what FTS5 counts; without NOT the model
            // is exact.
            assert!(
                fts5_score <= score_of(present),
                "{expr} on {mask:04b}: bound"
            );
            if !q.has_not() {
                let exact = score_of(q.counted(present));
                assert_eq!(exact, fts5_score, "{expr} on document {mask:04b}");
                not_free += 1;
            }
        }
    }
    assert!(
        not_free > 500,
        "{not_free} scored rows of NOT-free expressions compared"
    );
    for unsupported in [
        "alpha*",
        "a:b",
        "(a)",
        "NEAR(a b)",
        "^a",
        "a + b",
        "a - b",
        "\"x",
    ] {
        assert!(
            parse_for_test(unsupported, RankIndex::Base).is_none(),
            "{unsupported}"
        );
    }
}

/// Every row's score through the plan's numbers, best first (ties: newer first).
fn full_sort(conn: &Connection, index: RankIndex, expr: &str, p: &walk::Plan) -> Vec<(f64, i64)> {
    let table = index.table();
    let args: String = p.idf().iter().map(|v| format!(", {v:e}")).collect();
    let sql = format!(
        "SELECT rowid, {}({table}, ?2{args}) FROM {table} WHERE {table} MATCH ?1",
        ffi::RANK_FUNCTION
    );
    let mut st = conn.prepare(&sql).unwrap();
    let mut all: Vec<(f64, i64)> = st
        .query_map(rusqlite::params![index.match_expr(expr), p.avgdl()], |r| {
            Ok((r.get(1)?, r.get(0)?))
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    all.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    all
}

fn no_filters() -> mpa_history::search::Filters {
    mpa_history::search::Filters {
        roles: Vec::new(),
        after: None,
        before: None,
        session_id: None,
        exclude_hidden: false,
    }
}

/// The plan of a query the lists can rank, with a fresh list cache.
fn planned(conn: &Connection, index: RankIndex, expr: &str) -> walk::Plan {
    plan(conn, index, expr, &Default::default(), &unbounded())
        .unwrap()
        .unwrap_or_else(|| panic!("{expr}: not plannable"))
}

/// A walk of `p` through the rows that pass `filters`.
fn walk_of<'c>(
    conn: &'c Connection,
    p: walk::Plan,
    filters: &mpa_history::search::Filters,
) -> Walk<'c> {
    let (check, params) = mpa_history::search::filter_check(conn, filters).unwrap();
    Walk::new(conn, p, check, params, unbounded()).unwrap()
}

/// A budget no test query spends.
fn unbounded() -> mpa_history::budget::Budget {
    mpa_history::budget::Budget::new(std::time::Duration::from_secs(3600), None)
}

/// The ids a walk yields, in its order, to the end.
fn drain(w: &mut Walk<'_>) -> Vec<i64> {
    std::iter::from_fn(|| w.next_row().unwrap().map(|c| c.id)).collect()
}

#[tokio::test]
async fn walks_return_the_full_sort_order_mostly_from_posting_lists() {
    let dir = tempfile::tempdir().unwrap();
    let h = store(dir.path(), 4000, 250, 3).await;
    let conn = connect(&h);
    let mut confirmed = 0;
    for (expr, index) in QUERIES {
        let p = planned(&conn, index, expr);
        let all = full_sort(&conn, index, expr, &p);
        assert!(!all.is_empty(), "{expr}");
        let mut w = walk_of(&conn, p, &no_filters());
        // 4000 ids in complete segments of 250: nothing is left for FTS5 to score.
        assert_eq!(w.rows_scored_by_fts5, 0, "{expr}");
        assert!(w.postings_read >= all.len(), "{expr}");
        let want: Vec<i64> = all.iter().map(|r| r.1).collect();
        assert_eq!(drain(&mut w), want, "{expr}: every row, in order");
        confirmed += w.confirmed;
    }
    assert!(
        confirmed > 0,
        "phrases of several tokens are confirmed by FTS5"
    );
}

/// Regression (issue 24, "session_search outruns its deadline"): SQLite's progress handler
/// never sees the Rust side of a ranked search, so the plan and the walk check the search's
/// budget themselves. On a bare connection (no progress handler), only those checks can stop
/// them.
#[tokio::test]
async fn session_search_outruns_its_deadline_the_ranking_stops_when_its_budget_is_spent() {
    use mpa_history::budget::{Budget, Stop};
    use mpa_history::error::HistoryError;
    let dir = tempfile::tempdir().unwrap();
    let h = store(dir.path(), 2000, 250, 3).await;
    let conn = connect(&h);
    let spent = Budget::new(std::time::Duration::ZERO, None);
    for (expr, index) in QUERIES {
        let out = plan(&conn, index, expr, &Default::default(), &spent);
        assert!(
            matches!(out, Err(HistoryError::DeadlineExceeded)),
            "{expr}: {:?}",
            out.map(|p| p.is_some())
        );
    }
    // A caller that stops waiting stops a walk planned in time.
    let (expr, index) = QUERIES[0];
    let p = planned(&conn, index, expr);
    let (check, params) = mpa_history::search::filter_check(&conn, &no_filters()).unwrap();
    let stop = Stop::new(std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)));
    let budget = Budget::new(std::time::Duration::from_secs(3600), Some(stop.clone()));
    let mut w = Walk::new(&conn, p, check, params, budget).unwrap();
    assert!(w.next_row().unwrap().is_some());
    stop.set();
    assert!(matches!(w.next_row(), Err(HistoryError::Cancelled)));
}

#[tokio::test]
async fn rows_above_the_last_segment_are_scored_by_fts5_in_the_same_order() {
    let dir = tempfile::tempdir().unwrap();
    // 3,100 ids: 12 segments of 250 and 100 ids above them.
    let h = store(dir.path(), 3100, 250, 13).await;
    let conn = connect(&h);
    for (expr, index) in QUERIES {
        let p = planned(&conn, index, expr);
        let all = full_sort(&conn, index, expr, &p);
        let mut w = walk_of(&conn, p, &no_filters());
        // Each phrase's rows above the segments come from FTS5 (at least every matching row).
        let tail = all.iter().filter(|r| r.1 > 3000).count();
        assert!(w.rows_scored_by_fts5 >= tail && tail > 0, "{expr}");
        let want: Vec<i64> = all.iter().map(|r| r.1).collect();
        assert_eq!(drain(&mut w), want, "{expr}");
    }
}

#[tokio::test]
async fn filtered_walks_skip_rows_without_losing_order() {
    let dir = tempfile::tempdir().unwrap();
    let h = store(dir.path(), 3000, 250, 5).await;
    let conn = connect(&h);
    for (expr, index) in QUERIES {
        let p = planned(&conn, index, expr);
        let all = full_sort(&conn, index, expr, &p);
        let f = mpa_history::search::Filters {
            roles: vec!["assistant"],
            after: None,
            before: None,
            session_id: None,
            exclude_hidden: true,
        };
        let mut w = walk_of(&conn, p, &f);
        let mut got = Vec::new();
        while let Some(c) = w.next_row().unwrap() {
            assert_eq!(c.role, "assistant");
            got.push(c.id);
        }
        let assistant: std::collections::HashSet<i64> = conn
            .prepare("SELECT id FROM messages WHERE role = 'assistant'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let want: Vec<i64> = all
            .iter()
            .map(|r| r.1)
            .filter(|id| assistant.contains(id))
            .collect();
        assert_eq!(got, want, "{expr}");
    }
}

#[tokio::test]
async fn damaged_statistics_cost_speed_never_results() {
    let dir = tempfile::tempdir().unwrap();
    let h = store(dir.path(), 2000, 250, 9).await;
    let conn = connect(&h);
    let before: Vec<Vec<i64>> = QUERIES
        .iter()
        .map(|(e, i)| {
            full_sort(&conn, *i, e, &planned(&conn, *i, e))
                .iter()
                .map(|r| r.1)
                .collect()
        })
        .collect();
    // Unreadable posting lists: those segments are scored through FTS5 instead.
    conn.execute_batch(
        "UPDATE rank_postings SET postings = x'ff' WHERE lo = 1; \
         UPDATE rank_postings SET postings = x'0501' WHERE lo = 251;",
    )
    .unwrap();
    for ((expr, index), want) in QUERIES.iter().zip(before) {
        let mut w = walk_of(&conn, planned(&conn, *index, expr), &no_filters());
        assert!(
            w.rows_scored_by_fts5 > 0,
            "{expr}: damaged segments go to FTS5"
        );
        let got = drain(&mut w);
        assert_eq!(got.len(), want.len(), "{expr}");
        let mut a = got.clone();
        let mut b = want.clone();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "{expr}: the same rows");
    }
}

/// Through the public search: deleted sessions never come back from the lists, and lists that
/// cannot be read (a dropped table) cost speed, never the answer.
#[tokio::test]
async fn deleted_rows_and_lost_lists_never_change_what_discover_finds() {
    use mpa_history::recall::{DiscoverRequest, SearchOutcome};
    let dir = tempfile::tempdir().unwrap();
    let h = store(dir.path(), 3000, 250, 21).await;
    let discover = |q: &str| {
        let h = h.clone();
        let q = q.to_owned();
        async move {
            let mut req = DiscoverRequest::new(&q);
            req.limit = 10;
            let r = h
                .search(
                    &user(),
                    &mpa_history::SearchContext::default(),
                    mpa_history::SearchRequest::Discover(req),
                )
                .await
                .unwrap();
            let SearchOutcome::Discover(d) = r.outcome else {
                panic!("{:?}", r.outcome)
            };
            d.hits
                .into_iter()
                .map(|h| (h.session_id, h.match_message_id))
                .collect::<Vec<_>>()
        }
    };
    let before = discover("alpha beta").await;
    assert!(before.len() >= 3, "{before:?}");
    let (gone, _) = before[0].clone();
    h.delete_session(&user(), &gone).await.unwrap();
    let after = discover("alpha beta").await;
    assert!(after.iter().all(|(s, _)| *s != gone), "{after:?}");
    assert_eq!(after[..2], before[1..3], "the others keep their order");
    // The lists are derived data: without them the same hits come from bm25() (whose idf
    // no longer counts the deleted rows, so only the set is compared).
    connect(&h)
        .execute_batch("DROP TABLE rank_postings;")
        .unwrap();
    let mut without = discover("alpha beta").await;
    let mut with = after.clone();
    without.sort();
    with.sort();
    assert_eq!(without, with);
}

/// Lists kept between searches are never used for segments they do not cover: after a new
/// segment is summarised, a row in it is found at once.
#[tokio::test]
async fn lists_kept_between_searches_follow_new_segments() {
    use mpa_history::recall::{DiscoverRequest, SearchOutcome};
    let dir = tempfile::tempdir().unwrap();
    let h = store(dir.path(), 2000, 250, 17).await;
    let top = |q: &str| {
        let h = h.clone();
        let q = q.to_owned();
        async move {
            let r = h
                .search(
                    &user(),
                    &mpa_history::SearchContext::default(),
                    mpa_history::SearchRequest::Discover(DiscoverRequest::new(&q)),
                )
                .await
                .unwrap();
            let SearchOutcome::Discover(d) = r.outcome else {
                panic!("{:?}", r.outcome)
            };
            d.hits.into_iter().map(|h| h.session_id).collect::<Vec<_>>()
        }
    };
    assert!(!top("zeta").await.contains(&"late".to_owned()));
    // 250 more messages complete a new segment; one of them is the best match there is.
    let mut msgs: Vec<CapturedMessage> = (0..249)
        .map(|i| {
            msg(
                format!("late-{i}"),
                Role::User,
                "nothing to see".into(),
                None,
            )
        })
        .collect();
    msgs.push(msg(
        "late-best".into(),
        Role::User,
        "zeta zeta zeta".into(),
        None,
    ));
    let meta = SessionMeta {
        session_id: "late".into(),
        source: "chat".into(),
        ..Default::default()
    };
    let batches: Vec<_> = msgs
        .chunks(100)
        .map(|c| (meta.clone(), c.to_vec()))
        .collect();
    h.append_many(&user(), batches).await.unwrap();
    assert_eq!(
        h.build_ranking(&user(), |_, _| {})
            .await
            .unwrap()
            .segments_written,
        2
    );
    assert_eq!(top("zeta").await.first().map(String::as_str), Some("late"));
}

/// Times the ranked plan and walk of the benchmark's queries on a kept benchmark database:
/// `MPA_PROBE_DB=…/state.db cargo test --release -p mpa-history --lib probe -- --ignored
/// --nocapture`.
#[test]
#[ignore = "needs MPA_PROBE_DB, a kept `mpagent bench history` database"]
fn probe() {
    let Ok(db) = std::env::var("MPA_PROBE_DB") else {
        return;
    };
    let conn = mpa_history::store::pool::open_connection(
        std::path::Path::new(&db),
        std::time::Duration::from_secs(5),
        mpa_protocol::Durability::Durable,
    )
    .unwrap();
    let queries = [
        ("rename plex library", RankIndex::Base),
        ("rename OR plex OR library", RankIndex::Base),
        ("tracker 403", RankIndex::Base),
        ("\"下载失败\"", RankIndex::Cjk),
        ("\"订阅\"", RankIndex::Cjk),
    ];
    let high = stats::id_high_water(&conn).unwrap();
    let segs = stats::segments(&conn, RankIndex::Base).unwrap();
    println!("high {high} segments {} last {:?}", segs.len(), segs.last());
    for round in 0..3 {
        // One cache per round, as one search shares it between its routes.
        let cache = Default::default();
        for (q, index) in queries {
            let t = std::time::Instant::now();
            let p = plan(&conn, index, q, &cache, &unbounded())
                .unwrap()
                .unwrap();
            let planned = t.elapsed();
            let (fts5_rows, postings) = (p.rows_scored_by_fts5, p.postings_read);
            let mut w = walk_of(&conn, p, &no_filters());
            for _ in 0..10 {
                w.next_row().unwrap();
            }
            let walked = t.elapsed();
            let enough = w.at_least(300).unwrap();
            println!(
                "{round} {q}: plan {planned:?} ({postings} postings, {fts5_rows} rows by FTS5) \
                 walk {:?} at_least {:?} ({enough}) confirmed {}",
                walked - planned,
                t.elapsed() - walked,
                w.confirmed
            );
        }
    }
}

/// The history of a kept benchmark directory (no background tasks).
fn probe_history(dir: &str, segment_ids: Option<i64>) -> History {
    let mut cfg = HistoryConfig::new(std::path::Path::new(dir).join("data"));
    cfg.background_backfill = false;
    if let Some(n) = segment_ids {
        cfg.rank_segment_ids = n;
    }
    History::new(cfg)
}

/// The benchmark's user.
fn bench_key() -> UserKey {
    UserKey::for_user(&UserId("bench-history".into()))
}

/// Appends `MPA_PROBE_TAIL` messages (default 8,000: about one segment) of another corpus seed
/// to a kept benchmark directory `MPA_PROBE_DIR`, so the ids above the last segment — scored by
/// FTS5 — are as many as they get in use: `cargo test --release -p mpa-history --lib
/// probe_tail -- --ignored`.
#[tokio::test]
#[ignore = "needs MPA_PROBE_DIR, a kept `mpagent bench history` directory"]
async fn probe_tail() {
    let Ok(dir) = std::env::var("MPA_PROBE_DIR") else {
        return;
    };
    let n: usize = std::env::var("MPA_PROBE_TAIL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8000);
    let h = probe_history(&dir, None);
    let mut lines = Vec::new();
    mpa_history::corpus::generate(n, 4242, |l| lines.push(l.replace("\"s0", "\"tail-s0")));
    let stats = mpa_history::import::import_reader(
        &h,
        &bench_key(),
        "bench-history",
        std::io::Cursor::new(lines.join("\n")),
        |_| {},
    )
    .await
    .unwrap();
    println!("{stats:?}");
}

/// Rebuilds the posting lists of a kept benchmark directory `MPA_PROBE_DIR` on a grid of
/// `MPA_PROBE_SEGMENT_IDS` ids (to compare segment sizes with `probe`).
#[tokio::test]
#[ignore = "needs MPA_PROBE_DIR, a kept `mpagent bench history` directory"]
async fn probe_regrid() {
    let (Ok(dir), Some(size)) = (
        std::env::var("MPA_PROBE_DIR"),
        std::env::var("MPA_PROBE_SEGMENT_IDS")
            .ok()
            .and_then(|v| v.parse().ok()),
    ) else {
        return;
    };
    let h = probe_history(&dir, Some(size));
    let sum = h
        .build_ranking(
            &UserKey::for_user(&UserId("bench-history".into())),
            |_, _| {},
        )
        .await
        .unwrap();
    println!("{sum:?}");
}

/// Times whole discover calls (the benchmark's queries, `MPA_PROBE_ROUNDS` rounds) on a kept
/// benchmark directory `MPA_PROBE_DIR`, for profiling.
#[tokio::test]
#[ignore = "needs MPA_PROBE_DIR, a kept `mpagent bench history` directory"]
async fn probe_search() {
    let Ok(dir) = std::env::var("MPA_PROBE_DIR") else {
        return;
    };
    let rounds: usize = std::env::var("MPA_PROBE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let h = probe_history(&dir, None);
    let key = bench_key();
    let mut times: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for _ in 0..rounds {
        for q in mpa_history::bench::BENCH_QUERIES {
            let t = std::time::Instant::now();
            h.search(
                &key,
                &mpa_history::SearchContext::default(),
                mpa_history::SearchRequest::Discover(mpa_history::recall::DiscoverRequest::new(q)),
            )
            .await
            .unwrap();
            times
                .entry(q)
                .or_default()
                .push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    for (q, t) in times {
        let mut t = t;
        t.sort_by(f64::total_cmp);
        println!("{q}: min {:.1} median {:.1} ms", t[0], t[t.len() / 2]);
    }
}
