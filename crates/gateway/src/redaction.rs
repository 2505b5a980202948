//! Redaction of secret values in a result, by key name. The tool layer decides when to apply it
//! (for results of `secret` sensitivity, unless the user confirmed the read).
//!
//! A key is secret when, normalised to snake_case (`apiKey` → `api_key`, `TMDB_API_KEY` →
//! `tmdb_api_key`), it is one of the credential words below or ends in `_<word>`. Whole words
//! only, so `token_count`, `max_tokens` and `passkey_expire` stay visible. MoviePilot's settings
//! also come as `{"key": "<NAME>", "value": …}` rows; the `value` of a row whose `key`/`name`
//! is secret is redacted too. One pass over the value, no regex.

use serde_json::Value;

/// What a redacted value becomes.
pub const REDACTED: &str = "[REDACTED]";

const SECRET_WORDS: [&str; 20] = [
    "access_token",
    "api_key",
    "api_token",
    "apikey",
    "auth_header",
    "authorization",
    "client_secret",
    "cookie",
    "cookiecloud_key",
    "encrypt_key",
    "passkey",
    "passwd",
    "password",
    "private_key",
    "pwd",
    "refresh_token",
    "secret",
    "secret_key",
    "session_token",
    "token",
];

/// `apiKey` → `api_key`, `CookieCloud-Key` → `cookie_cloud_key`, `RSSUrl` → `rss_url`.
fn snake(name: &str) -> String {
    let chars: Vec<char> = name.trim().chars().collect();
    let mut out = String::with_capacity(chars.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_alphanumeric() {
            let prev = i.checked_sub(1).map(|p| chars[p]);
            let next = chars.get(i + 1).copied();
            let boundary = c.is_ascii_uppercase()
                && prev.is_some_and(|p| {
                    p.is_ascii_lowercase()
                        || p.is_ascii_digit()
                        || (p.is_ascii_uppercase() && next.is_some_and(|n| n.is_ascii_lowercase()))
                });
            if boundary && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    while out.ends_with('_') {
        out.pop();
    }
    out
}

/// Whether a key names a credential.
pub fn is_secret_key(name: &str) -> bool {
    let n = snake(name);
    // `cookie_cloud_key` is how camel-cased CookieCloud keys normalise.
    let n = n.replace("cookie_cloud", "cookiecloud");
    SECRET_WORDS
        .iter()
        .any(|w| n == *w || n.strip_suffix(w).is_some_and(|head| head.ends_with('_')))
}

fn holds_something(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(_) => false,
        Value::String(s) => !s.is_empty() && s != REDACTED,
        Value::Number(_) => true,
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Replaces the values of secret keys in `value` with [`REDACTED`]; returns whether anything
/// was replaced. Empty values, `null` and booleans are left as they are (they reveal nothing).
pub fn redact_secrets(value: &mut Value) -> bool {
    match value {
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |acc, v| redact_secrets(v) | acc),
        Value::Object(map) => {
            let mut changed = false;
            let row_is_secret = ["key", "name", "setting_key"].iter().any(|k| {
                map.get(*k)
                    .and_then(Value::as_str)
                    .is_some_and(is_secret_key)
            });
            for (k, v) in map.iter_mut() {
                if (is_secret_key(k) || (row_is_secret && k == "value")) && holds_something(v) {
                    *v = Value::String(REDACTED.to_owned());
                    changed = true;
                } else {
                    changed |= redact_secrets(v);
                }
            }
            changed
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_keys_by_whole_word() {
        for k in [
            "apikey",
            "apiKey",
            "API_KEY",
            "TMDB_API_KEY",
            "cookie",
            "Cookie",
            "passkey",
            "password",
            "site_password",
            "token",
            "github_token",
            "CookieCloudKey",
            "COOKIECLOUD_KEY",
            "secret",
            "client-secret",
            "rss_encrypt_key",
        ] {
            assert!(is_secret_key(k), "{k}");
        }
        for k in [
            "token_count",
            "max_tokens",
            "tokens",
            "passkey_expire",
            "name",
            "cookies_enabled",
            "keyword",
            "secretary",
            "",
        ] {
            assert!(!is_secret_key(k), "{k}");
        }
    }

    #[test]
    fn redacts_nested_values_and_setting_rows() {
        let mut v = json!({
            "data": [
                {"id": 1, "name": "site", "cookie": "uid=1; pass=abc", "apikey": "", "ua": "x"},
                {"key": "TMDB_API_KEY", "value": "0123"},
                {"key": "DOWNLOAD_PATH", "value": "/media"},
            ],
            "token": null,
        });
        assert!(redact_secrets(&mut v));
        assert_eq!(
            v,
            json!({
                "data": [
                    {"id": 1, "name": "site", "cookie": REDACTED, "apikey": "", "ua": "x"},
                    {"key": "TMDB_API_KEY", "value": REDACTED},
                    {"key": "DOWNLOAD_PATH", "value": "/media"},
                ],
                "token": null,
            })
        );
        assert!(!redact_secrets(&mut v), "a second pass finds nothing new");
        assert!(!redact_secrets(&mut json!({"title": "三体", "count": 3})));
    }
}
