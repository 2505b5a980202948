//! Mapping provider failures (HTTP status + body, in-stream error chunks) onto [`ModelError`].

use crate::chunk::WireError;
use crate::error::{ModelError, mentions_context_length, scrub};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A provider asking for more than this is treated as asking for this: a turn should fail rather
/// than hang for minutes.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The readable part of an error body: the `error.message` of OpenAI-shaped JSON, `detail` or
/// `message` of other JSON, else the raw text.
pub(crate) fn error_body_text(body: &str) -> (String, Option<WireError>) {
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => {
            let inner = v.get("error").unwrap_or(&v);
            let err = WireError::from_value(inner);
            (err.message.clone(), Some(err))
        }
        Err(_) => (body.to_owned(), None),
    }
}

/// Classifies a non-200 response.
pub(crate) fn classify_http(
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
    api_key: Option<&str>,
) -> ModelError {
    let (text, wire) = error_body_text(body);
    let haystack = match &wire {
        Some(w) => w.haystack(),
        None => text.clone(),
    };
    let mut message = scrub(&text, api_key);
    if message.is_empty() {
        message = "no error text from provider".to_owned();
    }
    match status {
        401 | 403 => ModelError::Auth {
            status: Some(status),
            message,
        },
        429 => ModelError::RateLimited {
            retry_after: retry_after.map(|d| d.min(MAX_RETRY_AFTER)),
            message,
        },
        400 | 413 | 422 if mentions_context_length(&haystack) => {
            ModelError::ContextLengthExceeded { message }
        }
        500..=599 => ModelError::Server {
            status: Some(status),
            message,
        },
        _ => ModelError::BadResponse {
            status: Some(status),
            message,
        },
    }
}

/// Classifies an `{"error": …}` chunk received inside a 200 stream.
pub(crate) fn classify_stream_error(err: &WireError, api_key: Option<&str>) -> ModelError {
    let haystack = err.haystack().to_ascii_lowercase();
    let message = scrub(&err.message, api_key);
    let status = err.status.filter(|s| (100..=599).contains(s));
    if mentions_context_length(&haystack) {
        return ModelError::ContextLengthExceeded { message };
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
        Some(s) if s >= 500 => ModelError::Server { status, message },
        Some(s) if s >= 400 => ModelError::BadResponse { status, message },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // 1994-11-06 08:49:37
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn http_classification() {
        let body = r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        assert!(matches!(
            classify_http(400, None, body, None),
            ModelError::ContextLengthExceeded { .. }
        ));
        assert!(matches!(
            classify_http(400, None, r#"{"error":"bad"}"#, None),
            ModelError::BadResponse {
                status: Some(400),
                ..
            }
        ));
        let e = classify_http(429, Some(Duration::from_secs(500)), "slow down", None);
        assert_eq!(e.retry_after(), Some(MAX_RETRY_AFTER));
        assert!(matches!(
            classify_http(503, None, "", None),
            ModelError::Server {
                status: Some(503),
                ..
            }
        ));
    }

    #[test]
    fn stream_error_classification() {
        let e = |v: serde_json::Value| classify_stream_error(&WireError::from_value(&v), None);
        assert!(matches!(
            e(serde_json::json!({"message":"Provider returned error","code":502})),
            ModelError::Server {
                status: Some(502),
                ..
            }
        ));
        assert!(matches!(
            e(serde_json::json!({"message":"Rate limit reached","type":"rate_limit_error"})),
            ModelError::RateLimited { .. }
        ));
        assert!(matches!(
            e(serde_json::json!({"message":"weird"})),
            ModelError::BadResponse { .. }
        ));
    }
}
