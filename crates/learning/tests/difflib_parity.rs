//! Property test: `patch_matcher::ratio` equals CPython's
//! `difflib.SequenceMatcher(None, a, b).ratio()` (autojunk included) on random strings; known
//! values and opcodes printed by CPython.

use mpa_learning::patch_matcher::ratio;
use mpa_learning::{Matcher, OpTag};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::process::{Command, Stdio};

fn python() -> Option<&'static str> {
    let ok = Command::new("python3")
        .arg("-c")
        .arg("import difflib")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    mpa_test_support::external_program("python3", ok).then_some("python3")
}

fn random_string(rng: &mut StdRng) -> String {
    // Small alphabets force many matches; lengths straddle the 200-element autojunk
    // threshold; a few non-ASCII chars check code-point (not byte) semantics.
    const ALPHABETS: [&[char]; 4] = [
        &['a', 'b'],
        &['a', 'b', 'c', 'd', ' ', '\n'],
        &['x', 'y', 'z', 'é', '中', '—', ' '],
        &[
            'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p', ' ',
        ],
    ];
    let alphabet = ALPHABETS[rng.random_range(0..ALPHABETS.len())];
    let len = match rng.random_range(0..4) {
        0 => rng.random_range(0..20),
        1 => rng.random_range(150..260),
        2 => rng.random_range(190..210),
        _ => rng.random_range(0..600),
    };
    (0..len)
        .map(|_| alphabet[rng.random_range(0..alphabet.len())])
        .collect()
}

#[test]
fn ratio_matches_python_difflib() {
    let Some(py) = python() else { return };
    let mut rng = StdRng::seed_from_u64(0x5eed_d1ff);
    let mut pairs: Vec<(String, String)> = Vec::new();
    for _ in 0..400 {
        let a = random_string(&mut rng);
        // Half the pairs are mutations of `a`, so long common blocks occur.
        let b = if rng.random_bool(0.5) {
            let mut chars: Vec<char> = a.chars().collect();
            for _ in 0..rng.random_range(0..10) {
                if chars.is_empty() {
                    break;
                }
                let i = rng.random_range(0..chars.len());
                match rng.random_range(0..3) {
                    0 => {
                        chars.remove(i);
                    }
                    1 => chars.insert(i, 'q'),
                    _ => chars[i] = 'b',
                }
            }
            chars.into_iter().collect()
        } else {
            random_string(&mut rng)
        };
        pairs.push((a, b));
    }
    let input = serde_json::to_string(&pairs).unwrap();
    let script = [
        "import sys, json, difflib",
        "for a, b in json.load(sys.stdin):",
        "    print(repr(difflib.SequenceMatcher(None, a, b).ratio()))",
    ]
    .join("\n");
    let mut child = Command::new(py)
        .arg("-c")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let expected: Vec<f64> = text.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(expected.len(), pairs.len());
    let mut long_pairs = 0;
    for ((a, b), want) in pairs.iter().zip(expected) {
        if b.chars().count() >= 200 {
            long_pairs += 1;
        }
        let got = ratio(a, b);
        assert!(
            got == want,
            "ratio mismatch: rust {got} python {want}\na={a:?}\nb={b:?}"
        );
    }
    assert!(
        long_pairs > 50,
        "autojunk path exercised {long_pairs} times"
    );
}

#[test]
fn known_values() {
    // Values printed by CPython 3 difflib.
    assert_eq!(ratio("abcd", "bcde"), 0.75);
    assert_eq!(ratio("", ""), 1.0);
    assert_eq!(ratio("abc", ""), 0.0);
    assert_eq!(
        ratio(
            "private Thread currentThread;",
            "private volatile Thread currentThread;"
        ),
        0.8656716417910447
    );
}

#[test]
fn opcodes_cover_both_sides() {
    let a: Vec<char> = "qabxcd".chars().collect();
    let b: Vec<char> = "abycdf".chars().collect();
    let ops = Matcher::new(&a, &b).opcodes();
    assert_eq!(
        ops,
        vec![
            (OpTag::Delete, 0, 1, 0, 0),
            (OpTag::Equal, 1, 3, 0, 2),
            (OpTag::Replace, 3, 4, 2, 3),
            (OpTag::Equal, 4, 6, 3, 5),
            (OpTag::Insert, 6, 6, 5, 6),
        ]
    );
}
