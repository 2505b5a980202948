//! `cargo bench -p mpa-learning --bench memory_bench` — threat-scan throughput and snapshot build time.
//! Targets (issue 7): threat scan ≥ 50 MB/s; memory snapshot build ≤ 1 ms.

mod common;

use common::best_of;
use mpa_learning::memory::{Change, Op, Scope, Target, WriteRequest};
use mpa_learning::threat::{ScanScope, scan};
use mpa_learning::{Memory, MemoryConfig, WriteOrigin};
use mpa_protocol::{Actor, UserId};
use std::hint::black_box;

fn corpus(unit: &str, bytes: usize) -> String {
    let mut s = String::new();
    while s.len() < bytes {
        s.push_str(unit);
    }
    s
}

fn main() {
    let ascii = corpus(
        "The user prefers 1080p WEB-DL releases from trusted groups; the downloader is qBittorrent at 192.168.1.5:8080 and the library lives under /media/tv. Ignore samples smaller than 100 MB when organising, then refresh Jellyfin. ",
        64 * 1024,
    );
    let mixed = corpus(
        "用户偏好中文字幕与1080p版本，下载器是 qBittorrent，媒体库位于 /media/电视剧。Prefers “smart quotes” — and em dashes. ",
        64 * 1024,
    );
    for (label, text) in [("ascii 64 KiB", &ascii), ("mixed CJK 64 KiB", &mixed)] {
        let chars = text.chars().count().min(65_536);
        let bytes: usize = text.chars().take(chars).map(char::len_utf8).sum();
        assert!(scan(text, ScanScope::Strict).is_empty());
        let secs = best_of(5, 20, || {
            black_box(scan(black_box(text), ScanScope::Strict));
        });
        println!(
            "threat scan ({label}): {:.1} MB/s ({:.3} ms per call)",
            bytes as f64 / secs / 1e6,
            secs * 1e3
        );
    }

    let dir =
        std::env::temp_dir().join(format!("mpa-learning-memory-bench-{}", std::process::id()));
    let hub = Memory::new(MemoryConfig::new(&dir));
    let user = Actor {
        user_id: UserId("bench".into()),
        user_name: "bench".into(),
        is_admin: true,
    };
    let fill = |target: Target, scope: Scope, n: usize| {
        let ops = (0..n)
            .map(|i| Op::Add {
                content: format!(
                    "Fact {i}: the {} store keeps a realistic sentence about the MoviePilot setup here.",
                    target.as_str()
                ),
            })
            .collect();
        let r = hub.write(
            &user,
            &WriteOrigin::Foreground,
            WriteRequest {
                target,
                scope,
                change: Change::Batch(ops),
            },
        );
        assert!(r.is_ok(), "{r:?}");
    };
    fill(Target::Memory, Scope::Global, 20);
    fill(Target::Memory, Scope::User, 20);
    fill(Target::User, Scope::User, 12);
    let secs = best_of(5, 200, || {
        black_box(hub.snapshot(&user).render());
    });
    println!(
        "snapshot build + render (3 stores, ~5.5k chars, {} bytes rendered): {:.3} ms",
        hub.snapshot(&user).render().len(),
        secs * 1e3
    );
    let _ = std::fs::remove_dir_all(&dir);
}
