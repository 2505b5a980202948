//! Markdown rendering of a 50 KB answer (issue 29, target ≤ 20 ms): a model's answer as people
//! get them — headings, tables, nested lists, code, links, Chinese text — rendered by the one
//! renderer the page uses (`mpa_server::markdown::render`). Run with
//! `cargo bench -p mpa-server --bench markdown`; prints the median, p95 and worst of 200
//! renders.
#![expect(
    clippy::unwrap_used,
    reason = "a benchmark's panic is its failure report"
)]

use std::time::{Duration, Instant};

fn answer(target: usize) -> String {
    let mut s = String::new();
    let mut n = 0;
    while s.len() < target {
        n += 1;
        s.push_str(&format!(
            "## 第 {n} 部分 — subscriptions\n\nHere is what I found (see https://example.org/docs/{n}: details). \
             **Bold**, *italic*, ~~old~~ and `inline code`.\n\n\
             | 名称 | 年份 | 状态 | 链接 |\n|---|---:|:---:|---|\n\
             | 星际穿越 | 2014 | 已订阅 | www.example.com/m/{n} |\n| The Matrix | 1999 | ✓ | [tmdb](https://tmdb.org/603) |\n\
             | Dune | 2021 | pending | <https://x.org> |\n\n\
             - one\n  - nested one\n    - deeper\n- [x] done item\n- [ ] open item\n\n\
             1. first\n2. second\n\n\
             ```json\n{{\"id\": {n}, \"name\": \"<b>escaped</b>\", \"ok\": true}}\n```\n\n\
             > A quote with <script>alert({n})</script> in it.\n\n"
        ));
    }
    s
}

fn main() {
    let text = answer(50 * 1024);
    let mut times: Vec<Duration> = (0..200)
        .map(|_| {
            let t = Instant::now();
            let html = mpa_server::markdown::render(&text);
            let took = t.elapsed();
            assert!(html.contains("<table>"));
            took
        })
        .collect();
    times.sort();
    println!(
        "markdown: {} KB answer → median {:.2} ms, p95 {:.2} ms, worst {:.2} ms (200 renders)",
        text.len() / 1024,
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() * 95 / 100].as_secs_f64() * 1e3,
        times.last().unwrap().as_secs_f64() * 1e3
    );
}
