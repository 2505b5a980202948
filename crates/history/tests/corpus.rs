//! The benchmark corpus: deterministic and shaped like real history.

use mpa_history::corpus::*;

#[test]
fn corpus_is_deterministic_and_shaped() {
    let mut a = Vec::new();
    generate(2000, 7, |l| a.push(l));
    let mut b = Vec::new();
    generate(2000, 7, |l| b.push(l));
    assert_eq!(a, b);
    assert_eq!(a.len(), 2000);
    let tools = a.iter().filter(|l| l.contains("\"role\":\"tool\"")).count();
    assert!((300..=500).contains(&tools), "{tools}");
    assert!(a.iter().any(|l| l.contains("订阅")) && a.iter().any(|l| l.contains("docker")));
    for l in &a {
        assert!(mpa_history::import::parse_line(l, "bench").is_ok(), "{l}");
    }
}
