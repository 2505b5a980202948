//! MoviePilot's answers as it writes them (issue 25 item 2). Reads often answer a bare list,
//! object or number; writes and some reads the `{success, message, data}` envelope; a 4xx is
//! FastAPI's `{"detail": …}` (422 with a list of field errors); a 500 may be plain text; a
//! non-superuser on a superuser route gets HTTP 400 `用户权限不足`; and a read whose parameters
//! were not understood can answer 200 with a record whose every field is null.

use crate::client::{ApiError, ApiResponse};
use serde::Serialize;
use serde_json::{Map, Value};

/// What MoviePilot says a non-superuser gets on a superuser route (HTTP 400).
pub const NOT_SUPERUSER_DETAIL: &str = "用户权限不足";

/// How much of a text answer is kept for the model.
const TEXT_CAP: usize = 500;

/// A 2xx answer, read.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The result JSON: the envelope as MoviePilot sent it, or a bare value as
    /// `{"success": true, "data": …}`; `collection` first when the headers gave one.
    Data(Value),
    /// `{"success": false, …}`: MoviePilot's own logic refused the call.
    Rejected(Value),
    /// A read answered with a record whose every field is null: nothing matched, or the
    /// parameters were not understood — not data.
    EmptyRecord,
}

/// One FastAPI validation error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// Where: `query.season`, `body.torrent_in.enclosure`, `path.site_id`.
    pub field: String,
    pub message: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// An HTTP ≥ 400 answer, read.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// `400 用户权限不足`, 401 or 403: not allowed for this account, or its token was not
    /// accepted. `detail` is MoviePilot's own word.
    PermissionDenied { detail: Option<String> },
    /// 422 with FastAPI's field errors.
    FieldErrors(Vec<FieldError>),
    /// `{"detail": "…"}` or an envelope's `message`.
    Message(String),
    /// A plain-text body (a 500's error line), capped.
    Text(String),
    /// Anything else, as MoviePilot sent it.
    Other(Value),
}

fn capped(s: &str) -> String {
    let mut out: String = s.trim().chars().take(TEXT_CAP).collect();
    if s.trim().chars().count() > TEXT_CAP {
        out.push('…');
    }
    out
}

/// The data of an answer: the envelope's `data`, or the bare value.
fn data_of(payload: &Value) -> &Value {
    match payload {
        Value::Object(m) if m.get("success").is_some_and(Value::is_boolean) => {
            m.get("data").unwrap_or(&Value::Null)
        }
        other => other,
    }
}

/// A non-empty object whose every field is null.
fn all_null(v: &Value) -> bool {
    matches!(v, Value::Object(m) if !m.is_empty() && m.values().all(Value::is_null))
}

impl ApiResponse {
    /// This answer read for an operation; `read` says whether it is a read (only a read's
    /// all-null record is an empty record).
    pub fn answer(&self, read: bool) -> Answer {
        if read && all_null(data_of(&self.payload)) {
            return Answer::EmptyRecord;
        }
        let envelope = matches!(&self.payload, Value::Object(m) if m.get("success").is_some_and(Value::is_boolean));
        if envelope {
            let result = self.result_json();
            if self.payload.get("success") == Some(&Value::Bool(false)) {
                return Answer::Rejected(result);
            }
            return Answer::Data(result);
        }
        let mut out = Map::new();
        if let Some(c) = self.collection {
            out.insert(
                "collection".into(),
                serde_json::to_value(c).unwrap_or(Value::Null),
            );
        }
        out.insert("success".into(), Value::Bool(true));
        out.insert("data".into(), self.payload.clone());
        Answer::Data(Value::Object(out))
    }
}

fn field_errors(list: &[Value]) -> Option<Vec<FieldError>> {
    list.iter()
        .map(|e| {
            let loc = e.get("loc")?.as_array()?;
            let field = loc
                .iter()
                .map(|p| match p {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(".");
            Some(FieldError {
                field,
                message: capped(e.get("msg").and_then(Value::as_str).unwrap_or("invalid")),
                kind: e.get("type").and_then(Value::as_str).map(str::to_owned),
            })
        })
        .collect()
}

impl ApiError {
    /// The answer read: a permission refusal, field errors, a message, text, or the body.
    pub fn refusal(&self) -> Refusal {
        let detail = self.data.get("detail");
        let text = detail
            .and_then(Value::as_str)
            .or_else(|| self.data.get("message").and_then(Value::as_str))
            .or_else(|| self.data.as_str());
        let denied = match self.status {
            401 | 403 => true,
            400 => text.is_some_and(|t| t.trim() == NOT_SUPERUSER_DETAIL),
            _ => false,
        };
        if denied {
            return Refusal::PermissionDenied {
                detail: text.map(capped),
            };
        }
        if let Some(list) = detail.and_then(Value::as_array)
            && let Some(errors) = field_errors(list)
            && !errors.is_empty()
        {
            return Refusal::FieldErrors(errors);
        }
        match (&self.data, text) {
            (Value::String(s), _) => Refusal::Text(capped(s)),
            (_, Some(t)) => Refusal::Message(capped(t)),
            (other, None) => Refusal::Other(other.clone()),
        }
    }
}
