//! The entry model of a memory file: entries joined by `"\n§\n"`, budgets in characters.

/// Entry delimiter (3 chars; a bare `§` inside an entry never splits it).
pub const DELIMITER: &str = "\n§\n";

/// Split a file into trimmed, non-empty entries, dropping exact duplicates (first kept).
pub fn parse(raw: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in raw.split(DELIMITER) {
        let t = part.trim();
        if !t.is_empty() && !out.iter().any(|e| e == t) {
            out.push(t.to_string());
        }
    }
    out
}

/// The canonical file text for `entries`.
pub fn join(entries: &[String]) -> String {
    entries.join(DELIMITER)
}

/// Characters (code points) — budgets are model independent.
pub fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Usage of a store: the joined length, delimiters included.
pub fn usage(entries: &[String]) -> usize {
    if entries.is_empty() {
        return 0;
    }
    entries.iter().map(|e| chars(e)).sum::<usize>() + (entries.len() - 1) * chars(DELIMITER)
}

/// First `n` chars, with `...` when cut.
pub fn preview(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// `1375` → `1,375`.
pub fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
