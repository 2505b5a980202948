#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]
//! End-to-end tests of `mpagent history …` driving the real binary with `--data-dir <tempdir>`.

use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::common;

fn mpagent(data: &Path, args: &[&str]) -> Output {
    common::mpagent_sync(data, args)
}

/// Start `mpagent --data-dir DATA ARGS…` in the background (to kill it mid-way).
fn spawn(data: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_mpagent"))
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn import(data: &Path, user: &str, file: &Path) -> Output {
    mpagent(
        data,
        &["history", "import", "--user", user, file.to_str().unwrap()],
    )
}

fn json_out(o: &Output) -> Value {
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn line(session: &str, id: &str, role: &str, content: &str, minute: u32) -> String {
    json!({"session_id": session, "message_id": id, "role": role, "content": content,
           "ts": format!("2026-03-15T09:{minute:02}:00Z")})
    .to_string()
}

/// `n` sessions `s0…` of 20 alternating user/assistant lines with `text(session, message)`.
fn sessions(n: usize, text: impl Fn(usize, usize) -> String) -> Vec<String> {
    let mut lines = Vec::new();
    for s in 0..n {
        for m in 0..20 {
            let role = if m % 2 == 0 { "user" } else { "assistant" };
            lines.push(line(
                &format!("s{s}"),
                &format!("m{m}"),
                role,
                &text(s, m),
                (m % 60) as u32,
            ));
        }
    }
    lines
}

fn write_jsonl(dir: &Path, lines: &[String]) -> PathBuf {
    let p = dir.join("in.jsonl");
    let mut f = std::fs::File::create(&p).unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    p
}

#[test]
fn import_search_status_delete_roundtrip() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut src = vec![
        line("s1", "m1", "user", "docker networking is broken", 1),
        line("s1", "m2", "assistant", "restarted the docker bridge", 2),
        "{not json".to_owned(),
        line("s2", "m1", "user", "subscribe to Dune please", 3),
        json!({"session_id": "s3", "message_id": "x", "role": "user", "content": "other user's", "ts": "2026-03-15T09:04:00Z", "user": "bob"}).to_string(),
        json!({"session_id": "s2", "message_id": "m2", "role": "system", "content": "nope", "ts": "2026-03-15T09:05:00Z"}).to_string(),
    ];
    src.push(json!({"session_id": "s2", "message_id": "m3", "role": "tool", "tool_name": "search_media", "content": "found Dune 2160p", "ts": "2026-03-15T09:06:00Z", "source": "web"}).to_string());
    let file = write_jsonl(tmp.path(), &src);
    let out = import(&data, "alice", &file);
    assert_eq!(
        out.status.code(),
        Some(1),
        "skipped lines make the exit code 1"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    for n in ["line 3:", "line 5:", "line 6:"] {
        assert!(stderr.contains(n), "{n} not reported: {stderr}");
    }
    let r = json_out(&out);
    assert_eq!(r["inserted"], 4);
    assert_eq!(r["skipped"].as_array().unwrap().len(), 3);

    // Idempotent re-import.
    let r = json_out(&import(&data, "alice", &file));
    assert_eq!(
        (r["inserted"].as_i64(), r["duplicates"].as_i64()),
        (Some(0), Some(4))
    );

    let out = mpagent(
        &data,
        &[
            "history", "search", "--user", "alice", "--query", "docker", "--limit", "10",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let r = json_out(&out);
    assert_eq!(r["mode"], "discover");
    assert_eq!(r["results"][0]["session_id"], "s1");
    let out = mpagent(
        &data,
        &[
            "history",
            "search",
            "--user",
            "alice",
            "--query",
            "Dune",
            "--role-filter",
            "tool",
        ],
    );
    assert_eq!(json_out(&out)["search_path"], "like");
    let out = mpagent(
        &data,
        &[
            "history", "search", "--user", "alice", "--query", "docker", "--limit", "11",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json_out(&out)["error"], "invalid_arguments");
    let out = mpagent(
        &data,
        &["history", "search", "--user", "alice", "--session-id", "s1"],
    );
    assert_eq!(json_out(&out)["message_count"], 2);
    // Another user sees nothing of alice's history.
    let r = json_out(&mpagent(
        &data,
        &["history", "search", "--user", "bob", "--query", "docker"],
    ));
    assert_eq!(r["count"], 0);

    let st = json_out(&mpagent(&data, &["history", "status", "--user", "alice"]));
    assert_eq!(
        (st["sessions"].as_i64(), st["messages"].as_i64()),
        (Some(2), Some(4))
    );
    assert_eq!(st["index_status"]["messages_fts"], true);

    let d = json_out(&mpagent(
        &data,
        &[
            "history",
            "delete-session",
            "--user",
            "alice",
            "--session",
            "s1",
        ],
    ));
    assert_eq!(d["messages_deleted"], 2);
    let r = json_out(&import(&data, "alice", &file));
    assert_eq!(
        r["tombstoned"], 2,
        "re-import cannot resurrect a deleted session"
    );
    let r = json_out(&mpagent(
        &data,
        &["history", "search", "--user", "alice", "--query", "docker"],
    ));
    assert_eq!(r["count"], 0);
    let c = mpagent(&data, &["history", "cleanup", "--days", "0"]);
    assert_eq!(c.status.code(), Some(0));
    assert_eq!(json_out(&c)["days"], 0);
}

#[test]
fn killed_import_resumes_without_loss_or_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let body = "payload ".repeat(400);
    let lines = sessions(1500, |s, m| format!("{body} session {s} message {m}"));
    let file = write_jsonl(tmp.path(), &lines);
    let mut child = spawn(
        &data,
        &[
            "history",
            "import",
            "--user",
            "alice",
            file.to_str().unwrap(),
        ],
    );
    // Wait until some rows are committed, then SIGKILL mid-import.
    let users = data.join("agent/runtime/history/users");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let db = loop {
        let found = std::fs::read_dir(&users)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| e.path().join("state.db"));
        if let Some(db) = found.filter(|p| p.exists()) {
            let n: i64 = rusqlite::Connection::open(&db)
                .and_then(|c| c.query_row("SELECT COUNT(*) FROM messages", [], |r| r.get(0)))
                .unwrap_or(0);
            if n > 0 {
                break db;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "import never committed anything"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "the import should have been killed half-way"
    );
    let partial: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM messages", [], |r| r.get(0))
        .unwrap();
    assert!(
        partial < lines.len() as i64,
        "killed too late to test anything ({partial} rows)"
    );

    let out = import(&data, "alice", &file);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (total, distinct): (i64, i64) = conn
        .query_row(
            "SELECT COUNT(*), COUNT(DISTINCT session_id || '/' || message_uid) FROM messages",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((total, distinct), (lines.len() as i64, lines.len() as i64));
    mpa_history::integrity_check(&db).unwrap();
}

#[test]
fn killed_backfill_resumes_from_committed_progress_without_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let lines = sessions(100, |s, m| format!("第{s}部 字幕 subtitle {s}-{m}"));
    let file = write_jsonl(tmp.path(), &lines);
    let out = import(&data, "bob", &file);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = json_out(&mpagent(&data, &["history", "status", "--user", "bob"]));
    let db = PathBuf::from(status["db_path"].as_str().unwrap());

    // Paced, 20 ids per batch: 100 batches with >= 0.2 s pauses, so it is surely mid-way when
    // killed.
    let mut child = spawn(
        &data,
        &[
            "history",
            "backfill",
            "--user",
            "bob",
            "--rebuild",
            "--batch-size",
            "20",
        ],
    );
    let progress = |db: &Path| -> Option<i64> {
        let c = rusqlite::Connection::open(db).ok()?;
        c.query_row(
            "SELECT CAST(value AS INTEGER) FROM state_meta WHERE key = 'messages_fts_cjk:progress'",
            [],
            |r| r.get(0),
        )
        .ok()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if progress(&db).is_some_and(|p| p >= 100) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "backfill never progressed"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().unwrap();
    assert!(!child.wait().unwrap().success());
    let killed_at = progress(&db).expect("still building after the kill");
    assert!(killed_at < 2000 && killed_at % 20 == 0, "{killed_at}");

    // While building, status says so and searches still find old rows through the gap scan.
    let st = json_out(&mpagent(&data, &["history", "status", "--user", "bob"]));
    assert_eq!(st["index_status"]["messages_fts_cjk"], false, "{st}");
    assert_eq!(st["backfill"][2]["state"], "building");
    let found = json_out(&mpagent(
        &data,
        &[
            "history",
            "search",
            "--user",
            "bob",
            "--query",
            "\"第99部\"",
        ],
    ));
    assert_eq!(found["results"][0]["session_id"], "s99", "{found}");

    let out = mpagent(
        &data,
        &["history", "backfill", "--user", "bob", "--no-pause"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = json_out(&out);
    assert!(
        summary["resumed_from"]["done"].as_u64().unwrap() >= killed_at as u64,
        "{summary}"
    );
    for idx in summary["indexes"].as_array().unwrap() {
        assert_eq!(idx["state"], "ready", "{summary}");
    }
    // integrity-check (also against the content) proves no duplicate and no missing posting.
    let check = mpagent(&data, &["history", "check", "--user", "bob"]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let found = json_out(&mpagent(
        &data,
        &[
            "history", "search", "--user", "bob", "--query", "字幕", "--limit", "10",
        ],
    ));
    assert_eq!(found["search_path"], "cjk");
    assert_eq!(found["count"], 10);
    assert!(found.get("gap_scan").is_none());
}

#[test]
fn backfill_help_and_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let help = mpagent(tmp.path(), &["history", "backfill", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    for word in ["--batch-size", "--no-pause", "--rebuild", "progress"] {
        assert!(text.contains(word), "{word} missing from:\n{text}");
    }
    let bad = mpagent(
        tmp.path(),
        &["history", "backfill", "--user", "x", "--batch-size", "0"],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        !tmp.path().join("agent").exists(),
        "nothing written on bad input"
    );
}

/// `mpagent bench history --corpus --queries`: the caller's own corpus and queries, with import
/// rate, recall@k and latency per query kind in one JSON document; a bad queries file is refused.
#[test]
fn bench_history_on_your_own_corpus_reports_recall_and_latency_per_kind() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus.jsonl");
    let mut lines = vec![line(
        "dune",
        "m1",
        "user",
        "subscribe to Dune Part Two in 4K",
        1,
    )];
    lines.push(line("dune", "m2", "assistant", "Subscribed to Dune.", 2));
    lines.push(line(
        "vpn",
        "m1",
        "user",
        "the tracker times out behind the VPN",
        3,
    ));
    lines.push(line("订阅", "m1", "user", "帮我订阅三体", 4));
    std::fs::write(&corpus, lines.join("\n")).unwrap();
    let queries = dir.path().join("queries.jsonl");
    std::fs::write(
        &queries,
        [
            json!({"query": "Dune", "kind": "title", "expected_session_ids": ["dune"]}),
            json!({"query": "tracker VPN", "kind": "paraphrase", "expected_session_ids": ["vpn"]}),
            json!({"query": "三体", "kind": "cjk", "expected_session_ids": ["订阅"]}),
            json!({"query": "absent words", "kind": "paraphrase", "expected_session_ids": ["dune"]}),
        ]
        .map(|q| q.to_string())
        .join("\n"),
    )
    .unwrap();
    let work = dir.path().join("work");
    let args = [
        "bench",
        "history",
        "--corpus",
        corpus.to_str().unwrap(),
        "--queries",
        queries.to_str().unwrap(),
        "--k",
        "3",
        "--iterations",
        "2",
        "--dir",
        work.to_str().unwrap(),
    ];
    let out = mpagent(dir.path(), &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_out(&out);
    assert_eq!(v["messages"], 4);
    assert_eq!(v["k"], 3);
    assert!(v["import"]["messages_per_second"].as_f64().unwrap() > 0.0);
    assert_eq!(v["overall"]["judged"], 4);
    assert_eq!(v["overall"]["hit_rate_at_3"], 0.75);
    let kinds: Vec<&str> = v["per_kind"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["cjk", "paraphrase", "title"]);
    let para = &v["per_kind"][1];
    assert_eq!(
        (para["queries"].clone(), para["calls"].clone()),
        (json!(2), json!(4))
    );
    assert_eq!(para["recall_at_3"], 0.5);
    assert!(para["p95_ms"].as_f64().unwrap() >= para["p50_ms"].as_f64().unwrap());
    assert_eq!(v["first_misses"][0]["query"], "absent words");

    std::fs::write(&queries, "{\"query\": \"x\", \"limit\": 3}\n").unwrap();
    let bad = mpagent(dir.path(), &args);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("line 1"));
}
