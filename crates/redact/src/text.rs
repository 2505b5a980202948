//! Text rules: one linear-time regex pass (the `regex` crate never backtracks), so secrets are
//! redacted once, at capture, and read paths only cap lengths and never re-scan.

use regex::{Captures, Regex};
use std::borrow::Cow;
use std::sync::LazyLock;

/// Alternatives are ordered: at one position the regex crate prefers the earliest branch, so
/// the specific shapes (PEM, headers, known key formats) win over the generic `key=value` rule.
static SECRET_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let pattern = concat!(
        // PEM private keys (whole block).
        r"(?P<pem>-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----)",
        // Cookie headers: the whole value up to end of line.
        r#"|(?P<cookie_h>(?:\\?["'])?(?i:(?-u:\b)(?:set-)?cookie)(?:\\?["'])?\s*:\s*)(?P<cookie_v>[^\r\n]+)"#,
        // Authorization headers / bearer-style credentials (an already redacted one matches too,
        // so a second pass leaves it as it is).
        r#"|(?P<auth_h>(?:\\?["'])?(?i:(?-u:\b)(?:proxy-)?authorization(?:\\?["'])?\s*[:=]\s*(?:(?:bearer|basic|token|digest)\s+)?|(?-u:\b)bearer\s+))(?P<auth_v>[A-Za-z0-9\-._~+/]{8,}=*|\[REDACTED:[a-z_]+\])"#,
        // JSON Web Tokens.
        r"|(?P<jwt>(?-u:\b)eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,})",
        // Well-known API key shapes.
        // `sk-` bodies from eight characters (provider keys quoted in model errors); `rk-`/`pk-`
        // from sixteen, as shorter ones are ordinary identifiers.
        r"|(?P<apikey>(?-u:\b)sk-(?:[A-Za-z0-9]+-)?[A-Za-z0-9_\-]{8,}|(?-u:\b)(?:rk|pk)-(?:[A-Za-z0-9]+-)?[A-Za-z0-9_\-]{16,}",
        r"|(?-u:\b)gh[pousr]_[A-Za-z0-9]{20,}|(?-u:\b)github_pat_[A-Za-z0-9_]{20,}",
        r"|(?-u:\b)xox[abposr]-[A-Za-z0-9\-]{10,}|(?-u:\b)AKIA[0-9A-Z]{16}(?-u:\b)|(?-u:\b)AIza[0-9A-Za-z_\-]{30,})",
        // Passwords in URLs: scheme://user:PASSWORD@host
        r"|(?P<url_pre>(?-u:\b)[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:)(?P<url_pw>[^\s/@]+)(?P<url_at>@)",
        // A password told in a sentence: "my password is …", "the new password is: …",
        // "密码是…", "口令为 …". The value is one word or a quoted phrase; `phrase_value`
        // keeps ordinary sentences about passwords ("the password is too short", "密码是什么").
        r#"|(?P<pp_key>(?i:(?-u:\b)(?:(?P<pp_own>my|our)\s+(?:[a-z][a-z-]{0,15}\s+)?)?(?:password|passphrase|passcode|passwd|pwd)\s+(?:is|was)(?:\s*:)?\s+(?:still\s+|now\s+)?))"#,
        r#"(?P<pp_val>"[^"\n]{1,128}"|'[^'\n]{1,128}'|“[^”\n]{1,128}”|[^\s"'“”<>]+)"#,
        r#"|(?P<zh_key>(?:密码|密碼|口令)\s*(?:是|为|為|:|：)\s*)(?P<zh_val>[“"'「][^”"'」\n]{1,128}[”"'」]|[[!-~]&&[^"'<>]]{4,})"#,
        // key=value, key: value, "key": "value", \"key\": \"value\" where the key names a secret.
        r#"|(?P<kv_key>(?:\\?["'])?(?P<kv_name>[A-Za-z0-9_\-.]*(?i:password|passwd|secret|token|api[_\-]?key|apikey|cookie|passkey|credential|private[_\-]?key|authorization)[A-Za-z0-9_\-]*)(?:\\?["'])?\s*[:=]\s*)"#,
        r#"(?P<kv_val>\\"(?:[^"\\]|\\[^"])*\\"|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s,;&"'}\]<>]+)"#,
    );
    Regex::new(pattern).ok()
});

/// Key names that contain a secret word but hold counts or limits, not secrets.
fn benign_key(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("tokens")
        || n.contains("tokenizer")
        || n.contains("count")
        || n.contains("limit")
        || n.contains("length")
        || n.contains("expire")
        || n.contains("type")
        || n.ends_with("_id")
        || n.ends_with("name")
        || n.ends_with("file")
        || n.ends_with("path")
}

fn kind_for_key(name: &str) -> &'static str {
    let n = name.to_ascii_lowercase();
    if n.contains("pass") || n.contains("pwd") {
        "password"
    } else if n.contains("cookie") {
        "cookie"
    } else if n.contains("api") && n.contains("key") {
        "api_key"
    } else if n.contains("private") {
        "private_key"
    } else if n.contains("token") || n.contains("authorization") {
        "token"
    } else {
        "secret"
    }
}

fn is_trivial_value(v: &str) -> bool {
    let inner = v.trim_matches(|c| c == '"' || c == '\'' || c == '\\');
    inner.is_empty()
        || matches!(
            inner,
            "null" | "true" | "false" | "None" | "***" | "<redacted>"
        )
        || inner.starts_with("[REDACTED")
}

/// Words that follow "password is" in ordinary sentences about passwords.
const NOT_A_PASSWORD: &[&str] = &[
    "wrong",
    "incorrect",
    "correct",
    "right",
    "invalid",
    "valid",
    "required",
    "needed",
    "mandatory",
    "optional",
    "empty",
    "blank",
    "missing",
    "weak",
    "strong",
    "too",
    "not",
    "no",
    "never",
    "always",
    "also",
    "only",
    "same",
    "different",
    "set",
    "reset",
    "hidden",
    "secret",
    "safe",
    "secure",
    "long",
    "short",
    "the",
    "a",
    "an",
    "your",
    "my",
    "our",
    "their",
    "his",
    "her",
    "its",
    "this",
    "that",
    "what",
    "how",
    "where",
    "which",
    "why",
    "when",
    "case-sensitive",
    "ok",
    "okay",
    "fine",
    "good",
    "bad",
    "simple",
    "easy",
    "hard",
    "complex",
    "unknown",
    "forgotten",
    "lost",
    "known",
    "visible",
    "shown",
    "null",
    "none",
    "here",
    "there",
    "in",
    "on",
    "at",
    "for",
    "to",
    "of",
    "from",
    "by",
    "with",
    "without",
];

/// Sentence punctuation after a told password that is not part of it.
const TRAILING: &[char] = &['.', ',', ';', '。', ',', ';'];

/// Whether `v` (a value told in a sentence, see the `pp_`/`zh_` branches) looks like a password:
/// a quoted phrase always does; a bare word does unless it is a common word that sentences about
/// passwords use, and a bare word of letters only counts after "my/our" ("my password is
/// sunshine"), not in "the password is generated".
fn phrase_value(v: &str, possessive: bool) -> bool {
    if is_trivial_value(v) || v.chars().count() < 4 {
        return false;
    }
    if v.starts_with(['"', '\'', '“', '「']) {
        return true;
    }
    let lower = v.to_lowercase();
    if NOT_A_PASSWORD.contains(&lower.as_str()) {
        return false;
    }
    let letters_only = lower.chars().all(|c| c.is_ascii_lowercase() || c == '-');
    if !letters_only {
        return true;
    }
    possessive && !["ed", "ing", "ly"].iter().any(|s| lower.ends_with(s))
}

/// `key` + marker for a password told in a sentence, keeping sentence punctuation after it.
fn replace_phrase(key: &str, value: &str, possessive: bool) -> Option<String> {
    let quoted = value.starts_with(['"', '\'', '“', '「']);
    let bare = if quoted {
        value
    } else {
        value.trim_end_matches(TRAILING)
    };
    if !phrase_value(bare, possessive) {
        return None;
    }
    Some(format!("{key}[REDACTED:password]{}", &value[bare.len()..]))
}

fn replace_one(caps: &Captures<'_>) -> String {
    let whole = caps.get(0).map_or("", |m| m.as_str());
    if caps.name("pem").is_some() {
        return "[REDACTED:private_key]".to_owned();
    }
    if let (Some(h), Some(_)) = (caps.name("cookie_h"), caps.name("cookie_v")) {
        return format!("{}[REDACTED:cookie]", h.as_str());
    }
    if let (Some(h), Some(_)) = (caps.name("auth_h"), caps.name("auth_v")) {
        return format!("{}[REDACTED:token]", h.as_str());
    }
    if caps.name("jwt").is_some() {
        return "[REDACTED:jwt]".to_owned();
    }
    if caps.name("apikey").is_some() {
        return "[REDACTED:api_key]".to_owned();
    }
    if let (Some(pre), Some(_), Some(at)) = (
        caps.name("url_pre"),
        caps.name("url_pw"),
        caps.name("url_at"),
    ) {
        return format!("{}[REDACTED:password]{}", pre.as_str(), at.as_str());
    }
    if let (Some(key), Some(val)) = (caps.name("pp_key"), caps.name("pp_val")) {
        let own = caps.name("pp_own").is_some();
        return replace_phrase(key.as_str(), val.as_str(), own).unwrap_or_else(|| whole.to_owned());
    }
    if let (Some(key), Some(val)) = (caps.name("zh_key"), caps.name("zh_val")) {
        return replace_phrase(key.as_str(), val.as_str(), true)
            .unwrap_or_else(|| whole.to_owned());
    }
    if let (Some(key), Some(name), Some(val)) = (
        caps.name("kv_key"),
        caps.name("kv_name"),
        caps.name("kv_val"),
    ) {
        let v = val.as_str();
        if benign_key(name.as_str()) || is_trivial_value(v) {
            return whole.to_owned();
        }
        let marker = format!("[REDACTED:{}]", kind_for_key(name.as_str()));
        let quoted = if v.starts_with("\\\"") {
            format!("\\\"{marker}\\\"")
        } else if v.starts_with('"') {
            format!("\"{marker}\"")
        } else if v.starts_with('\'') {
            format!("'{marker}'")
        } else {
            marker
        };
        return format!("{}{}", key.as_str(), quoted);
    }
    whole.to_owned()
}

/// Replace secrets (bearer/API tokens, `sk-…` keys, JWTs, PEM private keys, passwords and
/// cookies in URLs, headers and `key=value`/JSON fields named after a secret) with stable
/// `[REDACTED:<kind>]` markers. Returns the input unchanged (borrowed) when nothing matched.
pub fn redact(text: &str) -> Cow<'_, str> {
    match SECRET_RE.as_ref() {
        Some(re) => re.replace_all(text, |caps: &Captures<'_>| replace_one(caps)),
        // The pattern is a constant checked by the tests; failing closed would drop evidence.
        None => Cow::Borrowed(text),
    }
}

/// A secret the caller holds itself (a configured API key), removed wherever it appears, whatever
/// its shape.
#[derive(Clone, Copy)]
pub struct KnownSecret<'a> {
    /// The marker's kind: `[REDACTED:<kind>]`.
    pub kind: &'static str,
    pub value: &'a str,
}

impl std::fmt::Debug for KnownSecret<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KnownSecret({})", self.kind)
    }
}

/// Shorter known values are not replaced: they would blank ordinary words.
const MIN_KNOWN_CHARS: usize = 4;

/// [`redact`], after replacing every occurrence of each known secret (trimmed, at least four
/// characters) with `[REDACTED:<kind>]`.
pub fn redact_known<'t>(text: &'t str, known: &[KnownSecret<'_>]) -> Cow<'t, str> {
    let mut out = Cow::Borrowed(text);
    for k in known {
        let value = k.value.trim();
        if value.chars().count() >= MIN_KNOWN_CHARS && out.contains(value) {
            out = Cow::Owned(out.replace(value, &format!("[REDACTED:{}]", k.kind)));
        }
    }
    match out {
        Cow::Borrowed(t) => redact(t),
        Cow::Owned(t) => Cow::Owned(redact(&t).into_owned()),
    }
}
