//! JSON shapes the model reads: clipping of long metadata by JSON-escaped length, error
//! payloads, and the outcome mapping that core's classifier relies on.

use serde_json::{Map, Value, json};

/// Clips `s` so its JSON-escaped form (non-ASCII kept) is at most `limit` characters.
/// Returns the clipped text and whether anything was cut.
pub(crate) fn clip(s: &str, limit: usize) -> (String, bool) {
    let mut used = 0;
    for (index, ch) in s.char_indices() {
        let cost = match ch {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            _ => 1,
        };
        if used + cost > limit {
            return (s[..index].to_string(), true);
        }
        used += cost;
    }
    (s.to_string(), false)
}

/// Characters of the pretty-printed JSON, as the host's result cap counts them.
pub(crate) fn json_chars(value: &Value) -> usize {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.chars().count()
}

/// The error payload of any action (spec runtime.md §5.4 "Error JSON").
pub(crate) fn error_json(
    action: &str,
    code: &str,
    message: &str,
    minimum_read_bytes: Option<usize>,
) -> Value {
    let (error, truncated) = clip(message, 512);
    let mut obj = Map::new();
    obj.insert("error".into(), json!(error));
    if truncated {
        obj.insert("error_truncated".into(), json!(true));
    }
    obj.insert("status".into(), json!("error"));
    obj.insert("action".into(), json!(action));
    obj.insert("success".into(), json!(false));
    obj.insert("execution_outcome".into(), json!("failed"));
    obj.insert("code".into(), json!(code));
    if let Some(minimum) = minimum_read_bytes {
        obj.insert("minimum_read_bytes".into(), json!(minimum));
    }
    Value::Object(obj)
}

/// Outcome of a session: pending while running, failed for error/killed/non-zero, unknown
/// without an exit code, succeeded only for exit 0.
pub(crate) fn session_outcome(status: &str, exit_code: Option<i32>) -> &'static str {
    match (status, exit_code) {
        ("running", _) => "pending",
        ("killed" | "error", _) => "failed",
        (_, Some(0)) => "succeeded",
        (_, Some(_)) => "failed",
        (_, None) => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_counts_escaped_characters() {
        assert_eq!(clip("abc", 3), ("abc".into(), false));
        assert_eq!(clip("abcd", 3), ("abc".into(), true));
        assert_eq!(clip("a\"b", 2), ("a".into(), true));
        assert_eq!(clip("世界世界", 2), ("世界".into(), true));
        assert_eq!(clip("\u{1}x", 6), ("\u{1}".into(), true));
    }

    #[test]
    fn outcomes_follow_the_honesty_rules() {
        assert_eq!(session_outcome("running", None), "pending");
        assert_eq!(session_outcome("exited", Some(0)), "succeeded");
        assert_eq!(session_outcome("exited", Some(2)), "failed");
        assert_eq!(session_outcome("exited", None), "unknown");
        assert_eq!(session_outcome("killed", Some(0)), "failed");
    }
}
