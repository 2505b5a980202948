//! Tokenizer throughput and FTS5 insert throughput, `cjk_unicode61` against plain `unicode61`.
//!
//! Run: `cargo bench -p mpa-history --bench tokenizer`. Results: docs/benchmarks/tokenizer.md.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use divan::counter::BytesCount;
use mpa_history::tokenizer::{TokenizeReason, register_cjk_tokenizer, tokenize};
use rusqlite::Connection;

fn main() {
    // `MPA_BENCH_CPU=1`: on a shared machine wall-clock samples are noisy, so also report
    // throughput over on-CPU time (Linux `/proc/thread-self/schedstat`).
    if let Some(filter) = std::env::var_os("MPA_BENCH_CPU") {
        cpu_time_report(&filter.to_string_lossy());
    } else {
        divan::main();
    }
}

fn on_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// Best of `rounds` on-CPU times for `work`, as MB/s of `bytes`.
fn cpu_mb_per_s(bytes: usize, rounds: usize, mut work: impl FnMut()) -> f64 {
    let mut best = u64::MAX;
    for _ in 0..rounds {
        let Some(before) = on_cpu_ns() else {
            return f64::NAN;
        };
        work();
        let after = on_cpu_ns().unwrap_or(before);
        best = best.min(after.saturating_sub(before).max(1));
    }
    bytes as f64 / (best as f64 / 1e9) / 1e6
}

/// Prints the lines whose name contains `filter` (`1` or empty: all).
fn cpu_time_report(filter: &str) {
    let wanted = |name: &str| filter == "1" || name.contains(filter);
    let mixed = mixed_corpus(CORPUS_BYTES);
    let english = english_corpus(CORPUS_BYTES);
    for (name, docs) in [("mixed", &mixed), ("english", &english)] {
        let bytes: usize = docs.iter().map(String::len).sum();
        let mut tokens = 0usize;
        if wanted(&format!("tokenize_document/{name}")) {
            let tokenize_rate = cpu_mb_per_s(bytes, 20, || {
                for doc in docs.iter() {
                    tokenize(doc, TokenizeReason::Document, &mut |_, _, _, _| tokens += 1);
                }
            });
            println!("tokenize_document/{name}: {tokenize_rate:.1} MB/s (on-CPU, best of 20)");
        }
        for tokenizer in [
            "cjk_unicode61",
            "cjk_unicode61+prefix1",
            "unicode61",
            "trigram",
        ] {
            if !wanted(&format!("fts_insert_{name}/{tokenizer}")) {
                continue;
            }
            let rate = cpu_mb_per_s(bytes, 7, || insert_all(tokenizer, docs));
            println!("fts_insert_{name}/{tokenizer}: {rate:.1} MB/s (on-CPU, best of 7)");
        }
    }
}

const CHINESE: &[&str] = &[
    "帮我",
    "订阅",
    "流浪地球",
    "的",
    "版本",
    "下载",
    "完成",
    "字幕",
    "中文",
    "电影",
    "剧集",
    "第二季",
    "更新",
    "了吗",
    "请",
    "检查",
    "站点",
    "种子",
    "做种",
    "失败",
    "整理",
    "媒体库",
    "刮削",
    "海报",
    "识别",
    "错误",
    "重新",
    "搜索",
    "资源",
    "推荐",
];
const ENGLISH: &[&str] = &[
    "qBittorrent",
    "Transmission",
    "the",
    "download",
    "failed",
    "with",
    "error",
    "tracker",
    "Jellyfin",
    "library",
    "scan",
    "2160p",
    "WEB-DL",
    "HDR",
    "x265",
    "subtitle",
    "site",
    "cookie",
    "expired",
    "please",
    "check",
    "/media/movies",
    "config.yaml",
    "OK",
];

/// A deterministic chat-like corpus: Chinese clauses with English words and paths mixed in,
/// about half of the bytes CJK.
fn mixed_corpus(target_bytes: usize) -> Vec<String> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let mut docs = Vec::new();
    let mut total = 0;
    while total < target_bytes {
        let mut doc = String::new();
        let words = 20 + next(60);
        for _ in 0..words {
            if next(10) < 6 {
                doc.push_str(CHINESE[next(CHINESE.len())]);
                if next(8) == 0 {
                    doc.push_str(["，", "。", "？", "、"][next(4)]);
                }
            } else {
                doc.push(' ');
                doc.push_str(ENGLISH[next(ENGLISH.len())]);
                doc.push(' ');
            }
        }
        total += doc.len();
        docs.push(doc);
    }
    docs
}

fn english_corpus(target_bytes: usize) -> Vec<String> {
    let mut docs = Vec::new();
    let mut total = 0;
    let mut k = 0usize;
    while total < target_bytes {
        let doc: Vec<&str> = (0..60)
            .map(|i| ENGLISH[(k * 7 + i * 13) % ENGLISH.len()])
            .collect();
        let doc = doc.join(" ");
        total += doc.len();
        docs.push(doc);
        k += 1;
    }
    docs
}

const CORPUS_BYTES: usize = 4 << 20;

#[divan::bench(args = ["mixed", "english"])]
fn tokenize_document(bencher: divan::Bencher, corpus: &str) {
    let docs = if corpus == "mixed" {
        mixed_corpus(CORPUS_BYTES)
    } else {
        english_corpus(CORPUS_BYTES)
    };
    let bytes: usize = docs.iter().map(String::len).sum();
    bencher.counter(BytesCount::new(bytes)).bench(|| {
        let mut tokens = 0usize;
        for doc in &docs {
            tokenize(doc, TokenizeReason::Document, &mut |t, _, _, _| {
                tokens += t.len()
            });
        }
        tokens
    });
}

/// `tokenizer` may end in `+prefix1` for a table with `prefix='1'`.
fn insert_all(tokenizer: &str, docs: &[String]) {
    let conn = Connection::open_in_memory().unwrap();
    register_cjk_tokenizer(&conn).unwrap();
    let (tokenizer, prefix) = match tokenizer.strip_suffix("+prefix1") {
        Some(tokenizer) => (tokenizer, ", prefix='1'"),
        None => (tokenizer, ""),
    };
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE t USING fts5(body, content='', tokenize='{tokenizer}'{prefix});"
    ))
    .unwrap();
    let tx = conn.unchecked_transaction().unwrap();
    {
        let mut stmt = tx
            .prepare("INSERT INTO t(rowid, body) VALUES (?1, ?2)")
            .unwrap();
        for (i, doc) in docs.iter().enumerate() {
            stmt.execute(rusqlite::params![i as i64 + 1, doc]).unwrap();
        }
    }
    tx.commit().unwrap();
}

#[divan::bench(
    args = ["cjk_unicode61", "cjk_unicode61+prefix1", "unicode61", "trigram"],
    sample_count = 10
)]
fn fts_insert_mixed(bencher: divan::Bencher, tokenizer: &str) {
    let docs = mixed_corpus(CORPUS_BYTES);
    let bytes: usize = docs.iter().map(String::len).sum();
    bencher
        .counter(BytesCount::new(bytes))
        .bench(|| insert_all(tokenizer, &docs));
}

#[divan::bench(args = ["cjk_unicode61", "unicode61"], sample_count = 10)]
fn fts_insert_english(bencher: divan::Bencher, tokenizer: &str) {
    let docs = english_corpus(CORPUS_BYTES);
    let bytes: usize = docs.iter().map(String::len).sum();
    bencher
        .counter(BytesCount::new(bytes))
        .bench(|| insert_all(tokenizer, &docs));
}

/// Rows for the query benchmark: the mixed corpus with a rare character planted in every
/// 100th message.
fn query_corpus() -> Vec<String> {
    let mut docs = mixed_corpus(QUERY_CORPUS_BYTES);
    for (i, doc) in docs.iter_mut().enumerate() {
        if i % 100 == 0 {
            doc.push_str(" 鬯酒");
        }
    }
    docs
}

const QUERY_CORPUS_BYTES: usize = 24 << 20;

/// An external-content table like the store's: `docs` holds the text, `t` indexes it.
fn query_db(prefix_option: &str, docs: &[String]) -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    register_cjk_tokenizer(&conn).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE docs(id INTEGER PRIMARY KEY, body TEXT);
         CREATE VIRTUAL TABLE t USING fts5(body, content='docs', content_rowid='id',
                                          tokenize='cjk_unicode61'{prefix_option});"
    ))
    .unwrap();
    let tx = conn.unchecked_transaction().unwrap();
    {
        let mut insert_doc = tx
            .prepare("INSERT INTO docs(id, body) VALUES (?1, ?2)")
            .unwrap();
        let mut insert_fts = tx
            .prepare("INSERT INTO t(rowid, body) VALUES (?1, ?2)")
            .unwrap();
        for (i, doc) in docs.iter().enumerate() {
            insert_doc
                .execute(rusqlite::params![i as i64 + 1, doc])
                .unwrap();
            insert_fts
                .execute(rusqlite::params![i as i64 + 1, doc])
                .unwrap();
        }
    }
    tx.commit().unwrap();
    conn.execute_batch("INSERT INTO t(t) VALUES ('optimize');")
        .unwrap();
    conn
}

/// One CJK character, every matching row counted: `"X"*` on the cjk index (with and without
/// `prefix='1'`) against the LIKE scan the references use. `rare` is in 1 % of rows, `common`
/// (的) in most.
#[divan::bench(
    args = ["index/rare", "index_prefix1/rare", "like/rare", "index/common", "index_prefix1/common", "like/common"],
    sample_count = 20
)]
fn single_char_query(bencher: divan::Bencher, case: &str) {
    let (route, which) = case.split_once('/').unwrap();
    let docs = query_corpus();
    let conn = query_db(
        if route == "index_prefix1" {
            ", prefix='1'"
        } else {
            ""
        },
        &docs,
    );
    let ch = if which == "rare" { "鬯" } else { "的" };
    let sql = if route == "like" {
        "SELECT count(*) FROM docs WHERE body LIKE '%' || ?1 || '%'"
    } else {
        "SELECT count(*) FROM t WHERE t MATCH '\"' || ?1 || '\"*'"
    };
    let mut stmt = conn.prepare(sql).unwrap();
    bencher.bench_local(|| {
        let rows: i64 = stmt.query_row([ch], |r| r.get(0)).unwrap();
        assert!(rows > 0);
        rows
    });
}
