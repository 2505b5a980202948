use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use mpa_core::CoreError;
use mpa_core::web::i18n::{self, Locale};

/// Errors of the host itself (binding, serving). Per-request failures are [`ApiError`]s.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
}

pub type Result<T> = std::result::Result<T, ServerError>;

/// A failed request: HTTP status plus a stable machine code and a secret-free message. The JSON
/// shape `{"error": {"code", "message", "type"}}` also satisfies OpenAI clients.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds for a `Retry-After` header (limits that lift by themselves).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing, invalid or expired bearer token",
        )
    }

    pub fn not_found() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "session_not_found",
            "session not found",
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn bad_request_code(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn internal(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, code, message)
    }

    /// The envelope for a bare status (a response produced below the handlers, e.g. by a
    /// layer), with the code a handler would have used for it.
    pub fn for_status(status: StatusCode) -> Self {
        let (code, message) = match status {
            StatusCode::BAD_REQUEST => ("bad_request", "the request is malformed"),
            StatusCode::UNAUTHORIZED => {
                ("unauthorized", "missing, invalid or expired bearer token")
            }
            StatusCode::NOT_FOUND => ("not_found", "no such route"),
            StatusCode::METHOD_NOT_ALLOWED => (
                "method_not_allowed",
                "this method is not allowed on this route",
            ),
            StatusCode::REQUEST_TIMEOUT => {
                ("request_timeout", "the request took too long to arrive")
            }
            StatusCode::PAYLOAD_TOO_LARGE => (
                "payload_too_large",
                "the request body is larger than this server accepts",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => (
                "unsupported_media_type",
                "the request body must be JSON sent with Content-Type: application/json",
            ),
            StatusCode::UNPROCESSABLE_ENTITY => {
                ("invalid_body", "the request body has the wrong shape")
            }
            StatusCode::TOO_MANY_REQUESTS => {
                ("too_many_requests", "too many requests; try again later")
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                ("agent_manager_unavailable", "the host is unavailable")
            }
            s if s.is_server_error() => ("internal_error", "the server failed to answer"),
            _ => ("http_error", "the request was refused"),
        };
        Self::new(status, code, message)
    }

    pub fn unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "agent_manager_unavailable",
            "the host is shutting down",
        )
    }
}

impl From<CoreError> for ApiError {
    fn from(e: CoreError) -> Self {
        let status = match &e {
            CoreError::SessionNotFound => StatusCode::NOT_FOUND,
            CoreError::InvalidSessionId(_) => StatusCode::BAD_REQUEST,
            CoreError::QueueFull { .. }
            | CoreError::LoginRateLimited { .. }
            | CoreError::LoginBusy => StatusCode::TOO_MANY_REQUESTS,
            CoreError::SessionClosed => StatusCode::SERVICE_UNAVAILABLE,
            CoreError::UnknownTool(_) | CoreError::WeakPassword { .. } => StatusCode::BAD_REQUEST,
            CoreError::InvalidCredentials | CoreError::MoviePilotAccountEnded(_) => {
                StatusCode::UNAUTHORIZED
            }
            CoreError::AccountDisabled => StatusCode::FORBIDDEN,
            CoreError::SignInUnavailable(_) => StatusCode::BAD_GATEWAY,
            CoreError::MessageTooLarge { .. } | CoreError::MessageOverWindow { .. } => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            CoreError::StorageFull { .. } => StatusCode::INSUFFICIENT_STORAGE,
            CoreError::AttachmentTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            CoreError::AttachmentEmpty
            | CoreError::InvalidInput(_)
            | CoreError::NothingToRegenerate => StatusCode::BAD_REQUEST,
            CoreError::AttachmentNotFound => StatusCode::NOT_FOUND,
            CoreError::AdminRequired(_) => StatusCode::FORBIDDEN,
            CoreError::SessionBusy => StatusCode::CONFLICT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(code = e.code(), error = %e, "request failed");
        }
        let retry_after = match &e {
            CoreError::LoginRateLimited { retry_after_secs } => Some(*retry_after_secs),
            CoreError::LoginBusy => Some(1),
            _ => None,
        };
        Self {
            retry_after,
            ..Self::new(status, e.code(), e.to_string())
        }
    }
}

/// The Chinese body of an error response, which [`localise`] puts in place of the English one
/// when the request asked for Chinese.
#[derive(Clone)]
pub struct ChineseBody(pub bytes::Bytes);

impl ApiError {
    fn body(&self, locale: Locale) -> serde_json::Value {
        let kind = if self.status.is_server_error() {
            "server_error"
        } else {
            "invalid_request_error"
        };
        let mut error = serde_json::json!({
            "code": self.code,
            "message": i18n::localise(self.code, &self.message, locale),
            "type": kind,
        });
        if i18n::retryable(self.code) {
            error["retryable"] = serde_json::Value::Bool(true);
        }
        serde_json::json!({ "error": error })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let zh = bytes::Bytes::from(self.body(Locale::Zh).to_string());
        let mut resp = (self.status, axum::Json(self.body(Locale::En))).into_response();
        resp.extensions_mut().insert(ChineseBody(zh));
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

/// The request's language: `X-MoviePilot-Locale` (the page's explicit choice) wins over
/// `Accept-Language`.
pub fn request_locale(headers: &HeaderMap) -> Locale {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    Locale::negotiate(get("x-moviepilot-locale"), get("accept-language"))
}

/// Every error envelope in the request's language (see [`request_locale`]).
pub async fn localise(req: Request, next: Next) -> Response {
    let locale = request_locale(req.headers());
    let mut resp = next.run(req).await;
    let zh = resp.extensions_mut().remove::<ChineseBody>();
    if let (Locale::Zh, Some(ChineseBody(body))) = (locale, zh) {
        let (mut parts, _) = resp.into_parts();
        parts.headers.remove(header::CONTENT_LENGTH);
        return Response::from_parts(parts, axum::body::Body::from(body));
    }
    resp
}

/// The answer for a path no route matches.
pub async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route for {method} {}", uri.path()),
    )
}

/// The answer for a route that exists but not with this method (axum adds the `Allow` header).
pub async fn wrong_method(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"))
}

/// The last guard of "every error is a JSON envelope": an error response that is not JSON (made
/// by a layer or by axum itself, below every handler) is replaced by the envelope for its
/// status. Handlers and extractors answer with specific codes and never reach this.
pub async fn envelope_errors(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(resp.headers()) {
        return resp;
    }
    let (parts, _) = resp.into_parts();
    let mut out = ApiError::for_status(status).into_response();
    for name in [header::ALLOW, header::RETRY_AFTER] {
        if let Some(v) = parts.headers.get(&name) {
            out.headers_mut().insert(name, v.clone());
        }
    }
    out
}
