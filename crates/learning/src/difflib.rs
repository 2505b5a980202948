//! A character-level port of the behaviour of Python's `difflib.SequenceMatcher` (no junk
//! function, `autojunk=True`), so similarity scores equal the reference's exactly.
//!
//! Autojunk: when `b` has at least 200 elements, every element occurring more than
//! `len(b) / 100 + 1` times is "popular" and removed from the index used to seed matches
//! (it can still extend a match, exactly as in difflib). The property test in
//! `tests/difflib_parity.rs` compares [`ratio`] with `python3` on random strings.

use std::collections::HashMap;

/// A matching block: `a[a_start..a_start+len] == b[b_start..b_start+len]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Block {
    pub a: usize,
    pub b: usize,
    pub len: usize,
}

/// Edit operation between two sequences (`tag`, a range, b range), as difflib's opcodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpTag {
    Equal,
    Replace,
    Delete,
    Insert,
}

pub struct Matcher<'s> {
    a: &'s [char],
    b: &'s [char],
    /// b2j for ASCII elements, indexed by code point (the common case, no hashing).
    ascii: Vec<Vec<usize>>,
    other: HashMap<char, Vec<usize>>,
}

impl<'s> Matcher<'s> {
    pub fn new(a: &'s [char], b: &'s [char]) -> Self {
        let mut ascii: Vec<Vec<usize>> = vec![Vec::new(); 128];
        let mut other: HashMap<char, Vec<usize>> = HashMap::new();
        for (j, &c) in b.iter().enumerate() {
            if c.is_ascii() {
                ascii[c as usize].push(j);
            } else {
                other.entry(c).or_default().push(j);
            }
        }
        if b.len() >= 200 {
            let ntest = b.len() / 100 + 1;
            for v in ascii.iter_mut() {
                if v.len() > ntest {
                    v.clear();
                }
            }
            other.retain(|_, idx| idx.len() <= ntest);
        }
        Self { a, b, ascii, other }
    }

    fn positions(&self, c: char) -> Option<&[usize]> {
        if c.is_ascii() {
            self.ascii.get(c as usize).map(Vec::as_slice)
        } else {
            self.other.get(&c).map(Vec::as_slice)
        }
    }

    /// difflib's `find_longest_match` (ties: earliest in `a`, then earliest in `b`).
    fn longest(
        &self,
        alo: usize,
        ahi: usize,
        blo: usize,
        bhi: usize,
        j2len: &mut Vec<usize>,
        new: &mut Vec<usize>,
    ) -> Block {
        let (a, b) = (self.a, self.b);
        let (mut besti, mut bestj, mut bestsize) = (alo, blo, 0usize);
        // j2len[j + 1] = length of the match ending at a[i-1], b[j]; touched lists keep the
        // reset cost proportional to the matches, like difflib's per-row dict.
        let mut touched_old: Vec<usize> = Vec::new();
        let mut touched_new: Vec<usize> = Vec::new();
        for (i, ch) in a.iter().enumerate().take(ahi).skip(alo) {
            if let Some(js) = self.positions(*ch) {
                for &j in js {
                    if j < blo {
                        continue;
                    }
                    if j >= bhi {
                        break;
                    }
                    let k = j2len[j] + 1;
                    new[j + 1] = k;
                    touched_new.push(j + 1);
                    if k > bestsize {
                        besti = i + 1 - k;
                        bestj = j + 1 - k;
                        bestsize = k;
                    }
                }
            }
            for &t in &touched_old {
                j2len[t] = 0;
            }
            std::mem::swap(j2len, new);
            std::mem::swap(&mut touched_old, &mut touched_new);
            touched_new.clear();
        }
        for &t in &touched_old {
            j2len[t] = 0;
        }
        // No junk function, so every element is "non-junk": extend over equal neighbours
        // (this is how popular elements still join a match).
        while besti > alo && bestj > blo && a[besti - 1] == b[bestj - 1] {
            besti -= 1;
            bestj -= 1;
            bestsize += 1;
        }
        while besti + bestsize < ahi
            && bestj + bestsize < bhi
            && a[besti + bestsize] == b[bestj + bestsize]
        {
            bestsize += 1;
        }
        Block {
            a: besti,
            b: bestj,
            len: bestsize,
        }
    }

    /// Matching blocks in order (without difflib's zero-length sentinel).
    pub fn matching_blocks(&self) -> Vec<Block> {
        let (la, lb) = (self.a.len(), self.b.len());
        let mut j2len = vec![0usize; lb + 1];
        let mut new = vec![0usize; lb + 1];
        let mut queue = vec![(0usize, la, 0usize, lb)];
        let mut blocks = Vec::new();
        while let Some((alo, ahi, blo, bhi)) = queue.pop() {
            let m = self.longest(alo, ahi, blo, bhi, &mut j2len, &mut new);
            if m.len > 0 {
                blocks.push(m);
                if alo < m.a && blo < m.b {
                    queue.push((alo, m.a, blo, m.b));
                }
                if m.a + m.len < ahi && m.b + m.len < bhi {
                    queue.push((m.a + m.len, ahi, m.b + m.len, bhi));
                }
            }
        }
        blocks.sort();
        blocks
    }

    pub fn ratio(&self) -> f64 {
        let total = self.a.len() + self.b.len();
        if total == 0 {
            return 1.0;
        }
        let m: usize = self.matching_blocks().iter().map(|b| b.len).sum();
        2.0 * m as f64 / total as f64
    }

    /// Opcodes turning `a` into `b`.
    pub fn opcodes(&self) -> Vec<(OpTag, usize, usize, usize, usize)> {
        let mut out = Vec::new();
        let (mut i, mut j) = (0, 0);
        let mut blocks = self.matching_blocks();
        blocks.push(Block {
            a: self.a.len(),
            b: self.b.len(),
            len: 0,
        });
        for m in blocks {
            let tag = match (i < m.a, j < m.b) {
                (true, true) => Some(OpTag::Replace),
                (true, false) => Some(OpTag::Delete),
                (false, true) => Some(OpTag::Insert),
                (false, false) => None,
            };
            if let Some(t) = tag {
                out.push((t, i, m.a, j, m.b));
            }
            i = m.a + m.len;
            j = m.b + m.len;
            if m.len > 0 {
                out.push((OpTag::Equal, m.a, i, m.b, j));
            }
        }
        out
    }
}

/// `difflib.SequenceMatcher(None, a, b).ratio()` over Unicode code points.
pub fn ratio(a: &str, b: &str) -> f64 {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    Matcher::new(&a, &b).ratio()
}
