//! Rules for a JSON value (a MoviePilot result), in one walk over it. The caller decides when to
//! apply them (the tool layer: unless the user confirmed a secret read).
//!
//! - **Credential keys.** A key is secret when, normalised to snake_case (`apiKey` → `api_key`,
//!   `TMDB_API_KEY` → `tmdb_api_key`), it is one of the credential words below or ends in
//!   `_<word>`. Whole words only, so `token_count`, `max_tokens` and `passkey_expire` stay
//!   visible. Its value becomes [`REDACTED`].
//! - **Setting rows.** MoviePilot's settings also come as `{"key": "<NAME>", "value": …}` rows;
//!   the `value` of a row whose `key`/`name`/`setting_key` is secret is redacted too.
//! - **Form descriptors.** A credential key holding a field's description (`{"passkey":
//!   {"name": "密钥", "type": "password"}}`, what a site's sign-in options list) describes a
//!   form, it holds no secret: it stays, except a `value`/`default` filled in.
//! - **Everything else**: each string goes through the text rules ([`crate::redact`]), so a
//!   password in a URL (`PROXY_HOST=http://user:pass@…`), an `Authorization:` line or a known
//!   token shape inside a value is caught whatever its key.

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

/// The keys a form field's description is made of. A filled-in `value`/`default` is not one of
/// them: it is the secret itself.
const DESCRIPTOR_KEYS: [&str; 14] = [
    "name",
    "label",
    "title",
    "type",
    "placeholder",
    "description",
    "desc",
    "hint",
    "help",
    "tooltip",
    "required",
    "optional",
    "hidden",
    "readonly",
];

/// The keys of a descriptor that carry what was filled in.
const FILLED_KEYS: [&str; 2] = ["value", "default"];

/// Whether `v` (held by a credential key) describes a form field rather than holding a secret:
/// an object naming the field's `type`, `label`, `placeholder` or `title`, made only of
/// descriptor keys (and a filled-in value).
fn is_form_descriptor(v: &Value) -> bool {
    let Value::Object(map) = v else {
        return false;
    };
    ["type", "label", "placeholder", "title"]
        .iter()
        .any(|k| map.contains_key(*k))
        && map.iter().all(|(k, v)| {
            FILLED_KEYS.contains(&k.as_str())
                || (DESCRIPTOR_KEYS.contains(&k.as_str()) && !matches!(v, Value::Object(_)))
        })
}

/// Replaces the values of secret keys in `value` with [`REDACTED`] and runs the text rules over
/// every other string; returns whether anything was replaced. Empty values, `null` and booleans
/// under a secret key are left as they are (they reveal nothing).
pub fn redact_secrets(value: &mut Value) -> bool {
    redact_in(value, false)
}

/// `filled_is_secret`: `value`/`default` of this object are secret (a setting row, or a
/// descriptor of a credential field).
fn redact_in(value: &mut Value, filled_is_secret: bool) -> bool {
    match value {
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |acc, v| redact_in(v, false) | acc),
        Value::Object(map) => {
            let mut changed = false;
            let row_is_secret = filled_is_secret
                || ["key", "name", "setting_key"].iter().any(|k| {
                    map.get(*k)
                        .and_then(Value::as_str)
                        .is_some_and(is_secret_key)
                });
            for (k, v) in map.iter_mut() {
                let row_value = row_is_secret
                    && (k == "value" || (filled_is_secret && FILLED_KEYS.contains(&k.as_str())));
                if is_secret_key(k) && is_form_descriptor(v) {
                    changed |= redact_in(v, true);
                } else if (is_secret_key(k) || row_value) && holds_something(v) {
                    *v = Value::String(REDACTED.to_owned());
                    changed = true;
                } else {
                    changed |= redact_in(v, false);
                }
            }
            changed
        }
        Value::String(s) => match crate::redact(s) {
            std::borrow::Cow::Owned(o) if o != *s => {
                *s = o;
                true
            }
            _ => false,
        },
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}
