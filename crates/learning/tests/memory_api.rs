#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]
//! The typed memory API on real files: writes, batches, the failure cap, proposals, search and
//! concurrent writers. (The `memory` tool's JSON contract is tested in core's `tool_memory.rs`.)

use mpa_learning::memory::{
    Change, Op, ReplaceMode, Scope, SearchCategory, SearchRequest, Target, WriteFailure,
    WriteRequest, Written,
};
use mpa_learning::{Error, Memory, MemoryConfig, ReviewToken, WriteOrigin};
use mpa_protocol::{Actor, UserId};
use std::fs;
use std::path::PathBuf;

struct Env {
    _dir: tempfile::TempDir,
    data: PathBuf,
    memory: Memory,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let memory = Memory::new(MemoryConfig::new(&data));
    Env {
        _dir: dir,
        data,
        memory,
    }
}

fn actor(id: &str, admin: bool) -> Actor {
    Actor {
        user_id: UserId(id.into()),
        user_name: id.into(),
        is_admin: admin,
    }
}

const FG: WriteOrigin = WriteOrigin::Foreground;

fn add(content: &str) -> Op {
    Op::Add {
        content: content.into(),
    }
}

fn remove(old_text: &str) -> Op {
    Op::Remove {
        old_text: old_text.into(),
    }
}

fn single(target: Target, op: Op) -> WriteRequest {
    WriteRequest {
        target,
        scope: Scope::User,
        change: Change::Single(op),
    }
}

fn batch(ops: Vec<Op>) -> WriteRequest {
    WriteRequest {
        target: Target::Memory,
        scope: Scope::User,
        change: Change::Batch(ops),
    }
}

impl Env {
    fn file(&self, a: &Actor, name: &str) -> PathBuf {
        self.data
            .join("agent/memory/users")
            .join(mpa_redact::UserKey::for_user(&a.user_id).as_str())
            .join(name)
    }

    fn read(&self, a: &Actor, name: &str) -> Option<String> {
        fs::read_to_string(self.file(a, name)).ok()
    }

    fn write(&self, a: &Actor, req: WriteRequest) -> Result<Written, WriteFailure> {
        self.memory.write(a, &FG, req)
    }
}

#[test]
fn single_ops_trim_apply_and_report_previous_entries() {
    let e = env();
    let a = actor("u1", false);
    let Written::Applied(r) = e
        .write(&a, single(Target::User, add("  Prefers 1080p WEB-DL  ")))
        .unwrap()
    else {
        panic!("not applied")
    };
    assert!(r.changed);
    assert_eq!(
        (r.target, r.scope, r.entry_count),
        (Target::User, Scope::User, 1)
    );
    assert_eq!(r.usage, "20/1375");
    assert_eq!(r.previous_entries, vec![None]);
    let replace = Op::Replace {
        old_text: "1080p".into(),
        content: "2160p".into(),
        mode: ReplaceMode::Substring,
    };
    let Written::Applied(r) = e.write(&a, single(Target::User, replace)).unwrap() else {
        panic!("not applied")
    };
    assert_eq!(
        r.previous_entries,
        vec![Some("Prefers 1080p WEB-DL".into())]
    );
    assert_eq!(e.read(&a, "USER.md").unwrap(), "Prefers 2160p WEB-DL\n");
    let Written::Applied(r) = e.write(&a, single(Target::User, remove("2160p"))).unwrap() else {
        panic!("not applied")
    };
    assert_eq!(r.entry_count, 0);
    assert_eq!(e.read(&a, "USER.md").unwrap(), "");
}

#[test]
fn batch_is_all_or_nothing_and_limits_are_checked_first() {
    let e = env();
    let a = actor("u1", false);
    e.write(&a, batch(vec![add("one"), add("two")])).unwrap();
    let before = e.read(&a, "MEMORY.md").unwrap();
    let f = e
        .write(&a, batch(vec![add("three"), remove("nothing-like-this")]))
        .unwrap_err();
    assert!(
        f.error.starts_with("Operation 2: No entry matched"),
        "{f:?}"
    );
    assert!(
        f.error
            .ends_with("No operations were applied (batch is all-or-nothing).")
    );
    assert_eq!(f.current_entries, Some(vec!["one".into(), "two".into()]));
    assert_eq!(f.usage.as_deref(), Some("9/2200"));
    assert!(!f.terminal);
    assert_eq!(e.read(&a, "MEMORY.md").unwrap(), before);

    let f = e.write(&a, batch(Vec::new())).unwrap_err();
    assert_eq!(f.error, "operations must hold 1 to 20 items (got 0).");
    let f = e
        .write(&a, batch(vec![add("ok"), add(&"x".repeat(100_001))]))
        .unwrap_err();
    assert_eq!(
        f.error,
        "Operation 2: content is longer than 100000 characters."
    );
    assert_eq!(e.read(&a, "MEMORY.md").unwrap(), before);
}

#[test]
fn failure_cap_turns_terminal_and_resets_per_turn() {
    let e = env();
    let a = actor("u1", false);
    for _ in 0..3 {
        assert!(!e.write(&a, batch(vec![remove("x")])).unwrap_err().terminal);
    }
    let f = e.write(&a, batch(vec![remove("x")])).unwrap_err();
    assert!(f.terminal);
    assert!(f.error.contains("failed 4 times this turn"), "{}", f.error);
    e.memory.begin_user_turn(&a);
    assert!(!e.write(&a, batch(vec![remove("x")])).unwrap_err().terminal);
    // A review counts apart from the foreground.
    let rv = WriteOrigin::BackgroundReview(ReviewToken::new("r1"));
    for _ in 0..3 {
        let f = e
            .memory
            .write(&a, &rv, single(Target::Memory, add("")))
            .unwrap_err();
        assert!(!f.terminal);
    }
}

#[test]
fn global_memory_is_admin_only_and_has_no_user_file() {
    let e = env();
    let admin = actor("root", true);
    let user = actor("u1", false);
    let global = |target, op| WriteRequest {
        target,
        scope: Scope::Global,
        change: Change::Single(op),
    };
    let f = e
        .write(&user, global(Target::Memory, add("x")))
        .unwrap_err();
    assert!(f.error.starts_with("Only administrators"), "{}", f.error);
    let f = e.write(&admin, global(Target::User, add("x"))).unwrap_err();
    assert!(f.error.contains("only MEMORY.md"), "{}", f.error);
    e.write(
        &admin,
        global(Target::Memory, add("tv library is /media/tv")),
    )
    .unwrap();
    assert_eq!(
        fs::read_to_string(e.data.join("agent/memory/MEMORY.md")).unwrap(),
        "tv library is /media/tv\n"
    );
    assert!(e.memory.snapshot(&user).render().contains("/media/tv"));
}

#[test]
fn review_rewrites_are_staged_listed_and_approved_by_the_user_only() {
    let e = env();
    let a = actor("u1", false);
    e.write(
        &a,
        batch(vec![add("old downloader is transmission"), add("keep")]),
    )
    .unwrap();
    let before = e.read(&a, "MEMORY.md").unwrap();
    let rv = WriteOrigin::BackgroundReview(ReviewToken::new("r1"));
    let Written::Staged(s) = e
        .memory
        .write(&a, &rv, single(Target::Memory, remove("transmission")))
        .unwrap()
    else {
        panic!("not staged")
    };
    assert_eq!(s.pending_id.len(), 32);
    assert_eq!(e.read(&a, "MEMORY.md").unwrap(), before);
    let pending = e.memory.pending(&a, &FG);
    assert_eq!(pending.count, 1);
    assert_eq!(pending.proposals[0].id, s.pending_id);
    assert_eq!(pending.proposals[0].preview, "transmission");
    // Another user sees nothing.
    assert_eq!(e.memory.pending(&actor("u2", false), &FG).count, 0);
    let out = e
        .memory
        .user_command(
            &a,
            &format!("/memory approve {}", s.pending_id),
            mpa_protocol::Lang::En,
        )
        .unwrap();
    assert!(out.starts_with("Applied proposal"), "{out}");
    assert_eq!(e.read(&a, "MEMORY.md").unwrap(), "keep\n");
    assert_eq!(e.memory.pending(&a, &FG).count, 0);

    let cancelled = ReviewToken::new("r2");
    cancelled.cancel();
    let f = e
        .memory
        .write(
            &a,
            &WriteOrigin::BackgroundReview(cancelled),
            single(Target::Memory, add("x")),
        )
        .unwrap_err();
    assert!(f.error.contains("cancelled"), "{}", f.error);
}

#[test]
fn search_is_typed_clamped_and_scoped() {
    let e = env();
    let a = actor("u1", false);
    for half in [0..15, 15..30] {
        let ops = half.map(|i| add(&format!("note {i} about tv"))).collect();
        e.write(&a, batch(ops)).unwrap();
    }
    let req = |query: &str| SearchRequest {
        query: query.into(),
        category: SearchCategory::All,
        file_path: None,
        use_regex: false,
        limit: None,
    };
    let r = e.memory.search(&a, req("TV")).unwrap();
    assert_eq!((r.total_count, r.returned_count), (30, 20));
    assert!(r.truncated);
    assert_eq!(r.entries[0].line, 1);
    assert_eq!(r.entries[0].scope, Scope::User);
    let r = e
        .memory
        .search(
            &a,
            SearchRequest {
                limit: Some(500),
                ..req("tv")
            },
        )
        .unwrap();
    assert_eq!(r.returned_count, 30);
    let r = e
        .memory
        .search(
            &a,
            SearchRequest {
                category: SearchCategory::Topic,
                ..req("tv")
            },
        )
        .unwrap();
    assert_eq!(r.total_count, 0);
    for bad in [
        req("  "),
        req(&"q".repeat(257)),
        SearchRequest {
            use_regex: true,
            ..req("(")
        },
        SearchRequest {
            file_path: Some("agent/memory/../../etc/passwd".into()),
            ..req("x")
        },
    ] {
        assert!(matches!(e.memory.search(&a, bad), Err(Error::Invalid(_))));
    }
    assert_eq!(
        e.memory
            .search(&actor("u2", false), req("tv"))
            .unwrap()
            .total_count,
        0
    );
}

#[test]
fn concurrent_writers_never_lose_an_entry() {
    let e = env();
    let a = actor("u1", false);
    std::thread::scope(|s| {
        for t in 0..4 {
            let memory = e.memory.clone();
            let a = a.clone();
            s.spawn(move || {
                for i in 0..8 {
                    let r = memory.write(
                        &a,
                        &FG,
                        single(Target::Memory, add(&format!("t{t} fact {i}"))),
                    );
                    assert!(r.is_ok(), "{r:?}");
                }
            });
        }
    });
    let text = e.read(&a, "MEMORY.md").unwrap();
    assert_eq!(mpa_learning::memory::entries::parse(&text).len(), 32);
}
