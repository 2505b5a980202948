//! Validation of one call against its operation's contract, and the request it becomes.
//!
//! [`Operation::prepare`] is the only way to a [`PreparedRequest`]: undeclared keys, missing
//! parameters, wrong types, values outside an enum or range and bodies of the wrong shape are
//! refused with an [`InputError`] that names the problem in a sentence a model can act on.
//! Nothing is sent for a refused call.

use crate::catalogue::{ALLOWED_ACTIONS, ALLOWED_SOURCES, HttpMethod, Operation};
use crate::contract::{BodyKind, Field, FieldKind};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::fmt::Write as _;

/// Query names and values: RFC 3986 unreserved characters stay; everything else (`&`, `=`,
/// space, `%`, non-ASCII) is percent-encoded, so a value can never start a new query parameter.
/// (Path values are segments appended by the URL library; see `route`.)
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The legacy-pagination values used once either `page` or `count` is given.
pub const DEFAULT_PAGE: i64 = 1;
pub const DEFAULT_COUNT: i64 = 50;

/// Where in the call a value was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    PathParam,
    Query,
    Body,
}

impl Location {
    fn noun(self) -> &'static str {
        match self {
            Location::PathParam => "path parameter",
            Location::Query => "query field",
            Location::Body => "body field",
        }
    }
}

/// Why a call does not fit its operation's contract. The `Display` text is the sentence the
/// model reads; it never repeats more than a short preview of a supplied value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputError {
    /// `path_params` or `query` is not an object.
    NotAnObject {
        operation_id: &'static str,
        argument: &'static str,
        got: &'static str,
    },
    /// Keys in `path_params` or `query` that the operation does not declare.
    UnknownFields {
        operation_id: &'static str,
        location: Location,
        names: Vec<String>,
        allowed: Vec<&'static str>,
    },
    MissingPathParam {
        operation_id: &'static str,
        name: &'static str,
        path: &'static str,
    },
    MissingQueryField {
        operation_id: &'static str,
        name: &'static str,
    },
    /// A path parameter value that cannot be exactly one route segment (empty, `.`, `..`, a
    /// `/` or `\\`, control characters): it could name another route.
    InvalidPathParameter {
        operation_id: &'static str,
        name: &'static str,
        reason: &'static str,
    },
    /// A value of the wrong JSON type.
    WrongType {
        operation_id: &'static str,
        location: Location,
        name: &'static str,
        expected: String,
        got: &'static str,
    },
    /// A string outside its enum, allow-list or constant.
    NotAllowed {
        operation_id: &'static str,
        location: Location,
        name: &'static str,
        allowed: Vec<&'static str>,
        got: String,
    },
    OutOfRange {
        operation_id: &'static str,
        location: Location,
        name: &'static str,
        minimum: Option<i64>,
        maximum: Option<i64>,
        got: String,
    },
    /// A GET body key also given in `query`, with another value.
    Conflict {
        operation_id: &'static str,
        name: String,
    },
    /// A GET body that is not an object (GET bodies are merged into the query).
    GetBodyNotObject {
        operation_id: &'static str,
        got: &'static str,
    },
    BodyNotAllowed {
        operation_id: &'static str,
    },
    BodyRequired {
        operation_id: &'static str,
        expected: String,
    },
    BodyWrongShape {
        operation_id: &'static str,
        expected: String,
        got: &'static str,
    },
    BodyMissingFields {
        operation_id: &'static str,
        names: Vec<&'static str>,
    },
    BodyTooFewFields {
        operation_id: &'static str,
        minimum: usize,
    },
}

impl InputError {
    pub fn operation_id(&self) -> &'static str {
        match self {
            InputError::NotAnObject { operation_id, .. }
            | InputError::UnknownFields { operation_id, .. }
            | InputError::MissingPathParam { operation_id, .. }
            | InputError::MissingQueryField { operation_id, .. }
            | InputError::InvalidPathParameter { operation_id, .. }
            | InputError::WrongType { operation_id, .. }
            | InputError::NotAllowed { operation_id, .. }
            | InputError::OutOfRange { operation_id, .. }
            | InputError::Conflict { operation_id, .. }
            | InputError::GetBodyNotObject { operation_id, .. }
            | InputError::BodyNotAllowed { operation_id }
            | InputError::BodyRequired { operation_id, .. }
            | InputError::BodyWrongShape { operation_id, .. }
            | InputError::BodyMissingFields { operation_id, .. }
            | InputError::BodyTooFewFields { operation_id, .. } => operation_id,
        }
    }

    /// The error code a model reads: `invalid_path_parameter` for a value that could change
    /// the route, `invalid_input` for everything else.
    pub fn code(&self) -> &'static str {
        match self {
            InputError::InvalidPathParameter { .. } => "invalid_path_parameter",
            _ => "invalid_input",
        }
    }
}

fn backticked<S: AsRef<str>>(names: &[S]) -> String {
    names
        .iter()
        .map(|n| format!("`{}`", n.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 { one.into() } else { many.into() }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::NotAnObject {
                operation_id,
                argument,
                got,
            } => write!(
                f,
                "{operation_id}: `{argument}` must be a JSON object of named values, got {got}"
            ),
            InputError::UnknownFields {
                operation_id,
                location,
                names,
                allowed,
            } => {
                let noun = location.noun();
                write!(
                    f,
                    "{operation_id}: unknown {noun}{} {}; ",
                    if names.len() == 1 { "" } else { "s" },
                    backticked(names)
                )?;
                if allowed.is_empty() {
                    write!(f, "this operation takes no {noun}s")
                } else {
                    write!(f, "allowed {noun}s: {}", backticked(allowed))
                }
            }
            InputError::MissingPathParam {
                operation_id,
                name,
                path,
            } => write!(
                f,
                "{operation_id}: missing path parameter `{name}` (route {path}); give it in path_params"
            ),
            InputError::MissingQueryField { operation_id, name } => {
                write!(f, "{operation_id}: missing required query field `{name}`")
            }
            InputError::InvalidPathParameter {
                operation_id,
                name,
                reason,
            } => write!(
                f,
                "{operation_id}: path parameter `{name}` {reason}; a path parameter is exactly one \
                 route segment (not empty, not `.` or `..`, no `/`, `\\` or control characters)"
            ),
            InputError::WrongType {
                operation_id,
                location,
                name,
                expected,
                got,
            } => write!(
                f,
                "{operation_id}: {} `{name}` must be {expected}, got {got}",
                location.noun()
            ),
            InputError::NotAllowed {
                operation_id,
                location,
                name,
                allowed,
                got,
            } => {
                if let [only] = allowed.as_slice() {
                    write!(
                        f,
                        "{operation_id}: {} `{name}` must be \"{only}\", got \"{got}\"",
                        location.noun()
                    )
                } else {
                    write!(
                        f,
                        "{operation_id}: {} `{name}` must be one of {}; got \"{got}\"",
                        location.noun(),
                        allowed.join(", ")
                    )
                }
            }
            InputError::OutOfRange {
                operation_id,
                location,
                name,
                minimum,
                maximum,
                got,
            } => {
                let range = match (minimum, maximum) {
                    (Some(lo), Some(hi)) => format!("between {lo} and {hi}"),
                    (Some(lo), None) => format!("at least {lo}"),
                    (None, Some(hi)) => format!("at most {hi}"),
                    (None, None) => "in range".into(),
                };
                write!(
                    f,
                    "{operation_id}: {} `{name}` must be {range}, got {got}",
                    location.noun()
                )
            }
            InputError::Conflict { operation_id, name } => write!(
                f,
                "{operation_id}: `{name}` is given in both query and body with different values; \
                 give it once, in query"
            ),
            InputError::GetBodyNotObject { operation_id, got } => write!(
                f,
                "{operation_id} is a GET operation: its body, if given, must be a JSON object \
                 whose keys are used as query fields, got {got}"
            ),
            InputError::BodyNotAllowed { operation_id } => {
                write!(f, "{operation_id} takes no body; leave body out or null")
            }
            InputError::BodyRequired {
                operation_id,
                expected,
            } => write!(f, "{operation_id} requires a body: {expected}"),
            InputError::BodyWrongShape {
                operation_id,
                expected,
                got,
            } => write!(f, "{operation_id}: body must be {expected}, got {got}"),
            InputError::BodyMissingFields {
                operation_id,
                names,
            } => write!(
                f,
                "{operation_id}: body is missing required {} {}",
                plural(names.len(), "field", "fields"),
                backticked(names)
            ),
            InputError::BodyTooFewFields {
                operation_id,
                minimum,
            } => write!(
                f,
                "{operation_id}: body must have at least {minimum} {}",
                plural(*minimum, "field", "fields")
            ),
        }
    }
}

impl std::error::Error for InputError {}

/// "a string", "an array": how a message names what was supplied.
pub(crate) fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A short, single-line preview of a supplied scalar for enum/range messages.
fn preview(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out: String = s.chars().filter(|c| !c.is_control()).take(60).collect();
    if s.chars().count() > 60 {
        out.push('…');
    }
    out
}

/// A validated call, ready to send: the route template and the values of its placeholders,
/// the wire query, the body, and the normalised arguments (defaults applied) that identify it in
/// the ledger. The URL is built by [`GatewayClient`](crate::GatewayClient) from its parsed base,
/// segment by segment, and checked against `route` before anything is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedRequest {
    operation_id: &'static str,
    method: HttpMethod,
    long_running: bool,
    /// The template the request must match: the catalogue's, or the live route it was adapted
    /// to on the user's server.
    route: Cow<'static, str>,
    /// Placeholder values in route order, unencoded; each is one segment.
    path_values: Vec<String>,
    query: Vec<(Cow<'static, str>, String)>,
    body: Option<Value>,
    canonical_path_params: BTreeMap<&'static str, Value>,
    canonical_query: BTreeMap<&'static str, Value>,
}

impl PreparedRequest {
    pub fn operation_id(&self) -> &'static str {
        self.operation_id
    }

    pub fn method(&self) -> HttpMethod {
        self.method
    }

    /// Whether the call gets the long (torrent search) timeout.
    pub fn is_long_running(&self) -> bool {
        self.long_running
    }

    /// The route template the request is built from and checked against.
    pub fn route(&self) -> &str {
        &self.route
    }

    /// The placeholder values, unencoded, in route order.
    pub fn path_values(&self) -> &[String] {
        &self.path_values
    }

    /// The route with placeholders filled and percent-encoded, exactly as it follows the base
    /// URL's path on the wire.
    pub fn path(&self) -> String {
        static ROOT: std::sync::LazyLock<Option<reqwest::Url>> =
            std::sync::LazyLock::new(|| reqwest::Url::parse("http://moviepilot.invalid/").ok());
        ROOT.as_ref()
            .and_then(|root| crate::route::build_url(root, &self.route, &self.path_values, None))
            .map(|u| u.path().to_owned())
            .unwrap_or_default()
    }

    /// The query pairs as sent (unencoded), in catalogue order; an array value is one pair per
    /// element. Defaults are not sent — MoviePilot applies its own — except the other half of
    /// legacy pagination once either `page` or `count` is given.
    pub fn query_pairs(&self) -> &[(Cow<'static, str>, String)] {
        &self.query
    }

    /// The query as it goes on the wire (`a=1&b=x%20y`), empty when there is none.
    pub fn encoded_query(&self) -> String {
        let mut s = String::new();
        for (i, (k, v)) in self.query.iter().enumerate() {
            if i > 0 {
                s.push('&');
            }
            s.extend(utf8_percent_encode(k, COMPONENT));
            s.push('=');
            s.extend(utf8_percent_encode(v, COMPONENT));
        }
        s
    }

    /// The JSON body, for operations other than GET.
    pub fn body(&self) -> Option<&Value> {
        self.body.as_ref()
    }

    /// `path?query`, encoded, as it appears in the HTTP request line.
    pub fn path_and_query(&self) -> String {
        let mut s = self.path();
        let q = self.encoded_query();
        if !q.is_empty() {
            s.push('?');
            s.push_str(&q);
        }
        s
    }

    /// The same call for another route: the live route's template, placeholder values and
    /// query (reconciliation). The canonical arguments stay the contract's, so the ledger
    /// identifies the call the same way on every server.
    pub(crate) fn for_live_route(
        &self,
        route: Cow<'static, str>,
        path_values: Vec<String>,
        query: Vec<(Cow<'static, str>, String)>,
    ) -> PreparedRequest {
        PreparedRequest {
            route,
            path_values,
            query,
            ..self.clone()
        }
    }

    /// The normalised call as a JSON value: `{operation_id, path_params, query, body}` with
    /// query defaults applied, so calls that mean the same thing compare equal.
    pub fn canonical_value(&self) -> Value {
        let map = |m: &BTreeMap<&'static str, Value>| {
            Value::Object(
                m.iter()
                    .map(|(k, v)| ((*k).to_owned(), v.clone()))
                    .collect(),
            )
        };
        let mut obj = Map::new();
        obj.insert("body".into(), self.body.clone().unwrap_or(Value::Null));
        obj.insert("operation_id".into(), self.operation_id.into());
        obj.insert("path_params".into(), map(&self.canonical_path_params));
        obj.insert("query".into(), map(&self.canonical_query));
        Value::Object(obj)
    }

    /// Canonical JSON of [`canonical_value`](Self::canonical_value) (runtime.md §6.3): keys
    /// sorted, compact separators, non-ASCII kept.
    pub fn canonical_arguments(&self) -> String {
        canonical_json(&self.canonical_value())
    }

    /// SHA-256 (hex) of [`canonical_arguments`](Self::canonical_arguments).
    pub fn arguments_digest(&self) -> String {
        hex::encode(Sha256::digest(self.canonical_arguments().as_bytes()))
    }
}

/// Canonical JSON: object keys sorted by code point at every level, no whitespace, non-ASCII
/// written as itself. (JSON values cannot hold NaN, so none is ever written.)
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                if let Some(v) = m.get(k) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::String(s) => write_string(s, out),
        scalar => {
            let _ = write!(out, "{scalar}");
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    // serde_json escapes exactly `"`, `\` and control characters and keeps the rest.
    let _ = write!(out, "{}", Value::String(s.to_owned()));
}

fn as_object<'v>(
    op: &Operation,
    argument: &'static str,
    v: &'v Value,
) -> Result<Option<&'v Map<String, Value>>, InputError> {
    match v {
        Value::Null => Ok(None),
        Value::Object(m) => Ok(Some(m)),
        other => Err(InputError::NotAnObject {
            operation_id: op.id,
            argument,
            got: describe(other),
        }),
    }
}

/// Checks one value against its field and returns it normalised (digit strings to integers,
/// `"true"` to `true`, integers to strings for string fields, a scalar to a one-element array).
fn normalise(
    op: &Operation,
    location: Location,
    field: &Field,
    kind: &FieldKind,
    v: &Value,
) -> Result<Value, InputError> {
    let wrong = || InputError::WrongType {
        operation_id: op.id,
        location,
        name: field.name,
        expected: kind.expectation(),
        got: describe(v),
    };
    let value = match kind {
        FieldKind::String | FieldKind::Named(_) => match v {
            Value::String(_) => v.clone(),
            Value::Number(n) if n.is_i64() || n.is_u64() => Value::String(n.to_string()),
            _ => return Err(wrong()),
        },
        FieldKind::Integer => {
            let i = match v {
                Value::Number(n) => n.as_i64().or_else(|| {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0 && f.abs() < 9e15)
                        .map(|f| f as i64)
                }),
                Value::String(s) => s.trim().parse::<i64>().ok(),
                _ => None,
            };
            Value::from(i.ok_or_else(wrong)?)
        }
        FieldKind::Number => match v {
            Value::Number(_) => v.clone(),
            Value::String(s) => s
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(wrong)?,
            _ => return Err(wrong()),
        },
        FieldKind::Boolean => match v {
            Value::Bool(_) => v.clone(),
            Value::String(s) if s.eq_ignore_ascii_case("true") => Value::Bool(true),
            Value::String(s) if s.eq_ignore_ascii_case("false") => Value::Bool(false),
            _ => return Err(wrong()),
        },
        FieldKind::Enum(values) => match v {
            Value::String(s) if values.contains(&s.as_str()) => v.clone(),
            Value::String(_) => {
                return Err(InputError::NotAllowed {
                    operation_id: op.id,
                    location,
                    name: field.name,
                    allowed: values.clone(),
                    got: preview(v),
                });
            }
            _ => return Err(wrong()),
        },
        FieldKind::Const(c) => match v {
            Value::String(s) if s == c => v.clone(),
            Value::String(_) => {
                return Err(InputError::NotAllowed {
                    operation_id: op.id,
                    location,
                    name: field.name,
                    allowed: vec![c],
                    got: preview(v),
                });
            }
            _ => return Err(wrong()),
        },
        FieldKind::Array(inner) => {
            let items: Vec<&Value> = match v {
                Value::Array(items) => items.iter().collect(),
                Value::Object(_) => return Err(wrong()),
                scalar => vec![scalar],
            };
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(normalise(op, location, field, inner, item)?);
            }
            return Ok(Value::Array(out));
        }
    };
    if let Some(n) = value.as_f64() {
        let below = field.minimum.is_some_and(|m| n < m as f64);
        let above = field.maximum.is_some_and(|m| n > m as f64);
        if below || above {
            return Err(InputError::OutOfRange {
                operation_id: op.id,
                location,
                name: field.name,
                minimum: field.minimum,
                maximum: field.maximum,
                got: preview(&value),
            });
        }
    }
    Ok(value)
}

/// The text a value has on the wire (query string or route segment).
fn wire_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn unknown_keys(map: &Map<String, Value>, fields: &[Field]) -> Vec<String> {
    let mut names: Vec<String> = map
        .keys()
        .filter(|k| !fields.iter().any(|f| f.name == k.as_str()))
        .cloned()
        .collect();
    names.sort_unstable();
    names
}

impl Operation {
    /// Validates a call and builds its request. `Value::Null` stands for an argument left out.
    ///
    /// Rules (runtime.md §11.1–§11.2): only declared path parameters and query fields; required
    /// ones present (a missing constant query field, such as `state` of `plugin.installed`, is
    /// filled in, since it has only one valid value); `{source}` ∈ tmdb/douban/bangumi/anilist
    /// and `{action}` ∈ start/stop; types, enums and ranges as declared; legacy pagination:
    /// either of `page`/`count` brings the other (page 1, count 50); a GET body object is merged
    /// into the query; other bodies must be the declared kind, present when required and absent
    /// when none is declared.
    pub fn prepare(
        &self,
        path_params: &Value,
        query: &Value,
        body: &Value,
    ) -> Result<PreparedRequest, InputError> {
        let path_map = as_object(self, "path_params", path_params)?;
        let query_map = as_object(self, "query", query)?;

        // GET bodies are query fields in disguise (MoviePilot's executor merges them too).
        let mut merged_query: Option<Map<String, Value>> = None;
        let mut body = body;
        if self.method == HttpMethod::Get && !body.is_null() {
            let Value::Object(extra) = body else {
                return Err(InputError::GetBodyNotObject {
                    operation_id: self.id,
                    got: describe(body),
                });
            };
            let mut m = query_map.cloned().unwrap_or_default();
            for (k, v) in extra {
                match m.get(k) {
                    Some(existing) if existing != v => {
                        return Err(InputError::Conflict {
                            operation_id: self.id,
                            name: k.clone(),
                        });
                    }
                    _ => {
                        m.insert(k.clone(), v.clone());
                    }
                }
            }
            merged_query = Some(m);
            body = &Value::Null;
        }
        let query_map = merged_query.as_ref().or(query_map);

        let canonical_path_params = self.check_path(path_map)?;
        let (query_pairs, canonical_query) = self.check_query(query_map)?;
        let body = self.check_body(body)?;

        let path_values = crate::route::template_segments(self.path)
            .filter_map(|seg| match seg {
                crate::route::TemplateSegment::Param(name) => {
                    canonical_path_params.get(name).map(wire_text)
                }
                crate::route::TemplateSegment::Literal(_) => None,
            })
            .collect();

        Ok(PreparedRequest {
            operation_id: self.id,
            method: self.method,
            long_running: self.is_long_running(),
            route: Cow::Borrowed(self.path),
            path_values,
            query: query_pairs
                .into_iter()
                .map(|(k, v)| (Cow::Borrowed(k), v))
                .collect(),
            body,
            canonical_path_params,
            canonical_query,
        })
    }

    fn check_path(
        &self,
        map: Option<&Map<String, Value>>,
    ) -> Result<BTreeMap<&'static str, Value>, InputError> {
        let empty = Map::new();
        let map = map.unwrap_or(&empty);
        let unknown = unknown_keys(map, &self.path_params);
        if !unknown.is_empty() {
            return Err(InputError::UnknownFields {
                operation_id: self.id,
                location: Location::PathParam,
                names: unknown,
                allowed: self.path_params.iter().map(|f| f.name).collect(),
            });
        }
        let mut out = BTreeMap::new();
        for field in &self.path_params {
            let v = match map.get(field.name) {
                None | Some(Value::Null) => None,
                Some(v) => Some(v),
            };
            let Some(v) = v else {
                return Err(InputError::MissingPathParam {
                    operation_id: self.id,
                    name: field.name,
                    path: self.path,
                });
            };
            let mut value = normalise(self, Location::PathParam, field, &field.kind, v)?;
            let allow_list: Option<&[&'static str]> = match field.name {
                "source" => Some(&ALLOWED_SOURCES),
                "action" => Some(&ALLOWED_ACTIONS),
                _ => None,
            };
            if let Some(allowed) = allow_list {
                let lower = wire_text(&value).to_lowercase();
                if !allowed.contains(&lower.as_str()) {
                    return Err(InputError::NotAllowed {
                        operation_id: self.id,
                        location: Location::PathParam,
                        name: field.name,
                        allowed: allowed.to_vec(),
                        got: preview(&value),
                    });
                }
                value = Value::String(lower);
            }
            if let Some(reason) = crate::route::segment_refusal(&wire_text(&value)) {
                return Err(InputError::InvalidPathParameter {
                    operation_id: self.id,
                    name: field.name,
                    reason,
                });
            }
            out.insert(field.name, value);
        }
        Ok(out)
    }

    #[expect(
        clippy::type_complexity,
        reason = "private helper returning wire and canonical forms"
    )]
    fn check_query(
        &self,
        map: Option<&Map<String, Value>>,
    ) -> Result<(Vec<(&'static str, String)>, BTreeMap<&'static str, Value>), InputError> {
        let empty = Map::new();
        let map = map.unwrap_or(&empty);
        let unknown = unknown_keys(map, &self.query);
        if !unknown.is_empty() {
            return Err(InputError::UnknownFields {
                operation_id: self.id,
                location: Location::Query,
                names: unknown,
                allowed: self.query.iter().map(|f| f.name).collect(),
            });
        }
        let mut supplied: BTreeMap<&'static str, Value> = BTreeMap::new();
        for field in &self.query {
            match map.get(field.name) {
                None | Some(Value::Null) => {
                    if let FieldKind::Const(c) = field.kind {
                        supplied.insert(field.name, Value::from(c));
                    } else if field.required {
                        return Err(InputError::MissingQueryField {
                            operation_id: self.id,
                            name: field.name,
                        });
                    }
                }
                Some(v) => {
                    let value = normalise(self, Location::Query, field, &field.kind, v)?;
                    supplied.insert(field.name, value);
                }
            }
        }
        if self.legacy_pagination
            && (supplied.contains_key("page") || supplied.contains_key("count"))
        {
            supplied.entry("page").or_insert(Value::from(DEFAULT_PAGE));
            supplied
                .entry("count")
                .or_insert(Value::from(DEFAULT_COUNT));
        }
        let mut pairs = Vec::with_capacity(supplied.len());
        for field in &self.query {
            match supplied.get(field.name) {
                Some(Value::Array(items)) => {
                    pairs.extend(items.iter().map(|i| (field.name, wire_text(i))));
                }
                Some(v) => pairs.push((field.name, wire_text(v))),
                None => {}
            }
        }
        let mut canonical = supplied;
        for field in &self.query {
            if let Some(d) = &field.default {
                canonical.entry(field.name).or_insert_with(|| d.clone());
            }
        }
        Ok((pairs, canonical))
    }

    fn check_body(&self, body: &Value) -> Result<Option<Value>, InputError> {
        let spec = &self.body;
        if body.is_null() {
            if spec.required {
                return Err(InputError::BodyRequired {
                    operation_id: self.id,
                    expected: spec.expectation(),
                });
            }
            return Ok(None);
        }
        let wrong_shape = || InputError::BodyWrongShape {
            operation_id: self.id,
            expected: spec.expectation(),
            got: describe(body),
        };
        match &spec.kind {
            BodyKind::None => Err(InputError::BodyNotAllowed {
                operation_id: self.id,
            }),
            BodyKind::Object {
                fields,
                min_properties,
                ..
            } => {
                let Value::Object(m) = body else {
                    return Err(wrong_shape());
                };
                let missing: Vec<&'static str> = fields
                    .iter()
                    .filter(|f| f.required && m.get(f.name).is_none_or(Value::is_null))
                    .map(|f| f.name)
                    .collect();
                if !missing.is_empty() {
                    return Err(InputError::BodyMissingFields {
                        operation_id: self.id,
                        names: missing,
                    });
                }
                if m.len() < *min_properties {
                    return Err(InputError::BodyTooFewFields {
                        operation_id: self.id,
                        minimum: *min_properties,
                    });
                }
                // The fields the catalogue spells out are normalised like query values; the
                // rest of the model passes through for MoviePilot to validate.
                let mut out = m.clone();
                for f in fields {
                    if let Some(v) = m.get(f.name).filter(|v| !v.is_null()) {
                        out.insert(
                            f.name.to_owned(),
                            normalise(self, Location::Body, f, &f.kind, v)?,
                        );
                    }
                }
                Ok(Some(Value::Object(out)))
            }
            BodyKind::Array { .. } => match body {
                Value::Array(_) => Ok(Some(body.clone())),
                _ => Err(wrong_shape()),
            },
            BodyKind::ArrayOrObject { .. } => match body {
                Value::Array(_) | Value::Object(_) => Ok(Some(body.clone())),
                _ => Err(wrong_shape()),
            },
            BodyKind::Literal(s) => match body {
                Value::String(b) if b == s => Ok(Some(body.clone())),
                _ => Err(wrong_shape()),
            },
        }
    }
}
