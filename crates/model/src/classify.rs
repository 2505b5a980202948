//! Mapping provider failures (HTTP status + body, in-stream error chunks) onto [`ModelError`], and
//! getting the provider's reason out of its error body in a form that survives the length cap.
//!
//! | what arrived | variant | retried |
//! |---|---|---|
//! | 401, 403, in-stream auth errors | `Auth` | no |
//! | 429, in-stream rate limits | `RateLimited` | yes, after `Retry-After` (capped) |
//! | any 4xx/5xx or in-stream error naming the context window ([`CONTEXT_EXCEEDED_MARKERS`]) | `ContextLengthExceeded` | no |
//! | 400, 413, 422; a 5xx whose body is a validation error | `InvalidRequest` | no |
//! | 404, other 4xx | `BadResponse` | no |
//! | 408, other 5xx, in-stream server errors | `Server` | yes |
//! | connect/timeout/reset before the first byte | `Network` | yes |
//! | a stream cut after its first event | `Network` | no |
//!
//! A 200 stream that ends without any event is not classified here: the client asks again once
//! without streaming to learn the real reason (see [`crate::ModelClient::stream_chat`]).

use crate::chunk::WireError;
use crate::error::{ModelError, scrub};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A provider asking for more than this is treated as asking for this: a turn should fail rather
/// than hang for minutes.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Phrases (lower-case substrings) by which servers say a request does not fit the context window,
/// each with where it was seen. Matched against the whole error body or chunk (message, `type`,
/// `code`). Phrases about the *output* limit alone ("max_tokens is too large") are not here: a
/// shorter conversation would not help with those.
pub const CONTEXT_EXCEEDED_MARKERS: &[&str] = &[
    // OpenAI, Azure OpenAI, DeepSeek, Groq, Mistral, vLLM, llama-cpp-python, OpenRouter ("This
    // model's / endpoint's maximum context length is N tokens. However, you requested M tokens").
    "maximum context length",
    // The `code` of OpenAI, Azure OpenAI, Groq and llama-cpp-python.
    "context_length_exceeded",
    "context length exceeded",
    // OpenAI, newer models: "Your input exceeds the context window of this model".
    "exceeds the context window",
    // llama.cpp `llama-server`: type `exceed_context_size_error`, "request (4476 tokens) exceeds
    // the available context size (4096 tokens), try increasing it".
    "exceed_context_size",
    "exceeds the available context size",
    // llama-cpp-python's own check: "Requested tokens (N) exceed context window of M".
    "exceed context window",
    // vLLM: "The prompt (total length N) is too long to fit into the model (context length M)",
    // "The decoder prompt (length N) is longer than the maximum model length of M".
    "too long to fit into the model",
    "longer than the maximum model length",
    // Ollama: "the input length exceeds the context length", "input exceeds context length".
    "exceeds the context length",
    "exceeds context length",
    // Anthropic through gateways: "prompt is too long: 205106 tokens > 200000 maximum".
    "prompt is too long",
    // AWS Bedrock through gateways: "Input is too long for requested model".
    "input is too long",
    // Google Gemini: "The input token count (N) exceeds the maximum number of tokens allowed (M)".
    "exceeds the maximum number of tokens allowed",
    // Zhipu GLM, SiliconFlow: "number of input tokens (N) has exceeded max_prompt_tokens (M)".
    "exceeded max_prompt_tokens",
    // Hugging Face TGI: "`inputs` tokens + `max_new_tokens` must be <= 4096".
    "tokens + `max_new_tokens` must be",
    // Moonshot (Kimi): "Your request exceeded model token limit: 8192".
    "exceeded model token limit",
];

/// Bodies of 5xx answers that are deterministic request rejections, not server trouble:
/// pydantic/FastAPI validation (llama-cpp-python answers a `null` content with "7 validation
/// errors" and HTTP 500) and chat-template refusals.
const VALIDATION_MARKERS: &[&str] = &[
    "validation error",
    "field required",
    "input should be",
    "extra inputs are not permitted",
    "invalid_request_error",
    "roles must alternate",
    "chat template",
    "jinja",
];

pub(crate) fn mentions_context_length(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    CONTEXT_EXCEEDED_MARKERS.iter().any(|m| lower.contains(m))
}

fn is_validation_error(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    VALIDATION_MARKERS.iter().any(|m| lower.contains(m))
}

/// The readable part of an error body: the `error.message` of OpenAI-shaped JSON, `detail` or
/// `message` of other JSON, else the raw text — then [`readable`].
pub(crate) fn error_body_text(body: &str) -> (String, Option<WireError>) {
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => {
            // Google wraps its error object in a one-element array.
            let v = match v {
                serde_json::Value::Array(mut items) if items.len() == 1 => items.remove(0),
                other => other,
            };
            let inner = v.get("error").unwrap_or(&v);
            let err = WireError::from_value(inner);
            (readable(&err.message), Some(err))
        }
        Err(_) => (readable(body), None),
    }
}

/// Provider error text as a person needs it: a Python traceback dropped, a list of pydantic
/// validation errors reduced to `location: message` lines (union-branch noise and echoed input
/// left out, so the useful line comes first and survives the length cap).
pub(crate) fn readable(text: &str) -> String {
    let mut text = text;
    for marker in ["\n  File \"", "\nTraceback (most recent call last)"] {
        if let Some(cut) = text.find(marker) {
            text = &text[..cut];
        }
    }
    let text = text.trim();
    summarize_pydantic_repr(text).unwrap_or_else(|| text.to_owned())
}

/// One validation complaint: pydantic `type`, location path, message.
struct Complaint {
    kind: String,
    loc: String,
    msg: String,
}

/// `detail: [{loc, msg, type}, …]` (FastAPI, vLLM) as one line.
pub(crate) fn summarize_detail_array(items: &[serde_json::Value]) -> Option<String> {
    let complaints: Vec<Complaint> = items
        .iter()
        .filter_map(|item| {
            let msg = item.get("msg")?.as_str()?.to_owned();
            let loc = match item.get("loc") {
                Some(serde_json::Value::Array(parts)) => loc_path(parts.iter().map(|p| match p {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })),
                _ => String::new(),
            };
            let kind = item
                .get("type")
                .and_then(|t| t.as_str())
                .unwrap_or("")
                .to_owned();
            Some(Complaint { kind, loc, msg })
        })
        .collect();
    let header = match complaints.len() {
        0 => return None,
        1 => "1 validation error:".to_owned(),
        n => format!("{n} validation errors:"),
    };
    Some(render_complaints(&header, complaints))
}

/// The `str()` of a llama-cpp-python/pydantic error list: `{'type': 'string_type', 'loc':
/// ('body', 'messages', 2, …, 'content'), 'msg': 'Input should be a valid string', 'input': …}`.
fn summarize_pydantic_repr(text: &str) -> Option<String> {
    const OPEN: &str = "{'type': '";
    let first = text.find(OPEN)?;
    let mut complaints = Vec::new();
    let mut rest = &text[first..];
    while let Some(pos) = rest.find(OPEN) {
        rest = &rest[pos + OPEN.len()..];
        let Some(end) = rest.find('\'') else { break };
        let kind = rest[..end].to_owned();
        // This entry ends where the next begins; `input` echoes may hold anything.
        let entry_end = rest.find(OPEN).unwrap_or(rest.len());
        let entry = &rest[..entry_end];
        let loc = entry
            .find("'loc': (")
            .map(|p| {
                let s = &entry[p + "'loc': (".len()..];
                let e = s.find(')').unwrap_or(s.len());
                loc_path(
                    s[..e]
                        .split(", ")
                        .map(|part| part.trim_matches(['\'', '"']).to_owned()),
                )
            })
            .unwrap_or_default();
        let msg = entry.find("'msg': ").and_then(|p| {
            let s = &entry[p + "'msg': ".len()..];
            let quote = s.chars().next().filter(|q| *q == '\'' || *q == '"')?;
            let body = &s[1..];
            body.find(quote).map(|e| body[..e].to_owned())
        });
        if let Some(msg) = msg {
            complaints.push(Complaint { kind, loc, msg });
        }
    }
    if complaints.is_empty() {
        return None;
    }
    let header = text[..first]
        .lines()
        .next()
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .unwrap_or("validation errors:")
        .to_owned();
    Some(render_complaints(&header, complaints))
}

/// `('body', 'messages', 2, 'content')` → `messages.2.content`.
fn loc_path(parts: impl Iterator<Item = String>) -> String {
    parts
        .filter(|p| !p.is_empty() && p != "body")
        .collect::<Vec<_>>()
        .join(".")
}

/// Header then `loc: msg; …`. A union field (a chat message is one of several role schemas) gets
/// a `literal_error` from every branch it did not match; those only repeat the role, so they are
/// counted rather than listed when there is anything else to say.
fn render_complaints(header: &str, complaints: Vec<Complaint>) -> String {
    let total = complaints.len();
    let (noise, mut useful): (Vec<Complaint>, Vec<Complaint>) = complaints
        .into_iter()
        .partition(|c| c.kind == "literal_error");
    let omitted = if useful.is_empty() {
        useful = noise;
        0
    } else {
        total - useful.len()
    };
    let mut seen = std::collections::HashSet::new();
    let lines: Vec<String> = useful
        .into_iter()
        .map(|c| {
            if c.loc.is_empty() {
                c.msg
            } else {
                format!("{}: {}", c.loc, c.msg)
            }
        })
        .filter(|line| seen.insert(line.clone()))
        .collect();
    let mut out = format!("{header} {}", lines.join("; "));
    if omitted > 0 {
        out.push_str(&format!(
            " ({omitted} more about a mismatched role omitted)"
        ));
    }
    out
}

/// Classifies a non-200 response.
pub fn classify_http(
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
    api_key: Option<&str>,
) -> ModelError {
    let (text, _) = error_body_text(body);
    let mut message = scrub(&text, api_key);
    if message.is_empty() {
        message = "no error text from provider".to_owned();
    }
    let status_code = Some(status);
    match status {
        401 | 403 => ModelError::Auth {
            status: status_code,
            message,
        },
        429 => ModelError::RateLimited {
            retry_after: retry_after.map(|d| d.min(MAX_RETRY_AFTER)),
            message,
        },
        400..=599 if mentions_context_length(body) => ModelError::ContextLengthExceeded {
            status: status_code,
            message,
        },
        408 => ModelError::Server {
            status: status_code,
            message,
        },
        400 | 413 | 422 => ModelError::InvalidRequest {
            status: status_code,
            message,
        },
        500..=599 if is_validation_error(body) => ModelError::InvalidRequest {
            status: status_code,
            message,
        },
        500..=599 => ModelError::Server {
            status: status_code,
            message,
        },
        _ => ModelError::BadResponse {
            status: status_code,
            message,
        },
    }
}

/// Classifies an `{"error": …}` chunk received inside a 200 stream (or a 200 JSON body).
pub fn classify_stream_error(err: &WireError, api_key: Option<&str>) -> ModelError {
    let haystack = err.haystack().to_ascii_lowercase();
    let message = scrub(&readable(&err.message), api_key);
    let status = err.status.filter(|s| (100..=599).contains(s));
    if mentions_context_length(&haystack) {
        return ModelError::ContextLengthExceeded { status, message };
    }
    let has = |words: &[&str]| words.iter().any(|w| haystack.contains(w));
    if matches!(status, Some(401 | 403))
        || has(&[
            "invalid_api_key",
            "authentication",
            "unauthorized",
            "invalid api key",
        ])
    {
        return ModelError::Auth { status, message };
    }
    if status == Some(429) || has(&["rate limit", "rate_limit", "too many requests"]) {
        return ModelError::RateLimited {
            retry_after: None,
            message,
        };
    }
    match status {
        Some(s) if s >= 500 && is_validation_error(&haystack) => {
            ModelError::InvalidRequest { status, message }
        }
        Some(s) if s >= 500 => ModelError::Server { status, message },
        Some(400 | 413 | 422) => ModelError::InvalidRequest { status, message },
        Some(s) if s >= 400 => ModelError::BadResponse { status, message },
        _ if is_validation_error(&haystack) => ModelError::InvalidRequest { status, message },
        _ if has(&[
            "server_error",
            "overloaded",
            "internal",
            "unavailable",
            "timeout",
        ]) =>
        {
            ModelError::Server { status, message }
        }
        _ => ModelError::BadResponse { status, message },
    }
}

/// Parses `Retry-After`: delay seconds (fractions tolerated) or an HTTP date (IMF-fixdate).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::from_secs_f64(secs.min(3600.0)));
    }
    let when = parse_http_date(value)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(when.saturating_sub(now)))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` → seconds since the Unix epoch.
fn parse_http_date(s: &str) -> Option<u64> {
    let (_, rest) = s.split_once(", ")?;
    let mut parts = rest.split_ascii_whitespace();
    let day: u64 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':');
    let h: u64 = hms.next()?.parse().ok()?;
    let m: u64 = hms.next()?.parse().ok()?;
    let sec: u64 = hms.next()?.parse().ok()?;
    if parts.next()? != "GMT" || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let days = days_from_civil(year, month, i64::try_from(day).ok()?);
    let days = u64::try_from(days).ok()?;
    Some(days * 86_400 + h * 3600 + m * 60 + sec)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
