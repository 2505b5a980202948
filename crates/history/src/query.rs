//! The query language (spec §8): the FTS5 sanitiser, OR-relaxation, quote-each-token, a
//! syntax-safe rebuild used after an FTS5 syntax error, and the LIKE boolean compiler.

use regex::Regex;
use std::sync::LazyLock;

/// Maximum query length accepted by the tool (characters).
pub const MAX_QUERY_CHARS: usize = 1024;

/// Terms (a word or a quoted phrase each) and, counted apart, explicit operators (`AND`, `OR`,
/// `NOT`) one search accepts. Every term is an FTS5 phrase whose occurrences FTS5 merges for each
/// candidate row, so the work per row grows with their number; real queries use a handful (the
/// tool asks for a few words, OR for recall), and 64 is also the most phrases a ranked search
/// scores from posting lists.
pub const MAX_QUERY_TERMS: usize = 64;

/// Placeholder delimiters for protected phrases (private-use code points, stripped from input
/// first so user text can never forge one).
const PH_OPEN: char = '\u{E000}';
const PH_CLOSE: char = '\u{E001}';

static COMPOUND_RE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\w+(?:[._\-]\w+)+").ok());

/// Whether a code point is CJK for routing purposes. Must equal the tokenizer's classification.
pub fn is_cjk(c: char) -> bool {
    crate::tokenizer::is_cjk(c)
}

pub fn has_cjk(s: &str) -> bool {
    s.chars().any(is_cjk)
}

fn is_operator(t: &str) -> bool {
    matches!(t, "AND" | "OR" | "NOT")
}

fn is_operator_ci(t: &str) -> bool {
    t.eq_ignore_ascii_case("AND") || t.eq_ignore_ascii_case("OR") || t.eq_ignore_ascii_case("NOT")
}

/// Turn free text into an FTS5 expression (spec §8.2). An empty result means "no query".
pub fn sanitize(input: &str) -> String {
    let capped: String = input
        .chars()
        .filter(|&c| c != PH_OPEN && c != PH_CLOSE && c != '\0')
        .take(MAX_QUERY_CHARS)
        .collect();

    // 1. Protect balanced phrases.
    let mut phrases: Vec<String> = Vec::new();
    let mut text = String::with_capacity(capped.len());
    let mut rest = capped.as_str();
    while let Some(start) = rest.find('"') {
        text.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        match after.find('"') {
            Some(end) => {
                phrases.push(format!("\"{}\"", &after[..end]));
                text.push(PH_OPEN);
                text.push_str(&(phrases.len() - 1).to_string());
                text.push(PH_CLOSE);
                rest = &after[end + 1..];
            }
            None => {
                text.push(' ');
                rest = after;
            }
        }
    }
    text.push_str(rest);

    // 2. FTS5-special characters become spaces.
    const SPECIAL: &str = "+{}():\"^@/#&|~[]<>,;!?$=\\'";
    let mut t: String = text
        .chars()
        .map(|c| if SPECIAL.contains(c) { ' ' } else { c })
        .collect();

    // 3. `%` survives only for CJK text (the LIKE route matches it literally).
    if !has_cjk(&t) {
        t = t.replace('%', " ");
    }

    // 4. Stars: collapse runs; drop a star with nothing before it to prefix.
    let mut collapsed = String::with_capacity(t.len());
    for c in t.chars() {
        if c == '*' && collapsed.ends_with('*') {
            continue;
        }
        collapsed.push(c);
    }
    let mut s = String::with_capacity(collapsed.len());
    let mut prev: Option<char> = None;
    for c in collapsed.chars() {
        if c == '*' && prev.is_none_or(char::is_whitespace) {
            s.push(' ');
            prev = Some(' ');
            continue;
        }
        s.push(c);
        prev = Some(c);
    }

    // 5. Dangling operators.
    let mut words: Vec<&str> = s.split_whitespace().collect();
    if words.first().is_some_and(|w| is_operator_ci(w)) {
        words.remove(0);
    }
    if words.last().is_some_and(|w| is_operator_ci(w)) {
        words.pop();
    }
    let joined = words.join(" ");

    // 6. Quote compound words (`chat-send`, `P2.2`, `my-app.config.ts`) in one pass.
    let quoted = match COMPOUND_RE.as_ref() {
        Some(re) => re.replace_all(&joined, "\"$0\"").into_owned(),
        None => joined,
    };

    // 7. Restore phrases.
    restore_phrases(&quoted, &phrases).trim().to_owned()
}

fn restore_phrases(s: &str, phrases: &[String]) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == PH_OPEN {
            let mut num = String::new();
            for d in chars.by_ref() {
                if d == PH_CLOSE {
                    break;
                }
                num.push(d);
            }
            if let Some(p) = num.parse::<usize>().ok().and_then(|i| phrases.get(i)) {
                out.push_str(p);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Split an expression into units: a quoted phrase (with an optional trailing `*`) is one unit.
pub fn units(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_quote = false;
    for c in expr.chars() {
        if c == '"' {
            cur.push(c);
            in_quote = !in_quote;
        } else if c.is_whitespace() && !in_quote {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Refuses a sanitised expression with more than [`MAX_QUERY_TERMS`] terms or operators.
pub fn check_complexity(expr: &str) -> crate::error::Result<()> {
    let (mut terms, mut operators) = (0, 0);
    for u in units(expr) {
        if is_operator(&u) {
            operators += 1;
        } else {
            terms += 1;
        }
    }
    if terms > MAX_QUERY_TERMS || operators > MAX_QUERY_TERMS {
        return Err(crate::error::HistoryError::QueryTooComplex {
            terms,
            operators,
            max: MAX_QUERY_TERMS,
        });
    }
    Ok(())
}

/// OR-relaxed form (spec §8.3): `None` if the query has explicit OR/NOT or fewer than two units.
pub fn or_relaxed(expr: &str) -> Option<String> {
    let us = units(expr);
    if us.iter().any(|u| u == "OR" || u == "NOT") {
        return None;
    }
    let kept: Vec<&String> = us.iter().filter(|u| u.as_str() != "AND").collect();
    if kept.len() < 2 {
        return None;
    }
    Some(
        kept.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(" OR "),
    )
}

/// Quote-each-token form for the trigram/CJK routes: operators kept, every other token quoted.
pub fn quote_each_token(expr: &str, strip_star: bool) -> String {
    let mut out: Vec<String> = Vec::new();
    for u in units(expr) {
        if is_operator(&u) {
            out.push(u);
            continue;
        }
        let mut inner = u.trim_matches('"').to_owned();
        if strip_star || inner.ends_with('*') {
            inner = inner.trim_end_matches('*').trim_matches('"').to_owned();
        }
        if inner.is_empty() {
            continue;
        }
        out.push(format!("\"{}\"", inner.replace('"', "\"\"")));
    }
    fix_operators(out).join(" ")
}

/// Drop operators that would be a syntax error: leading, trailing or doubled.
fn fix_operators(units: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(units.len());
    for u in units {
        if is_operator(&u) && out.last().is_none_or(|l| is_operator(l)) {
            continue;
        }
        out.push(u);
    }
    while out.last().is_some_and(|l| is_operator(l)) {
        out.pop();
    }
    out
}

/// A syntax-safe rebuild used after an FTS5 syntax error: every unit becomes a quoted phrase of
/// its word characters (keeping a trailing prefix `*`), operators only between two units.
pub fn strict_rebuild(expr: &str) -> String {
    let mut out = Vec::new();
    for u in units(expr) {
        if is_operator(&u) {
            out.push(u);
            continue;
        }
        let star = u.ends_with('*');
        let words: String = u
            .chars()
            .map(|c| if c.is_alphanumeric() { c } else { ' ' })
            .collect::<String>()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if words.is_empty() {
            continue;
        }
        out.push(if star {
            format!("\"{words}\"*")
        } else {
            format!("\"{words}\"")
        });
    }
    fix_operators(out).join(" ")
}

/// Tokens that are not operators (whitespace split, quotes stripped).
pub fn non_operator_tokens(expr: &str) -> Vec<String> {
    units(expr)
        .into_iter()
        .filter(|u| !is_operator(u))
        .map(|u| u.trim_end_matches('*').trim_matches('"').to_owned())
        .filter(|u| !u.is_empty())
        .collect()
}

/// One LIKE term of the boolean compiler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LikeTerm {
    pub text: String,
    pub negated: bool,
}

/// The LIKE boolean compiler (spec §8.4): OR separates groups, AND/NEAR are ignored, NOT negates
/// the next term; groups whose terms are all negated are dropped (they would match everything).
pub fn like_groups(expr: &str) -> Vec<Vec<LikeTerm>> {
    let mut groups: Vec<Vec<LikeTerm>> = Vec::new();
    let mut cur: Vec<LikeTerm> = Vec::new();
    let mut negate = false;
    for u in units(expr) {
        match u.as_str() {
            "OR" => {
                if !cur.is_empty() {
                    groups.push(std::mem::take(&mut cur));
                }
                negate = false;
            }
            "AND" | "NEAR" => {}
            "NOT" => negate = true,
            _ => {
                let text = u
                    .trim_end_matches('*')
                    .trim_matches('"')
                    .trim_end_matches('*');
                if !text.is_empty() {
                    cur.push(LikeTerm {
                        text: text.to_owned(),
                        negated: negate,
                    });
                }
                negate = false;
            }
        }
    }
    if !cur.is_empty() {
        groups.push(cur);
    }
    groups.retain(|g| g.iter().any(|t| !t.negated));
    groups
}

/// Escape a term for `LIKE … ESCAPE '\'` and wrap it in `%…%`.
pub fn like_pattern(term: &str) -> String {
    format!("%{}%", escape_like(term))
}

/// Escape `\`, `%` and `_` for `LIKE … ESCAPE '\'`.
pub fn escape_like(term: &str) -> String {
    let mut s = String::with_capacity(term.len());
    for c in term.chars() {
        if matches!(c, '\\' | '%' | '_') {
            s.push('\\');
        }
        s.push(c);
    }
    s
}

/// Whether the query has a lone 1-character CJK run (cannot be served by bigrams).
pub fn has_lone_cjk_char(expr: &str) -> bool {
    let mut run = 0usize;
    let mut lone = false;
    for c in expr.chars().chain(std::iter::once(' ')) {
        if is_cjk(c) {
            run += 1;
        } else {
            if run == 1 {
                lone = true;
            }
            run = 0;
        }
    }
    lone
}
