//! The crate's one error type, its classification of provider failures, and secret scrubbing.

use std::time::Duration;

/// Longest provider text kept in an error message: enough for the reason (a vLLM or pydantic
/// validation message runs to a few hundred characters once its noise is dropped, see
/// [`crate::classify`]), short enough for a UI line.
pub const SNIPPET_CHARS: usize = 500;

pub type Result<T, E = ModelError> = std::result::Result<T, E>;

/// Why a model call failed. Every message was scrubbed of the API key and of every secret
/// `mpa-redact` recognises when the error was built, so `Display` and `Debug` are safe to show.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// 401/403, or an in-stream error naming an invalid key.
    #[error("model authentication failed{}: {message}", status_suffix(*status))]
    Auth {
        status: Option<u16>,
        message: String,
    },
    /// 429 (or an in-stream rate-limit error). `retry_after` is the provider's `Retry-After`, capped.
    #[error("model rate limited{}: {message}", retry_suffix(*retry_after))]
    RateLimited {
        retry_after: Option<Duration>,
        message: String,
    },
    /// The request does not fit the model's context window (any provider's phrasing, see
    /// [`crate::CONTEXT_EXCEEDED_MARKERS`]); retrying the same request cannot help, a shorter one
    /// (compaction, a new session) or a larger server context can. `message` is the provider's.
    #[error("model context length exceeded{}: {message}", status_suffix(*status))]
    ContextLengthExceeded {
        status: Option<u16>,
        message: String,
    },
    /// The provider refused the request as invalid (400, 413, 422, or a 5xx whose body is a
    /// validation error): the same request fails the same way, so it is never retried.
    #[error("model request rejected{}: {message}", status_suffix(*status))]
    InvalidRequest {
        status: Option<u16>,
        message: String,
    },
    /// 5xx, or an in-stream server error (then `status` is the provider's numeric code, if any).
    #[error("model server error{}: {message}", status_suffix(*status))]
    Server {
        status: Option<u16>,
        message: String,
    },
    /// Connection failures, timeouts, silence longer than the idle timeout, streams cut short.
    /// `failure` says which, so callers never read it from the wording.
    #[error("model network error: {message}")]
    Network {
        failure: NetworkFailure,
        message: String,
    },
    /// Other 4xx (404: no such model or path), unparseable chunks, malformed responses.
    #[error("bad model response{}: {message}", status_suffix(*status))]
    BadResponse {
        status: Option<u16>,
        message: String,
    },
    /// The caller's cancellation token fired.
    #[error("model call cancelled")]
    Cancelled,
    /// The client could not be built from its configuration (e.g. an invalid base URL).
    #[error("model client configuration error: {message}")]
    Config { message: String },
}

/// What kind of network failure a [`ModelError::Network`] was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkFailure {
    /// Nothing answered at the configured address: connection refused, no route, the host name
    /// did not resolve. The model service is not running there (or the address is wrong).
    Unreachable,
    /// Connected, but no answer (or no further bytes) within the idle timeout.
    Timeout,
    /// Connected and answering, but the response broke off or ended before completion.
    Interrupted,
}

fn status_suffix(status: Option<u16>) -> String {
    status.map(|s| format!(" (HTTP {s})")).unwrap_or_default()
}

fn retry_suffix(retry_after: Option<Duration>) -> String {
    retry_after
        .map(|d| format!(" (retry after {:.1}s)", d.as_secs_f64()))
        .unwrap_or_default()
}

impl ModelError {
    /// Whether the same request may succeed if sent again. Exhaustive on purpose: a new variant must
    /// decide. The client additionally never retries once a byte of a 200 stream has arrived.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::RateLimited { .. }
            | ModelError::Server { .. }
            | ModelError::Network { .. } => true,
            ModelError::Auth { .. }
            | ModelError::ContextLengthExceeded { .. }
            | ModelError::InvalidRequest { .. }
            | ModelError::BadResponse { .. }
            | ModelError::Cancelled
            | ModelError::Config { .. } => false,
        }
    }

    /// Stable machine-readable code for events and logs.
    pub fn code(&self) -> &'static str {
        match self {
            ModelError::Auth { .. } => "model_auth",
            ModelError::RateLimited { .. } => "model_rate_limited",
            ModelError::ContextLengthExceeded { .. } => "model_context_exceeded",
            ModelError::InvalidRequest { .. } => "model_invalid_request",
            ModelError::Server { .. } => "model_server_error",
            ModelError::Network { .. } => "model_network_error",
            ModelError::BadResponse { .. } => "model_bad_response",
            ModelError::Cancelled => "model_cancelled",
            ModelError::Config { .. } => "model_config",
        }
    }

    /// Whether nothing answered at the configured address (connection refused, no route, the
    /// name did not resolve): the service is not there, as opposed to one that failed mid-way.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            ModelError::Network {
                failure: NetworkFailure::Unreachable,
                ..
            }
        )
    }

    /// Whether the request did not fit the model's context window (code `model_context_exceeded`):
    /// the host compacts and retries, or tells the user to start a new session or raise the
    /// server's context size.
    pub fn is_context_exceeded(&self) -> bool {
        matches!(self, ModelError::ContextLengthExceeded { .. })
    }

    /// The provider's status code, when the error came from an HTTP answer or carried one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ModelError::Auth { status, .. }
            | ModelError::ContextLengthExceeded { status, .. }
            | ModelError::InvalidRequest { status, .. }
            | ModelError::Server { status, .. }
            | ModelError::BadResponse { status, .. } => *status,
            ModelError::RateLimited { .. }
            | ModelError::Network { .. }
            | ModelError::Cancelled
            | ModelError::Config { .. } => None,
        }
    }

    /// Whether the provider refused the request because it carried image input the model cannot
    /// take (the host then retries once in text mode, spec runtime §9.4).
    pub fn is_image_input_rejected(&self) -> bool {
        let (ModelError::BadResponse { message, .. } | ModelError::InvalidRequest { message, .. }) =
            self
        else {
            return false;
        };
        let m = message.to_ascii_lowercase();
        let about_images = ["image", "vision", "multimodal", "multi-modal"]
            .iter()
            .any(|w| m.contains(w));
        let refusal = [
            "not support",
            "unsupported",
            "does not accept",
            "cannot accept",
            "invalid content type",
            "only text",
            "text-only",
        ]
        .iter()
        .any(|w| m.contains(w));
        about_images && refusal
    }

    /// The provider's `Retry-After`, when this is a rate-limit error that carried one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Removes secrets from provider or transport text and caps it at [`SNIPPET_CHARS`] characters.
///
/// Removes the configured key verbatim, then whatever `mpa-redact`'s text rules catch (bearer
/// credentials, `sk-…` keys, JWTs, passwords in URLs, …).
pub fn scrub(text: &str, api_key: Option<&str>) -> String {
    let known = api_key.map(|value| mpa_redact::KnownSecret {
        kind: "api_key",
        value,
    });
    let out = mpa_redact::redact_known(text, known.as_slice());
    truncate_chars(out.trim(), SNIPPET_CHARS)
}

fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
