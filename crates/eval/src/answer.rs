//! The model's final answer: plain JSON, or exactly one fenced JSON block; anything else is no
//! answer (`invalid_final_report`). Then the contract's field types and labels are checked.

use crate::scenario::Contract;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// The ID arrays every contract carries.
pub const ID_FIELDS: [&str; 3] = ["subscription_ids", "download_ids", "enabled_site_ids"];

/// The JSON object of a final answer, if the text is one: the whole text, or the content of its
/// only fenced block (```` ```json ```` or a bare fence).
pub fn extract(text: &str) -> Option<Map<String, Value>> {
    let trimmed = text.trim();
    if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(trimmed) {
        return Some(m);
    }
    let mut blocks = Vec::new();
    let mut rest = trimmed;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let body_start = after.find('\n')?;
        let lang = after[..body_start].trim();
        if !(lang.is_empty() || lang.eq_ignore_ascii_case("json")) {
            return None;
        }
        let body = &after[body_start + 1..];
        let end = body.find("```")?;
        blocks.push(&body[..end]);
        rest = &body[end + 3..];
    }
    match blocks.as_slice() {
        [one] => match serde_json::from_str::<Value>(one.trim()) {
            Ok(Value::Object(m)) => Some(m),
            _ => None,
        },
        _ => None,
    }
}

/// A checked answer: ids as strings, labels as sets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    pub raw: Map<String, Value>,
    pub status: String,
    pub ids: std::collections::BTreeMap<String, BTreeSet<String>>,
    pub completed: BTreeSet<String>,
    pub unresolved: BTreeSet<String>,
}

impl Answer {
    pub fn ids(&self, field: &str) -> BTreeSet<String> {
        self.ids.get(field).cloned().unwrap_or_default()
    }
}

/// An id as the oracle compares it: a string, or an integer written as one.
pub fn id_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

fn string_set(
    obj: &Map<String, Value>,
    field: &str,
    labels: Option<&[&str]>,
) -> Result<BTreeSet<String>, String> {
    let Some(v) = obj.get(field) else {
        return Ok(BTreeSet::new());
    };
    let Value::Array(items) = v else {
        return Err(format!("{field} must be an array"));
    };
    let mut out = BTreeSet::new();
    for item in items {
        let s = id_string(item).ok_or_else(|| format!("{field} holds {item}, not an id"))?;
        if let Some(labels) = labels
            && !labels.contains(&s.as_str())
        {
            return Err(format!("{field} holds the unknown sub-goal {s:?}"));
        }
        if !out.insert(s.clone()) {
            return Err(format!("{field} repeats {s:?}"));
        }
    }
    Ok(out)
}

/// Checks the answer against the contract's field types; `Err` says what is wrong.
pub fn check(contract: Contract, obj: Map<String, Value>) -> Result<Answer, String> {
    if contract == Contract::Code {
        let status = obj
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        return Ok(Answer {
            raw: obj,
            status,
            ..Answer::default()
        });
    }
    let status = match obj.get("status") {
        Some(Value::String(s)) if s == "completed" || s == "blocked" => s.clone(),
        other => {
            return Err(format!(
                "status must be \"completed\" or \"blocked\", not {}",
                other.map_or("nothing".to_string(), Value::to_string)
            ));
        }
    };
    let mut ids = std::collections::BTreeMap::new();
    for field in ID_FIELDS {
        let mut set = string_set(&obj, field, None)?;
        if field == "download_ids" {
            // A download is its infohash, whatever form the answer wrote it in.
            set = set
                .into_iter()
                .map(|id| crate::magnet::normalise(&id).unwrap_or(id))
                .collect();
        }
        ids.insert(field.to_string(), set);
    }
    let labels = contract.labels();
    let completed = string_set(&obj, "completed", Some(labels))?;
    let unresolved = string_set(&obj, "unresolved", Some(labels))?;
    if let Some(both) = completed.intersection(&unresolved).next() {
        return Err(format!("{both:?} is both completed and unresolved"));
    }
    type FieldCheck = (&'static str, fn(&Value) -> bool);
    let typed: &[FieldCheck] = match contract {
        Contract::Command => &[
            ("command_output", Value::is_string),
            ("command_exit_code", |v| v.is_i64() || v.is_null()),
        ],
        Contract::Terminal => &[
            ("terminal_output", Value::is_string),
            ("terminal_exit_code", |v| v.is_i64() || v.is_null()),
        ],
        Contract::Browser => &[("browser_text", Value::is_string)],
        Contract::Business | Contract::Code => &[],
    };
    for (field, ok) in typed {
        if let Some(v) = obj.get(*field)
            && !ok(v)
        {
            return Err(format!("{field} has the wrong type ({v})"));
        }
    }
    Ok(Answer {
        raw: obj,
        status,
        ids,
        completed,
        unresolved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_json_or_one_fenced_block() {
        assert!(extract(r#"{"status":"completed"}"#).is_some());
        assert!(extract("Done:\n```json\n{\"status\":\"blocked\"}\n```\n").is_some());
        assert!(extract("```\n{\"a\":1}\n```").is_some());
        assert!(extract("```json\n{}\n```\n```json\n{}\n```").is_none());
        assert!(extract("status: completed").is_none());
        assert!(extract("[1,2]").is_none());
        assert!(extract("```python\n{}\n```").is_none());
    }

    #[test]
    fn types_and_labels_are_checked() {
        let ok = check(
            Contract::Business,
            json!({"status": "completed", "download_ids": ["ab"], "subscription_ids": [72],
                   "completed": ["download"], "unresolved": []})
            .as_object()
            .cloned()
            .unwrap(),
        )
        .unwrap();
        assert_eq!(ok.ids("subscription_ids").into_iter().next().unwrap(), "72");
        let b32 = check(
            Contract::Business,
            json!({"status": "completed",
                   "download_ids": ["UGQ2DINBUGQ2DINBUGQ2DINBUGQ2DINB"]})
            .as_object()
            .cloned()
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            b32.ids("download_ids").into_iter().next(),
            Some("a1".repeat(20))
        );
        for bad in [
            json!({"status": "done"}),
            json!({"status": "completed", "download_ids": "ab"}),
            json!({"status": "completed", "download_ids": [true]}),
            json!({"status": "completed", "download_ids": [""]}),
            json!({"status": "completed", "download_ids": ["a", "a"]}),
            json!({"status": "completed", "completed": ["everything"]}),
        ] {
            assert!(
                check(Contract::Business, bad.as_object().cloned().unwrap()).is_err(),
                "{bad}"
            );
        }
        let bad_type = json!({"status": "completed", "command_exit_code": "0"});
        assert!(check(Contract::Command, bad_type.as_object().cloned().unwrap()).is_err());
    }
}
