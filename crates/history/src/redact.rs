//! Secret redaction at capture time: one linear-time regex pass (the `regex` crate never
//! backtracks), so the read path only caps lengths and never re-scans.

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
        // Authorization headers / bearer-style credentials.
        r#"|(?P<auth_h>(?:\\?["'])?(?i:(?-u:\b)(?:proxy-)?authorization(?:\\?["'])?\s*[:=]\s*(?:(?:bearer|basic|token|digest)\s+)?|(?-u:\b)bearer\s+))(?P<auth_v>[A-Za-z0-9\-._~+/]{8,}=*)"#,
        // JSON Web Tokens.
        r"|(?P<jwt>(?-u:\b)eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,})",
        // Well-known API key shapes.
        r"|(?P<apikey>(?-u:\b)(?:sk|rk|pk)-(?:[A-Za-z0-9]+-)?[A-Za-z0-9_\-]{16,}",
        r"|(?-u:\b)gh[pousr]_[A-Za-z0-9]{20,}|(?-u:\b)github_pat_[A-Za-z0-9_]{20,}",
        r"|(?-u:\b)xox[abposr]-[A-Za-z0-9\-]{10,}|(?-u:\b)AKIA[0-9A-Z]{16}(?-u:\b)|(?-u:\b)AIza[0-9A-Za-z_\-]{30,})",
        // Passwords in URLs: scheme://user:PASSWORD@host
        r"|(?P<url_pre>(?-u:\b)[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:)(?P<url_pw>[^\s/@]+)(?P<url_at>@)",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_compiles() {
        assert!(SECRET_RE.is_some());
    }

    #[test]
    fn redacts_common_secret_shapes() {
        let cases = [
            (
                "Authorization: Bearer abcdef1234567890XYZ",
                "Authorization: Bearer [REDACTED:token]",
            ),
            (
                "login?user=bob&password=hunter2&x=1",
                "login?user=bob&password=[REDACTED:password]&x=1",
            ),
            (
                "key sk-proj-ABCDEFGHIJKLMNOPqrstuv done",
                "key [REDACTED:api_key] done",
            ),
            (
                r#"{"api_key": "k-123456", "n": 1}"#,
                r#"{"api_key": "[REDACTED:api_key]", "n": 1}"#,
            ),
            (
                "https://bob:s3cret@example.com/x",
                "https://bob:[REDACTED:password]@example.com/x",
            ),
            (
                "Cookie: sid=abc; other=def\nnext",
                "Cookie: [REDACTED:cookie]\nnext",
            ),
            (
                "MOVIEPILOT_API_TOKEN=abcdef",
                "MOVIEPILOT_API_TOKEN=[REDACTED:token]",
            ),
            (
                r#"{"arguments":"{\"password\":\"pw123\"}"}"#,
                r#"{"arguments":"{\"password\":\"[REDACTED:password]\"}"}"#,
            ),
        ];
        for (input, want) in cases {
            assert_eq!(redact(input), want, "input: {input}");
        }
    }

    #[test]
    fn jwt_and_pem() {
        let jwt = "tok eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcDEF123_-x end";
        assert_eq!(redact(jwt), "tok [REDACTED:jwt] end");
        let pem =
            "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\nb";
        assert_eq!(redact(pem), "a\n[REDACTED:private_key]\nb");
    }

    #[test]
    fn leaves_ordinary_text_alone() {
        for s in [
            "max_tokens=4096 and token_count: 12",
            "the password field is empty: password=\"\"",
            "下载订阅成功 docker networking fixed",
            "token budget is low",
        ] {
            assert!(
                matches!(redact(s), Cow::Borrowed(_)) || redact(s) == s,
                "changed: {s}"
            );
        }
    }
}
