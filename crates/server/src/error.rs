use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use mpa_core::CoreError;

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
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
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

    pub fn internal(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, code, message)
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
            CoreError::QueueFull { .. } => StatusCode::TOO_MANY_REQUESTS,
            CoreError::SessionClosed => StatusCode::SERVICE_UNAVAILABLE,
            CoreError::UnknownTool(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(code = e.code(), error = %e, "request failed");
        }
        Self::new(status, e.code(), e.to_string())
    }
}

impl From<mpa_store::StoreError> for ApiError {
    fn from(e: mpa_store::StoreError) -> Self {
        CoreError::from(e).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let kind = if self.status.is_server_error() {
            "server_error"
        } else {
            "invalid_request_error"
        };
        let body = serde_json::json!({
            "error": {"code": self.code, "message": self.message, "type": kind}
        });
        (self.status, axum::Json(body)).into_response()
    }
}
