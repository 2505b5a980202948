//! Outcome classification of tool results (spec runtime.md §4.1), host-wide and in this order:
//! explicit field → error status → JSON failure envelopes → task-like objects → batches → plain
//! text succeeded. No natural-language guessing.

use mpa_protocol::Outcome;
use serde_json::{Map, Value};

/// Keys an `error` envelope may have without making the object a business object.
const ENVELOPE_KEYS: &[&str] = &[
    "error",
    "message",
    "detail",
    "code",
    "status",
    "state",
    "success",
    "tool_name",
    "action",
    "execution_outcome",
];

/// Classifies a tool result. `status_error` is true when the tool itself reported an error status.
pub fn classify(content: &str, status_error: bool) -> Outcome {
    let parsed: Option<Value> = {
        let t = content.trim_start();
        if t.starts_with('{') || t.starts_with('[') {
            serde_json::from_str(content).ok()
        } else {
            None
        }
    };
    if let Some(Value::Object(obj)) = &parsed
        && let Some(o) = explicit(obj)
    {
        return o;
    }
    if status_error {
        return Outcome::Failed;
    }
    match parsed {
        Some(Value::Object(obj)) => classify_object(&obj),
        _ => Outcome::Succeeded,
    }
}

fn explicit(obj: &Map<String, Value>) -> Option<Outcome> {
    ["moviepilot_execution_outcome", "execution_outcome"]
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str).and_then(Outcome::parse))
}

fn classify_object(obj: &Map<String, Value>) -> Outcome {
    if obj.get("isError") == Some(&Value::Bool(true))
        || obj.get("success") == Some(&Value::Bool(false))
        || obj.get("state") == Some(&Value::Bool(false))
    {
        return Outcome::Failed;
    }
    if obj.contains_key("error")
        && !obj.contains_key("success")
        && obj.keys().all(|k| ENVELOPE_KEYS.contains(&k.as_str()))
    {
        return Outcome::Failed;
    }
    if is_task_like(obj) {
        return classify_task(obj);
    }
    if let Some(action) = obj.get("action").and_then(Value::as_str)
        && matches!(
            action,
            "start" | "run" | "pipeline" | "status" | "wait" | "cancel"
        )
        && let Some(Value::Array(tasks)) = obj.get("tasks")
    {
        return aggregate(tasks.iter().map(|t| match t {
            Value::Object(o) => {
                if let Some(o) = explicit(o) {
                    o
                } else {
                    classify_object(o)
                }
            }
            _ => Outcome::Succeeded,
        }));
    }
    Outcome::Succeeded
}

fn is_task_like(obj: &Map<String, Value>) -> bool {
    ["task_id", "operation_id", "execution_id"]
        .iter()
        .any(|k| obj.contains_key(*k))
        || (obj.contains_key("session_id")
            && obj.contains_key("command")
            && obj.contains_key("exit_code"))
}

fn classify_task(obj: &Map<String, Value>) -> Outcome {
    let status = obj
        .get("status")
        .or_else(|| obj.get("state"))
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    if let Some(s) = status.as_deref() {
        match s {
            "pending" | "queued" | "running" | "accepted" | "in_progress" | "starting" => {
                return Outcome::Pending;
            }
            "failed" | "error" | "cancelled" | "canceled" | "killed" => return Outcome::Failed,
            "unknown" | "interrupted" => return Outcome::Unknown,
            _ => {}
        }
    }
    if let Some(code) = obj.get("exit_code").and_then(Value::as_i64)
        && code != 0
    {
        return Outcome::Failed;
    }
    Outcome::Succeeded
}

/// Batch aggregation priority: unknown > failed > pending > succeeded.
fn aggregate(outcomes: impl Iterator<Item = Outcome>) -> Outcome {
    fn rank(o: Outcome) -> u8 {
        match o {
            Outcome::Unknown => 3,
            Outcome::Failed => 2,
            Outcome::Pending => 1,
            Outcome::Succeeded => 0,
        }
    }
    outcomes
        .max_by_key(|o| rank(*o))
        .unwrap_or(Outcome::Succeeded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_order() {
        let cases: &[(&str, bool, Outcome)] = &[
            (
                r#"{"execution_outcome":"pending","success":false}"#,
                false,
                Outcome::Pending,
            ),
            (
                r#"{"moviepilot_execution_outcome":"unknown"}"#,
                true,
                Outcome::Unknown,
            ),
            ("plain text", true, Outcome::Failed),
            ("plain text", false, Outcome::Succeeded),
            (
                r#"{"success": false, "error": "x"}"#,
                false,
                Outcome::Failed,
            ),
            (r#"{"isError": true}"#, false, Outcome::Failed),
            (r#"{"state": false}"#, false, Outcome::Failed),
            (r#"{"error": "boom", "code": 3}"#, false, Outcome::Failed),
            // A business object that merely has an `error` field is not a failure.
            (
                r#"{"error": "none", "downloader": "qb", "speed": 3}"#,
                false,
                Outcome::Succeeded,
            ),
            (
                r#"{"task_id": "t1", "status": "queued"}"#,
                false,
                Outcome::Pending,
            ),
            (
                r#"{"task_id": "t1", "status": "killed"}"#,
                false,
                Outcome::Failed,
            ),
            (
                r#"{"operation_id": "o", "state": "interrupted"}"#,
                false,
                Outcome::Unknown,
            ),
            (
                r#"{"session_id": "s", "command": "ls", "exit_code": 2}"#,
                false,
                Outcome::Failed,
            ),
            (
                r#"{"session_id": "s", "command": "ls", "exit_code": 0}"#,
                false,
                Outcome::Succeeded,
            ),
            (
                r#"{"action":"status","tasks":[{"task_id":"a","status":"running"},{"task_id":"b","status":"failed"}]}"#,
                false,
                Outcome::Failed,
            ),
            (
                r#"{"action":"wait","tasks":[{"task_id":"a","status":"done"},{"task_id":"b","status":"interrupted"}]}"#,
                false,
                Outcome::Unknown,
            ),
            (r#"[1,2,3]"#, false, Outcome::Succeeded),
            (r#"{"broken json"#, false, Outcome::Succeeded),
        ];
        for (content, err, want) in cases {
            assert_eq!(classify(content, *err), *want, "{content}");
        }
    }
}
