//! The arguments of `session_search` (spec §10.2). No `mode` parameter: the mode follows from
//! which arguments are present ([`SessionSearchArgs::request`]). Unknown keys are refused, so no
//! argument can name another user, a path or a database. Every field has its own deserializer so
//! a wrong value is answered with a message the model can act on ("window must be between 1 and
//! 20"), and the lenient forms models send (`"5"`, `5.0`, `""`, padded words) keep working.

use mpa_history::MAX_SESSION_ID_CHARS as MAX_ID;
use mpa_history::recall::{
    DEFAULT_LIMIT, DEFAULT_WINDOW, Detail, DiscoverRequest, MAX_EXCLUDES, MAX_LIMIT, MAX_WINDOW,
    SearchRole, Sort,
};
use mpa_history::{MAX_QUERY_CHARS, SearchRequest};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::{Deserializer, Error as _};
use serde_json::Value;

pub(crate) const MAX_ROLE_FILTER_CHARS: usize = 64;
pub(crate) const MAX_TIME_CHARS: usize = 40;

// The schema attributes below spell these limits as literals.
const _: () = assert!(
    MAX_QUERY_CHARS == 1024
        && MAX_ID == 255
        && MAX_WINDOW == 20
        && DEFAULT_WINDOW == 5
        && MAX_LIMIT == 10
        && DEFAULT_LIMIT == 3
        && MAX_EXCLUDES == 20
        && MAX_ROLE_FILTER_CHARS == 64
        && MAX_TIME_CHARS == 40
);

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionSearchArgs {
    /// Search terms (FTS5: AND default, OR, NOT, "phrase", prefix*).
    #[serde(default, deserialize_with = "query")]
    #[schemars(length(max = 1024))]
    pub query: Option<String>,
    /// Read this session, scroll in it (with around_message_id) or search inside it (with query).
    #[serde(default, deserialize_with = "session_id")]
    #[schemars(length(max = 255))]
    pub session_id: Option<String>,
    /// Scroll anchor (a message id from earlier results); requires session_id.
    #[serde(default, deserialize_with = "around_message_id")]
    #[schemars(range(min = 0))]
    pub around_message_id: Option<u64>,
    /// Messages on each side of the anchor when scrolling.
    #[serde(default, deserialize_with = "window")]
    #[schemars(range(min = 1, max = 20), extend("default" = 5))]
    pub window: Option<u64>,
    /// Sessions to return (discover, browse).
    #[serde(default, deserialize_with = "limit")]
    #[schemars(range(min = 1, max = 10), extend("default" = 3))]
    pub limit: Option<u64>,
    /// Order by message time instead of relevance.
    #[serde(default, deserialize_with = "sort")]
    pub sort: Option<SortArg>,
    /// adaptive: top result with context, others compact; full: context for all; index: metadata and snippet only.
    #[serde(default, deserialize_with = "detail")]
    #[schemars(extend("default" = "adaptive"))]
    pub detail: Option<DetailArg>,
    /// Comma-separated roles among user, assistant, tool (default user,assistant). Including tool searches full tool results.
    #[serde(default, deserialize_with = "role_filter")]
    #[schemars(with = "Option<String>", length(max = 64))]
    pub role_filter: Vec<SearchRole>,
    /// Only sessions started at or after this time (ISO date/datetime or 12h, 3d, 2w ago).
    #[serde(default, deserialize_with = "after")]
    #[schemars(with = "Option<String>", length(max = 40))]
    pub after: Option<f64>,
    /// Only sessions started before this time (exclusive).
    #[serde(default, deserialize_with = "before")]
    #[schemars(with = "Option<String>", length(max = 40))]
    pub before: Option<f64>,
    /// Sessions already seen; their whole lineage is excluded.
    #[serde(default, deserialize_with = "exclude_session_ids")]
    #[schemars(with = "Vec<SessionId>", length(max = 20))]
    pub exclude_session_ids: Vec<String>,
}

/// A session id in `exclude_session_ids`.
#[derive(JsonSchema)]
#[schemars(transparent)]
#[expect(dead_code, reason = "only its schema is used")]
struct SessionId(#[schemars(length(max = 255))] String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SortArg {
    Newest,
    Oldest,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DetailArg {
    Adaptive,
    Full,
    Index,
}

impl SessionSearchArgs {
    /// The recall request these arguments ask for, or the message for arguments that only fail
    /// together (an anchor without a session, an empty time range).
    pub fn request(self) -> Result<SearchRequest, String> {
        let around = self.around_message_id.filter(|&n| n > 0);
        if around.is_some() && self.session_id.is_none() {
            return Err("around_message_id requires session_id".into());
        }
        if let (Some(a), Some(b)) = (self.after, self.before)
            && a >= b
        {
            return Err("after must be earlier than before".into());
        }
        let query = self.query.unwrap_or_default();
        let has_query = !query.trim().is_empty();
        let sort = match self.sort {
            None => Sort::Relevance,
            Some(SortArg::Newest) => Sort::Newest,
            Some(SortArg::Oldest) => Sort::Oldest,
        };
        let limit = self.limit.map_or(DEFAULT_LIMIT, |n| n as usize);
        Ok(match (self.session_id, around) {
            (Some(session_id), Some(anchor)) => SearchRequest::Scroll {
                session_id,
                around_message_id: i64::try_from(anchor).unwrap_or(i64::MAX),
                window: self.window.map_or(DEFAULT_WINDOW, |n| n as usize),
            },
            (Some(session_id), None) if has_query => SearchRequest::InSession {
                session_id,
                query,
                roles: self.role_filter,
                sort,
            },
            (Some(session_id), None) => SearchRequest::Read { session_id },
            (None, _) if has_query => SearchRequest::Discover(DiscoverRequest {
                query,
                limit,
                sort,
                detail: match self.detail {
                    None | Some(DetailArg::Adaptive) => Detail::Adaptive,
                    Some(DetailArg::Full) => Detail::Full,
                    Some(DetailArg::Index) => Detail::Index,
                },
                roles: self.role_filter,
                after: self.after,
                before: self.before,
                exclude_session_ids: self.exclude_session_ids,
            }),
            (None, _) => SearchRequest::Browse { limit },
        })
    }
}

/// The message for arguments serde refused: unknown keys named as the hand parser did.
pub(crate) fn invalid_message(args: &Value, error: &serde_json::Error) -> String {
    const KNOWN: [&str; 11] = [
        "query",
        "session_id",
        "around_message_id",
        "window",
        "limit",
        "sort",
        "detail",
        "role_filter",
        "after",
        "before",
        "exclude_session_ids",
    ];
    match args {
        Value::Object(obj) => match obj.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            Some(k) => format!("unknown parameter: {k}"),
            None => error.to_string(),
        },
        _ => "arguments must be a JSON object".into(),
    }
}

/// `deserialize_with` is not told which field it reads, so each field gets a named wrapper.
macro_rules! field_checks {
    ($($name:ident => $check:expr => $ty:ty;)*) => {
        $(fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
            let check: fn(Value) -> Result<$ty, String> = $check;
            check(Value::deserialize(d)?).map_err(D::Error::custom)
        })*
    };
}

field_checks! {
    query => |v| capped_string(v, "query", MAX_QUERY_CHARS) => Option<String>;
    session_id => |v| Ok(capped_string(v, "session_id", MAX_ID)?
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())) => Option<String>;
    around_message_id => |v| match lenient_int(v, "around_message_id")? {
        Some(n) if n < 0 => Err("around_message_id must be >= 0".into()),
        n => Ok(n.map(|n| n as u64)),
    } => Option<u64>;
    window => |v| ranged(v, "window", MAX_WINDOW) => Option<u64>;
    limit => |v| ranged(v, "limit", MAX_LIMIT) => Option<u64>;
    sort => |v| match word(v, "sort")?.as_deref() {
        None | Some("") | Some("relevance") => Ok(None),
        Some("newest") => Ok(Some(SortArg::Newest)),
        Some("oldest") => Ok(Some(SortArg::Oldest)),
        Some(other) => Err(format!("sort must be newest or oldest, not {other:?}")),
    } => Option<SortArg>;
    detail => |v| match word(v, "detail")?.as_deref() {
        None | Some("") => Ok(None),
        Some("adaptive") => Ok(Some(DetailArg::Adaptive)),
        Some("full") => Ok(Some(DetailArg::Full)),
        Some("index") => Ok(Some(DetailArg::Index)),
        Some(other) => Err(format!("detail must be adaptive, full or index, not {other:?}")),
    } => Option<DetailArg>;
    role_filter => roles => Vec<SearchRole>;
    after => |v| time_bound(v, "after") => Option<f64>;
    before => |v| time_bound(v, "before") => Option<f64>;
    exclude_session_ids => excludes => Vec<String>;
}

fn string(v: Value, field: &str) -> Result<Option<String>, String> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        _ => Err(format!("{field} must be a string")),
    }
}

fn capped_string(v: Value, field: &str, max: usize) -> Result<Option<String>, String> {
    let s = string(v, field)?;
    if s.as_ref().is_some_and(|s| s.chars().count() > max) {
        return Err(format!("{field} must be at most {max} characters"));
    }
    Ok(s)
}

fn word(v: Value, field: &str) -> Result<Option<String>, String> {
    Ok(string(v, field)?.map(|s| s.trim().to_owned()))
}

/// An integer, also as an integral float or a numeric string; null and `""` are absent.
fn lenient_int(v: Value, field: &str) -> Result<Option<i64>, String> {
    let bad = || format!("{field} must be an integer");
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .map(Some)
            .ok_or_else(bad),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => s.trim().parse::<i64>().map(Some).map_err(|_| bad()),
        _ => Err(bad()),
    }
}

fn ranged(v: Value, field: &str, max: usize) -> Result<Option<u64>, String> {
    match lenient_int(v, field)? {
        None => Ok(None),
        Some(n) if n >= 1 && n <= max as i64 => Ok(Some(n as u64)),
        Some(_) => Err(format!("{field} must be between 1 and {max}")),
    }
}

fn roles(v: Value) -> Result<Vec<SearchRole>, String> {
    let text = capped_string(v, "role_filter", MAX_ROLE_FILTER_CHARS)?.unwrap_or_default();
    let mut out: Vec<SearchRole> = Vec::new();
    for r in text.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        let role = match r.to_ascii_lowercase().as_str() {
            "user" => SearchRole::User,
            "assistant" => SearchRole::Assistant,
            "tool" => SearchRole::Tool,
            _ => {
                return Err(format!(
                    "role_filter allows only user, assistant and tool, not {r:?}"
                ));
            }
        };
        if !out.contains(&role) {
            out.push(role);
        }
    }
    Ok(out)
}

fn now_epoch() -> f64 {
    chrono::Utc::now().timestamp_micros() as f64 / 1e6
}

fn time_bound(v: Value, field: &str) -> Result<Option<f64>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => Ok(n.as_f64()),
        Value::String(s) => {
            let s = s.trim();
            if s.is_empty() {
                Ok(None)
            } else if s.chars().count() > MAX_TIME_CHARS {
                Err(format!(
                    "{field} must be at most {MAX_TIME_CHARS} characters"
                ))
            } else {
                parse_time_bound(s, now_epoch()).map(Some).ok_or_else(|| {
                    format!(
                        "{field} must be an ISO date/datetime or a relative value like 12h, 3d, 2w"
                    )
                })
            }
        }
        _ => Err(format!("{field} must be a string")),
    }
}

fn excludes(v: Value) -> Result<Vec<String>, String> {
    let bad = || "exclude_session_ids must be a list of strings".to_owned();
    let items = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        _ => return Err(bad()),
    };
    let mut out: Vec<String> = Vec::new();
    for it in items {
        let Value::String(s) = it else {
            return Err(bad());
        };
        if s.chars().count() > MAX_ID {
            return Err(format!(
                "excluded session ids must be at most {MAX_ID} characters"
            ));
        }
        let s = s.trim().to_owned();
        if !s.is_empty() && !out.contains(&s) {
            out.push(s);
        }
    }
    if out.len() > MAX_EXCLUDES {
        return Err(format!(
            "exclude_session_ids allows at most {MAX_EXCLUDES} items"
        ));
    }
    Ok(out)
}

/// Parse an `after`/`before` bound: ISO date, ISO datetime (`Z`/offset, naive = UTC), relative
/// `Nh`/`Nd`/`Nw` (before now), or epoch seconds. Returns epoch seconds.
pub fn parse_time_bound(s: &str, now: f64) -> Option<f64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if let Some(unit) = s
        .chars()
        .last()
        .filter(|c| matches!(c, 'h' | 'd' | 'w' | 'H' | 'D' | 'W'))
    {
        let num = &s[..s.len() - 1];
        if !num.is_empty() && num.chars().all(|c| c.is_ascii_digit()) {
            let n: f64 = num.parse().ok()?;
            let secs = match unit.to_ascii_lowercase() {
                'h' => 3600.0,
                'd' => 86400.0,
                _ => 7.0 * 86400.0,
            };
            return Some(now - n * secs);
        }
    }
    if let Ok(v) = s.parse::<f64>()
        && v.is_finite()
    {
        return Some(v);
    }
    if let Ok(dt) = chrono::DateTime::parse_from_rfc3339(s) {
        return Some(dt.timestamp_millis() as f64 / 1000.0);
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(ndt) = chrono::NaiveDateTime::parse_from_str(s, fmt) {
            return Some(ndt.and_utc().timestamp_millis() as f64 / 1000.0);
        }
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return d
            .and_hms_opt(0, 0, 0)
            .map(|n| n.and_utc().timestamp() as f64);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_bounds() {
        assert_eq!(parse_time_bound("100", 0.0), Some(100.0));
        assert_eq!(parse_time_bound("2d", 200000.0), Some(200000.0 - 172800.0));
        assert_eq!(parse_time_bound("1970-01-02", 0.0), Some(86400.0));
        assert_eq!(parse_time_bound("1970-01-01T00:01:00Z", 0.0), Some(60.0));
        assert_eq!(parse_time_bound("1970-01-01T00:01:00", 0.0), Some(60.0));
        assert_eq!(parse_time_bound("yesterday", 0.0), None);
    }

    #[test]
    fn lenient_forms_and_mode_inference() {
        let a: SessionSearchArgs = serde_json::from_value(serde_json::json!({
            "session_id": "  s1 ", "around_message_id": "7", "window": 3.0, "sort": " newest ",
            "role_filter": "Tool, user,tool", "exclude_session_ids": [" a ", "a", ""]
        }))
        .unwrap();
        assert_eq!(a.role_filter, vec![SearchRole::Tool, SearchRole::User]);
        assert_eq!(a.exclude_session_ids, vec!["a".to_owned()]);
        match a.request().unwrap() {
            SearchRequest::Scroll {
                session_id,
                around_message_id,
                window,
            } => assert_eq!(
                (session_id.as_str(), around_message_id, window),
                ("s1", 7, 3)
            ),
            other => panic!("{other:?}"),
        }
        let b: SessionSearchArgs =
            serde_json::from_value(serde_json::json!({"around_message_id": 0, "limit": ""}))
                .unwrap();
        assert!(matches!(
            b.request().unwrap(),
            SearchRequest::Browse { limit: 3 }
        ));
    }
}
