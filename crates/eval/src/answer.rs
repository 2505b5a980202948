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
