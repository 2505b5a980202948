//! `cargo bench -p mpa-learning --bench skills_bench` — patch matcher on a 100 KB SKILL.md.
//! Targets (issue 7): exact ≤ 5 ms; worst fuzzy strategy ≤ 50 ms.

mod common;

use common::best_of;
use mpa_learning::patch_matcher::{apply, ratio};
use std::hint::black_box;

fn main() {
    let mut doc = String::from("---\nname: big\ndescription: Big skill\n---\n# Big\n");
    let mut i = 0;
    while doc.len() < 100_000 {
        doc.push_str(&format!(
            "## Section {i}\n    - step {i}: check the downloader queue for item {i} and verify paths\n    - note: keep subtitles when renaming episode {i}\n\n"
        ));
        i += 1;
    }
    let target_line = i / 2;
    println!(
        "document: {} bytes, {} lines",
        doc.len(),
        doc.lines().count()
    );

    let exact_old = format!(
        "    - step {target_line}: check the downloader queue for item {target_line} and verify paths"
    );
    let cases: Vec<(&str, String, bool)> = vec![
        ("exact (unique line)", exact_old.clone(), true),
        (
            "line_trimmed (indent differs)",
            format!("  - step {target_line}: check the downloader queue for item {target_line} and verify paths\n  - note: keep subtitles when renaming episode {target_line}"),
            true,
        ),
        (
            "context_aware (typos in every line)",
            format!("    - step {target_line}: chek the downloader queue for item {target_line} and verfy paths\n    - note: keep subtitle when renaming episode {target_line}"),
            true,
        ),
        (
            "no match (all 9 strategies + did-you-mean)",
            "    - step x: reconfigure the indexer proxy and restart the service\n    - note: unrelated".to_string(),
            false,
        ),
    ];
    for (label, old, should_match) in &cases {
        let r = apply(&doc, old, "REPLACED", false);
        // Similarity strategies may legitimately find many near-identical sections (then
        // the result is "ambiguous"); the timing is what this bench measures.
        if *should_match {
            assert!(
                !matches!(
                    r,
                    Err(mpa_learning::patch_matcher::PatchError::NoMatch { .. })
                ),
                "{label}"
            );
        }
        let secs = best_of(3, 5, || {
            let _ = black_box(apply(black_box(&doc), old, "REPLACED", false));
        });
        match &r {
            Ok(p) => println!(
                "{label}: {:.3} ms (strategy {})",
                secs * 1e3,
                p.strategy.name()
            ),
            Err(e) => println!(
                "{label}: {:.3} ms ({})",
                secs * 1e3,
                e.to_string().lines().next().unwrap_or("")
            ),
        }
    }
    let a: String = doc.chars().take(2000).collect();
    let b: String = doc.chars().skip(1000).take(2000).collect();
    let secs = best_of(3, 5, || {
        black_box(ratio(&a, &b));
    });
    println!(
        "ratio on two 2000-char strings (autojunk active): {:.3} ms",
        secs * 1e3
    );
}
