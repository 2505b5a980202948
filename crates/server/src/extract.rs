//! Request extractors whose every rejection is an [`ApiError`] envelope with a stable code,
//! instead of axum's plain-text rejections. Handlers take [`Json`], [`Query`] and [`Path`] from
//! here, never the axum ones.
//!
//! Codes: `unsupported_media_type` (415, body not declared `application/json`),
//! `payload_too_large` (413), `request_timeout` (408, the body stopped arriving),
//! `body_unreadable` (400, the body broke off), `invalid_json` (400,
//! not JSON), `invalid_body` (422, JSON of the wrong shape: the message names the field and what
//! was expected, never the value sent — it may be a password), `invalid_query` (400),
//! `invalid_path` (400).

use crate::error::ApiError;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::de::DeserializeOwned;

/// A JSON request body (`Content-Type: application/json` or `application/*+json`); as a
/// response, the same as axum's.
pub struct Json<T>(pub T);

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub fn declares_json(headers: &HeaderMap) -> bool {
    let Some(ct) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = ct.split(';').next().unwrap_or_default().trim();
    let Some((ty, subtype)) = essence.split_once('/') else {
        return false;
    };
    ty.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json") || subtype.to_ascii_lowercase().ends_with("+json"))
}

impl<S, T> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !declares_json(req.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "the request body must be JSON sent with Content-Type: application/json",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(body_error)?;
        parse(&bytes).map(Json)
    }
}

/// The envelope for a body that could not be read: over the size limit, too slow to arrive, or
/// broken off.
fn body_error(e: BytesRejection) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return payload_too_large();
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(err) = source {
        if err.is::<tower_http::timeout::TimeoutError>() {
            return ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                "the request body stopped arriving; send it again",
            );
        }
        source = err.source();
    }
    ApiError::bad_request_code(
        "body_unreadable",
        "the request body could not be read completely",
    )
}

fn payload_too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        "the request body is larger than this server accepts",
    )
}

// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        shape_error(&path, e.inner())
    })?;
    de.end().map_err(|e| shape_error(".", &e))?;
    Ok(value)
}

fn shape_error(path: &str, e: &serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => ApiError::bad_request_code(
            "invalid_json",
            format!(
                "the request body is not valid JSON (line {}, column {})",
                e.line(),
                e.column()
            ),
        ),
        Category::Data => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            data_message(path, e),
        ),
    }
}

/// A secret-free description of a JSON shape error. serde quotes the offending value ("invalid
/// type: string \"hunter2\", expected u32"); the value is dropped and only the field and what was
/// expected are kept.
fn data_message(path: &str, e: &serde_json::Error) -> String {
    let full = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    let msg = full.strip_suffix(&position).unwrap_or(&full);
    let what = if let Some(field) = msg.strip_prefix("missing field ") {
        return format!("missing field {field}");
    } else if let Some((_, expected)) = msg.rsplit_once(", expected ") {
        format!("wrong type or value, expected {expected}")
    } else {
        "invalid value".to_string()
    };
    if path == "." {
        format!("the request body has the {what}")
    } else {
        format!("field `{path}`: {what}")
    }
}

/// A query string (`?page=2&count=30`).
pub struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|e: QueryRejection| {
                let text = e.body_text();
                let reason = text
                    .strip_prefix("Failed to deserialize query string: ")
                    .unwrap_or(&text);
                ApiError::bad_request_code(
                    "invalid_query",
                    format!("invalid query string: {reason}"),
                )
            })
    }
}

/// Path parameters (`/sessions/{id}`).
pub struct Path<T>(pub T);

impl<S, T> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|e: PathRejection| {
                if e.status().is_server_error() {
                    ApiError::internal("internal_error", "the route is misconfigured")
                } else {
                    let text = e.body_text();
                    let reason = text.strip_prefix("Invalid URL: ").unwrap_or(&text);
                    ApiError::bad_request_code("invalid_path", format!("invalid path: {reason}"))
                }
            })
    }
}
