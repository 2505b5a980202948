//! The 9-strategy fuzzy patch matcher used by `skill_manage patch` (spec §3).
//!
//! Strategies run in a fixed order and the **first** one that finds at least one match
//! decides: exact, line_trimmed, whitespace_normalized, indentation_flexible,
//! escape_normalized, trimmed_boundary, unicode_normalized, block_anchor, context_aware.
//! indentation_flexible and trimmed_boundary accept only windows line_trimmed already accepts,
//! so in this order (the reference's) they never decide; [`Strategy::spans`] runs one strategy
//! alone, and the tests pin both facts.
//! Non-exact matches pass the escape-drift guards and are re-indented to the file; ambiguity
//! is refused unless `replace_all`; similarity uses [`ratio`], which equals Python difflib's
//! `SequenceMatcher.ratio()` including autojunk.

use crate::difflib::{self, Matcher, OpTag};

pub use crate::difflib::ratio;

/// Which strategy matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Exact,
    LineTrimmed,
    WhitespaceNormalized,
    IndentationFlexible,
    EscapeNormalized,
    TrimmedBoundary,
    UnicodeNormalized,
    BlockAnchor,
    ContextAware,
}

impl Strategy {
    /// Every strategy, in the order [`find`] tries them.
    pub const ALL: [Strategy; 9] = [
        Strategy::Exact,
        Strategy::LineTrimmed,
        Strategy::WhitespaceNormalized,
        Strategy::IndentationFlexible,
        Strategy::EscapeNormalized,
        Strategy::TrimmedBoundary,
        Strategy::UnicodeNormalized,
        Strategy::BlockAnchor,
        Strategy::ContextAware,
    ];

    /// Where this strategy alone matches `old` in `content` (byte spans of the file), whatever
    /// the strategies before it would find.
    pub fn spans(self, content: &str, old: &str) -> Vec<Span> {
        match self {
            Strategy::Exact => exact(content, old),
            Strategy::LineTrimmed => line_trimmed(content, old),
            Strategy::WhitespaceNormalized => whitespace_normalized(content, old),
            Strategy::IndentationFlexible => indentation_flexible(content, old),
            Strategy::EscapeNormalized => escape_normalized(content, old),
            Strategy::TrimmedBoundary => trimmed_boundary(content, old),
            Strategy::UnicodeNormalized => unicode_normalized(content, old),
            Strategy::BlockAnchor => block_anchor(content, old),
            Strategy::ContextAware => context_aware(content, old),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Strategy::Exact => "exact",
            Strategy::LineTrimmed => "line_trimmed",
            Strategy::WhitespaceNormalized => "whitespace_normalized",
            Strategy::IndentationFlexible => "indentation_flexible",
            Strategy::EscapeNormalized => "escape_normalized",
            Strategy::TrimmedBoundary => "trimmed_boundary",
            Strategy::UnicodeNormalized => "unicode_normalized",
            Strategy::BlockAnchor => "block_anchor",
            Strategy::ContextAware => "context_aware",
        }
    }

    fn is_similarity(self) -> bool {
        matches!(self, Strategy::BlockAnchor | Strategy::ContextAware)
    }
}

/// A successful patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchResult {
    pub content: String,
    pub count: usize,
    pub strategy: Strategy,
}

/// Why nothing was patched. `Display` gives the model-facing text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    #[error(
        "old_string is empty. Set old_string to the exact existing text (read the file first); use write_file or a full rewrite for new files. Do not re-send this call unchanged."
    )]
    EmptyOld,
    #[error(
        "old_string is only whitespace, which is never a meaningful anchor. Set it to the exact existing text you want to change."
    )]
    WhitespaceOld,
    #[error(
        "No edit was applied because old_string and new_string are identical. Send the text you want in new_string."
    )]
    Identical,
    #[error("Could not find a match for old_string in the file{hint}")]
    NoMatch { hint: String },
    #[error(
        "Found {count} matches for old_string. Provide more context to make it unique, or use replace_all=True. Matches:\n{}",
        rows.join("\n")
    )]
    Ambiguous { count: usize, rows: Vec<String> },
    #[error("{reason}")]
    Refused { reason: String },
}

/// A byte range of the file, end exclusive.
pub type Span = (usize, usize);

/// Apply `old → new` to `content`.
pub fn apply(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<PatchResult, PatchError> {
    if old.is_empty() {
        return Err(PatchError::EmptyOld);
    }
    if old.trim().is_empty() {
        return Err(PatchError::WhitespaceOld);
    }
    if old == new {
        return Err(PatchError::Identical);
    }
    let Some((strategy, spans)) = find(content, old) else {
        return Err(PatchError::NoMatch {
            hint: did_you_mean(content, old),
        });
    };
    if spans.len() > 1 && !replace_all {
        return Err(PatchError::Ambiguous {
            count: spans.len(),
            rows: ambiguity_rows(content, &spans),
        });
    }
    if replace_all && spans.len() > 1 && strategy.is_similarity() {
        return Err(PatchError::Refused {
            reason: format!(
                "replace_all only applies to exact matches; old_string matched {} regions only by similarity ({}). Patch each region with its exact text.",
                spans.len(),
                strategy.name()
            ),
        });
    }
    if strategy != Strategy::Exact {
        guard(content, old, new, &spans)?;
    }
    let mut out = content.to_string();
    for &(s, e) in spans.iter().rev() {
        let region = &content[s..e];
        let replacement = if strategy == Strategy::Exact {
            new.to_string()
        } else {
            shape(region, old, new, strategy)
        };
        out.replace_range(s..e, &replacement);
    }
    Ok(PatchResult {
        content: out,
        count: spans.len(),
        strategy,
    })
}

/// Run the strategies in order ([`Strategy::ALL`]); the first with ≥1 match decides.
pub fn find(content: &str, old: &str) -> Option<(Strategy, Vec<Span>)> {
    Strategy::ALL.into_iter().find_map(|s| {
        let spans = s.spans(content, old);
        (!spans.is_empty()).then_some((s, spans))
    })
}

fn exact(content: &str, old: &str) -> Vec<Span> {
    content
        .match_indices(old)
        .map(|(i, m)| (i, i + m.len()))
        .collect()
}

/// Byte spans of the `\n`-separated lines (newline excluded).
fn line_spans(s: &str) -> Vec<Span> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        if b == b'\n' {
            // A CRLF line ends before its '\r', so CRLF files match like LF files.
            let end = if i > start && s.as_bytes()[i - 1] == b'\r' {
                i - 1
            } else {
                i
            };
            out.push((start, end));
            start = i + 1;
        }
    }
    out.push((start, s.len()));
    out
}

/// Slide a window of as many lines as the pattern; non-overlapping matches.
fn windows(content: &str, old: &str, eq: impl Fn(&[&str], &[&str]) -> bool) -> Vec<Span> {
    let cl = line_spans(content);
    let lines: Vec<&str> = cl.iter().map(|&(s, e)| &content[s..e]).collect();
    let pat: Vec<&str> = old.split('\n').collect();
    let p = pat.len();
    let mut out = Vec::new();
    if p == 0 || p > lines.len() {
        return out;
    }
    let mut i = 0;
    while i + p <= lines.len() {
        if eq(&lines[i..i + p], &pat) {
            out.push((cl[i].0, cl[i + p - 1].1));
            i += p;
        } else {
            i += 1;
        }
    }
    out
}

fn line_trimmed(content: &str, old: &str) -> Vec<Span> {
    windows(content, old, |w, p| {
        w.iter().zip(p).all(|(a, b)| a.trim() == b.trim())
    })
}

fn indentation_flexible(content: &str, old: &str) -> Vec<Span> {
    windows(content, old, |w, p| {
        w.iter()
            .zip(p)
            .all(|(a, b)| a.trim_start() == b.trim_start())
    })
}

fn trimmed_boundary(content: &str, old: &str) -> Vec<Span> {
    windows(content, old, |w, p| {
        let n = p.len();
        w.iter().zip(p).enumerate().all(|(i, (a, b))| {
            if i == 0 || i + 1 == n {
                a.trim() == b.trim()
            } else {
                a == b
            }
        })
    })
}

/// A normalised text plus, for every byte of it, the original byte span of the source char.
struct Normalized {
    text: String,
    map: Vec<Span>,
}

impl Normalized {
    fn to_orig(&self, (s, e): Span) -> Span {
        if s >= e {
            let at = self.map.get(s).map(|m| m.0).unwrap_or(usize::MAX);
            return (at, at);
        }
        (self.map[s].0, self.map[e - 1].1)
    }

    fn push(&mut self, piece: &str, orig: Span) {
        self.text.push_str(piece);
        self.map.extend(std::iter::repeat_n(orig, piece.len()));
    }
}

/// Collapse runs of spaces/tabs to one space (newlines kept).
fn ws_normalize(s: &str) -> Normalized {
    let mut n = Normalized {
        text: String::with_capacity(s.len()),
        map: Vec::with_capacity(s.len()),
    };
    let mut iter = s.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        if c == ' ' || c == '\t' {
            let mut end = i + 1;
            while let Some(&(j, d)) = iter.peek() {
                if d == ' ' || d == '\t' {
                    end = j + 1;
                    iter.next();
                } else {
                    break;
                }
            }
            n.push(" ", (i, end));
        } else {
            let e = i + c.len_utf8();
            n.push(&s[i..e], (i, e));
        }
    }
    n
}

fn whitespace_normalized(content: &str, old: &str) -> Vec<Span> {
    let nc = ws_normalize(content);
    let no = ws_normalize(old).text;
    if no.trim().is_empty() {
        return Vec::new();
    }
    exact(&nc.text, &no)
        .into_iter()
        .map(|sp| nc.to_orig(sp))
        .collect()
}

fn escape_normalized(content: &str, old: &str) -> Vec<Span> {
    if !(old.contains("\\n") || old.contains("\\t") || old.contains("\\r")) {
        return Vec::new();
    }
    let unescaped = old
        .replace("\\n", "\n")
        .replace("\\t", "\t")
        .replace("\\r", "\r");
    exact(content, &unescaped)
}

fn unicode_map(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{201C}' | '\u{201D}' => "\"",
        '\u{2018}' | '\u{2019}' => "'",
        '\u{2014}' => "--",
        '\u{2013}' | '\u{2212}' => "-",
        '\u{2026}' => "...",
        '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => " ",
        _ => return None,
    })
}

fn uni_normalize(s: &str) -> Normalized {
    let mut n = Normalized {
        text: String::with_capacity(s.len()),
        map: Vec::with_capacity(s.len()),
    };
    for (i, c) in s.char_indices() {
        let e = i + c.len_utf8();
        match unicode_map(c) {
            Some(rep) => n.push(rep, (i, e)),
            None => n.push(&s[i..e], (i, e)),
        }
    }
    n
}

fn unicode_normalized(content: &str, old: &str) -> Vec<Span> {
    let nc = uni_normalize(content);
    let no = uni_normalize(old).text;
    if nc.text == content && no == old {
        return Vec::new();
    }
    let mut spans = exact(&nc.text, &no);
    if spans.is_empty() {
        spans = line_trimmed(&nc.text, &no);
    }
    spans.into_iter().map(|sp| nc.to_orig(sp)).collect()
}

fn block_anchor(content: &str, old: &str) -> Vec<Span> {
    let nc = uni_normalize(content).text;
    let no = uni_normalize(old).text;
    let pat: Vec<&str> = no.split('\n').collect();
    let p = pat.len();
    if p < 2 {
        return Vec::new();
    }
    let orig = line_spans(content);
    let lines: Vec<&str> = nc.split('\n').collect();
    if lines.len() != orig.len() || p > lines.len() {
        return Vec::new();
    }
    let (first, last) = (pat[0].trim(), pat[p - 1].trim());
    let candidates: Vec<usize> = (0..=lines.len() - p)
        .filter(|&i| lines[i].trim() == first && lines[i + p - 1].trim() == last)
        .collect();
    let threshold = if candidates.len() == 1 { 0.50 } else { 0.70 };
    let pat_mid = pat[1..p - 1].join("\n");
    let mut out: Vec<Span> = Vec::new();
    let mut next_free = 0;
    for i in candidates {
        if i < next_free {
            continue;
        }
        let sim = if p <= 2 {
            1.0
        } else {
            ratio(&lines[i + 1..i + p - 1].join("\n"), &pat_mid)
        };
        if sim >= threshold {
            out.push((orig[i].0, orig[i + p - 1].1));
            next_free = i + p;
        }
    }
    out
}

/// Upper bound of `ratio` from the lengths alone (difflib's `real_quick_ratio`).
fn quick_bound(a: &str, b: &str) -> f64 {
    let (la, lb) = (a.chars().count(), b.chars().count());
    if la + lb == 0 {
        return 1.0;
    }
    2.0 * la.min(lb) as f64 / (la + lb) as f64
}

fn similar(a: &str, b: &str) -> bool {
    a == b || (quick_bound(a, b) >= 0.80 && ratio(a, b) >= 0.80)
}

fn context_aware(content: &str, old: &str) -> Vec<Span> {
    let pat: Vec<&str> = old.split('\n').map(str::trim).collect();
    let p = pat.len();
    let cl = line_spans(content);
    let lines: Vec<&str> = cl.iter().map(|&(s, e)| content[s..e].trim()).collect();
    if p > lines.len() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i + p <= lines.len() {
        let w = &lines[i..i + p];
        let ok = similar(w[0], pat[0])
            && similar(w[p - 1], pat[p - 1])
            && w.iter()
                .zip(&pat)
                .all(|(c, q)| q.is_empty() || similar(c, q));
        if ok {
            out.push((cl[i].0, cl[i + p - 1].1));
            i += p;
        } else {
            i += 1;
        }
    }
    out
}

/// Refuse non-exact matches that look like doubly escaped arguments.
fn guard(content: &str, old: &str, new: &str, spans: &[Span]) -> Result<(), PatchError> {
    let regions: Vec<&str> = spans.iter().map(|&(s, e)| &content[s..e]).collect();
    for esc in ["\\'", "\\\""] {
        if old.contains(esc) && new.contains(esc) && !regions.iter().any(|r| r.contains(esc)) {
            return Err(PatchError::Refused {
                reason: "Refused: old_string and new_string contain escaped quotes (\\' or \\\") but the matched file text does not; the arguments were probably escaped twice. Re-read the file and send the quotes unescaped.".into(),
            });
        }
    }
    if new.contains("\\n") {
        let old_lits = old.matches("\\n").count();
        if regions
            .iter()
            .any(|r| r.contains('\n') && old_lits > r.matches("\\n").count())
        {
            return Err(PatchError::Refused {
                reason: "Refused: new_string contains literal \\n sequences where the file has real line breaks; the arguments were probably JSON-escaped twice. Send real newlines.".into(),
            });
        }
    }
    let old_runs = backslash_runs(old);
    let new_runs = backslash_runs(new);
    for r in &regions {
        let file_runs = backslash_runs(r);
        if !old_runs.is_empty()
            && old_runs.len() == file_runs.len()
            && old_runs.iter().zip(&file_runs).all(|(o, f)| *o == 2 * *f)
            && (file_runs.iter().any(|&f| f >= 2) || file_runs.len() >= 2)
            && new_runs != file_runs
        {
            return Err(PatchError::Refused {
                reason: "Refused: every backslash run in old_string is twice as long as in the file; the arguments were probably escaped twice. Send backslashes exactly as the file has them.".into(),
            });
        }
    }
    Ok(())
}

fn backslash_runs(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut run = 0;
    for c in s.chars() {
        if c == '\\' {
            run += 1;
        } else if run > 0 {
            out.push(run);
            run = 0;
        }
    }
    if run > 0 {
        out.push(run);
    }
    out
}

/// Shape `new` for one non-exact region: conditional unescape, Unicode preservation
/// (strategy 7), re-indentation.
fn shape(region: &str, old: &str, new: &str, strategy: Strategy) -> String {
    let mut text = new.to_string();
    if region.contains('\t') {
        text = text.replace("\\t", "\t");
    }
    if region.contains('\r') {
        text = text.replace("\\r", "\r");
    }
    if strategy == Strategy::UnicodeNormalized {
        text = preserve_unicode(region, old, &text);
    }
    if region.contains("\r\n") && !text.contains('\r') {
        text = text.replace('\n', "\r\n");
    }
    let old_base = base_indent(old);
    let file_base = base_indent(region);
    if old_base == file_base {
        return text;
    }
    text.split('\n')
        .map(|l| {
            if l.trim().is_empty() {
                l.to_string()
            } else if let Some(rest) = l.strip_prefix(old_base) {
                format!("{file_base}{rest}")
            } else {
                format!("{file_base}{}", l.trim_start())
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn base_indent(s: &str) -> &str {
    s.split('\n')
        .find(|l| !l.trim().is_empty())
        .map(|l| &l[..l.len() - l.trim_start().len()])
        .unwrap_or("")
}

/// Keep the file's own characters (smart quotes, dashes) wherever `new` leaves the
/// normalised `old` unchanged.
fn preserve_unicode(region: &str, old: &str, new: &str) -> String {
    let nr = uni_normalize(region);
    let no = uni_normalize(old).text;
    if nr.text != no {
        return new.to_string();
    }
    // Char-level index map: normalised char k → original char index in `region`.
    let region_chars: Vec<char> = region.chars().collect();
    let mut map: Vec<usize> = Vec::new();
    for (ci, c) in region.chars().enumerate() {
        let n = unicode_map(c).map(|r| r.chars().count()).unwrap_or(1);
        map.extend(std::iter::repeat_n(ci, n));
    }
    map.push(region_chars.len());
    let a: Vec<char> = no.chars().collect();
    let b: Vec<char> = new.chars().collect();
    let mut out = String::with_capacity(new.len());
    for (tag, i1, i2, j1, j2) in Matcher::new(&a, &b).opcodes() {
        match tag {
            OpTag::Equal => out.extend(&region_chars[map[i1]..map[i2].max(map[i1])]),
            OpTag::Replace | OpTag::Insert => out.extend(&b[j1..j2]),
            OpTag::Delete => {}
        }
    }
    out
}

fn line_of(content: &str, at: usize) -> (usize, &str) {
    let line_no = content[..at].matches('\n').count() + 1;
    let start = content[..at].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let end = content[start..]
        .find('\n')
        .map(|i| start + i)
        .unwrap_or(content.len());
    (line_no, &content[start..end])
}

fn cut80(s: &str) -> String {
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

fn ambiguity_rows(content: &str, spans: &[Span]) -> Vec<String> {
    let mut rows: Vec<String> = spans
        .iter()
        .take(5)
        .map(|&(s, _)| {
            let (n, line) = line_of(content, s);
            format!("  L{n}: {}", cut80(line.trim()))
        })
        .collect();
    if spans.len() > 5 {
        rows.push(format!("  ... and {} more", spans.len() - 5));
    }
    rows
}

/// "Did you mean" sections for a failed match (empty when nothing is similar).
fn did_you_mean(content: &str, old: &str) -> String {
    let Some(anchor) = old.split('\n').map(str::trim).find(|l| !l.is_empty()) else {
        return String::new();
    };
    let lines: Vec<&str> = content.split('\n').collect();
    let mut scored: Vec<(f64, usize)> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (difflib::ratio(anchor, l.trim()), i))
        .filter(|(r, _)| *r > 0.3)
        .collect();
    if scored.is_empty() {
        return String::new();
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.truncate(3);
    let span = old.split('\n').count();
    let mut seen: Vec<(usize, usize)> = Vec::new();
    let mut blocks = Vec::new();
    for &(_, idx) in &scored {
        let from = idx.saturating_sub(2);
        let to = (idx + 2 + span).min(lines.len());
        if seen.contains(&(from, to)) {
            continue;
        }
        seen.push((from, to));
        let block: Vec<String> = (from..to)
            .map(|k| format!("{:>4}| {}", k + 1, lines[k]))
            .collect();
        blocks.push(block.join("\n"));
    }
    let mut out = format!(
        ".\n\nDid you mean one of these sections?\n{}",
        blocks.join("\n---\n")
    );
    let best = lines[scored[0].1];
    let first_raw = old.split('\n').find(|l| !l.trim().is_empty()).unwrap_or("");
    if best.trim() == anchor && best != first_raw {
        out.push_str(&format!(
            "\n\nWhitespace differs (tab = →, space = ·):\n  file:       {}\n  old_string: {}",
            show_ws(best),
            show_ws(first_raw)
        ));
    }
    out
}

fn show_ws(line: &str) -> String {
    let rest = line.trim_start();
    let lead: String = line[..line.len() - rest.len()]
        .chars()
        .map(|c| match c {
            '\t' => '→',
            ' ' => '·',
            o => o,
        })
        .collect();
    format!("{lead}{rest}")
}
