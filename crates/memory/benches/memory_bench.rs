//! `cargo bench -p mpa-memory` — threat-scan throughput and snapshot build time.
//! Targets (issue 7): threat scan ≥ 50 MB/s; memory snapshot build ≤ 1 ms.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mpa_memory::threat::{ScanScope, scan};
use mpa_memory::{MemoryConfig, MemoryHub, WriteOrigin};
use mpa_protocol::{Actor, UserId};
use serde_json::json;
use std::hint::black_box;
use std::time::Instant;

fn best_of<F: FnMut()>(rounds: usize, iters: usize, mut f: F) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() / iters as f64);
    }
    best
}

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

    let dir = std::env::temp_dir().join(format!("mpa-memory-bench-{}", std::process::id()));
    let hub = MemoryHub::new(MemoryConfig::new(&dir));
    let user = Actor {
        user_id: UserId("bench".into()),
        user_name: "bench".into(),
        is_admin: true,
    };
    let fill = |target: &str, scope: &str, n: usize| {
        let ops: Vec<_> = (0..n)
            .map(|i| json!({"action": "add", "content": format!("Fact {i}: the {target} store keeps a realistic sentence about the MoviePilot setup here.")}))
            .collect();
        let r = hub.memory_tool(
            &user,
            &WriteOrigin::Foreground,
            json!({"target": target, "scope": scope, "operations": ops}),
        );
        assert_eq!(r["success"], true, "{r}");
    };
    fill("memory", "global", 20);
    fill("memory", "user", 20);
    fill("user", "user", 12);
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
