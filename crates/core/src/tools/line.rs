//! What a person reads about one tool call (the web page's tool line, live and after a reload):
//! the operation it ran (`moviepilot_api · subscription.list`), its arguments, a short preview of
//! its result and a one-line summary in English and Chinese (rows returned, id created, exit
//! code). Everything here is redacted and bounded; the outcome word itself is the page's.
//!
//! One function serves both the stream's tool frames and the saved display lines, so a reload
//! shows the same line the stream did.

use crate::tools::invoke::summary_line;
use serde_json::{Map, Value, json};

/// The result preview on a tool line (characters).
const PREVIEW_CHARS: usize = 2_000;
/// The arguments as shown (characters of their JSON; longer arguments become a cut string).
const ARGUMENTS_CHARS: usize = 2_000;

/// The detail of a call: `operation` and `arguments` always (when there are any), and with its
/// result `preview` and `summary_i18n {en, zh}`.
pub fn detail(name: &str, arguments: &str, result: Option<&str>) -> Value {
    let mut d = Map::new();
    let args = serde_json::from_str::<Value>(arguments).ok();
    if let Some(op) = args.as_ref().and_then(|a| operation(name, a)) {
        d.insert("operation".into(), json!(op));
    }
    let shown = redact_cut(arguments, ARGUMENTS_CHARS);
    match args {
        Some(Value::Object(o)) if o.is_empty() => {}
        Some(_) if shown.chars().count() < ARGUMENTS_CHARS => {
            // Redaction works on text; parse back what is shown so the page gets an object.
            let v = serde_json::from_str::<Value>(&shown).unwrap_or(Value::String(shown));
            d.insert("arguments".into(), v);
        }
        _ if !arguments.trim().is_empty() => {
            d.insert("arguments".into(), Value::String(shown));
        }
        _ => {}
    }
    if let Some(content) = result {
        d.insert("preview".into(), json!(redact_cut(content, PREVIEW_CHARS)));
        let (en, zh) = summary(content);
        d.insert("summary_i18n".into(), json!({"en": en, "zh": zh}));
    }
    Value::Object(d)
}

/// The operation a call ran, for the tools that run one of many: MoviePilot's operation id, the
/// browser's action, the memory or skill action.
fn operation(name: &str, args: &Value) -> Option<String> {
    let key = match name {
        crate::tools::moviepilot_api::NAME => "operation_id",
        _ => "action",
    };
    args.get(key)?
        .as_str()
        .map(|s| s.chars().take(80).collect())
}

/// One line about the result in both languages: rows returned, an id created, an exit code —
/// else the result's own first line (the same in both).
fn summary(content: &str) -> (String, String) {
    let v = serde_json::from_str::<Value>(content).ok();
    let data = v.as_ref().map(|v| v.get("data").unwrap_or(v));
    if let Some(code) = v
        .as_ref()
        .and_then(|v| v.get("exit_code"))
        .and_then(Value::as_i64)
    {
        return (format!("exit code {code}"), format!("退出码 {code}"));
    }
    let rows = match data {
        Some(Value::Array(a)) => Some(a.len()),
        Some(Value::Object(o)) => o.get("items").and_then(Value::as_array).map(Vec::len),
        _ => None,
    };
    if let Some(n) = rows {
        let en = if n == 1 {
            "1 row".to_string()
        } else {
            format!("{n} rows")
        };
        return (en, format!("{n} 条记录"));
    }
    let id = data
        .and_then(|d| d.get("id"))
        .filter(|id| id.is_number() || id.is_string());
    let failed = v.as_ref().is_some_and(|v| v.get("error").is_some());
    if let (Some(id), false) = (id, failed) {
        let id = id.as_str().map_or_else(|| id.to_string(), str::to_string);
        return (format!("id {id}"), format!("编号 {id}"));
    }
    let line = summary_line(content);
    (line.clone(), line)
}

fn redact_cut(text: &str, max: usize) -> String {
    let redacted = crate::redaction::redact(text);
    let mut s: String = redacted.chars().take(max).collect();
    if redacted.chars().count() > max {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moviepilot_read_names_its_operation_and_counts_rows_in_both_languages() {
        let d = detail(
            "moviepilot_api",
            r#"{"operation_id":"subscription.list","query":{"page":1}}"#,
            Some(r#"{"success":true,"data":[{"id":1},{"id":2}]}"#),
        );
        assert_eq!(d["operation"], "subscription.list");
        assert_eq!(d["arguments"]["query"]["page"], 1);
        assert_eq!(d["summary_i18n"]["en"], "2 rows");
        assert_eq!(d["summary_i18n"]["zh"], "2 条记录");
        assert!(d["preview"].as_str().unwrap().contains("\"id\":2"));
    }

    #[test]
    fn ids_exit_codes_and_secrets() {
        let d = detail(
            "moviepilot_api",
            r#"{"operation_id":"subscription.add"}"#,
            Some(r#"{"success":true,"data":{"id":42}}"#),
        );
        assert_eq!(d["summary_i18n"]["zh"], "编号 42");
        let d = detail(
            "execute_command",
            r#"{"command":"ls"}"#,
            Some(r#"{"status":"exited","exit_code":3}"#),
        );
        assert_eq!(d["summary_i18n"]["en"], "exit code 3");
        assert!(d.get("operation").is_none());
        let d = detail(
            "execute_command",
            r#"{"command":"curl -H 'Authorization: Bearer sk-abcdefghijklmnopqrstuvwxyz123456'"}"#,
            None,
        );
        assert!(
            !d.to_string()
                .contains("sk-abcdefghijklmnopqrstuvwxyz123456")
        );
        assert!(d.get("preview").is_none());
    }
}
