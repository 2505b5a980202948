//! The HTTP side of the streamable HTTP client transport, on the workspace's reqwest 0.12.
//!
//! rmcp's transport worker owns the protocol (JSON-RPC, the session's life, SSE resumption and
//! re-initialising an expired session) and asks a [`StreamableHttpClient`] for HTTP exchanges
//! only. rmcp's own client of that trait needs reqwest 0.13, a second HTTP stack next to ours;
//! this one is the same contract on 0.12:
//!
//! - every POST carries `Accept: application/json, text/event-stream`, the session id once there
//!   is one, and the headers the worker passes (the configured ones, e.g. `Authorization`, and
//!   the negotiated `MCP-Protocol-Version`);
//! - an answer is JSON (read whole, at most `max_json_response_size` bytes) or an SSE stream
//!   (each event at most `max_sse_event_size` bytes, counted before parsing); a 401/403 is a
//!   plain words "the server refused the credentials" error, since the host does no OAuth;
//! - GET opens the server's own event stream (405 = the server has none), DELETE ends the
//!   session;
//! - redirects are not followed: one would carry the configured credentials elsewhere.

use bytes::Bytes;
use futures_util::stream::{BoxStream, Stream, StreamExt};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    HttpStatusError, SseError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";
/// How much of a refusal's body an error message quotes (the rest is dropped unread).
const QUOTED_BODY: usize = 300;

type HttpError = StreamableHttpError<reqwest::Error>;
type Events = BoxStream<'static, Result<Sse, SseError>>;

/// An HTTP client for one server's transport (cheap to clone: reqwest shares its pool).
#[derive(Clone)]
pub(crate) struct HttpClient {
    http: reqwest::Client,
}

impl HttpClient {
    pub(crate) fn new(connect_timeout: Duration) -> Result<Self, String> {
        reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            // A reused connection whose last SSE answer was dropped before its final chunk
            // stalls the next request by a delayed ACK (~40 ms each, measured in the `mcp`
            // bench); a fresh loopback or LAN connection costs far less.
            .pool_max_idle_per_host(0)
            .tcp_nodelay(true)
            .build()
            .map(|http| Self { http })
            .map_err(|e| format!("the HTTP client could not be built: {e}"))
    }

    fn request(
        &self,
        method: reqwest::Method,
        uri: &str,
        accept: &'static str,
        session: Option<&str>,
        bearer: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> reqwest::RequestBuilder {
        // The configured names never clash with these (the configuration refuses reserved names).
        let mut request = self
            .http
            .request(method, uri)
            .header(header::ACCEPT, accept);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        if let Some(id) = session {
            request = request.header(SESSION_ID, id);
        }
        request
    }
}

/// Whether a `Content-Type` names `expected` (parameters and case aside).
fn is_media(headers: &HeaderMap, expected: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(expected))
}

fn content_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// The whole body, refused once it passes `limit` bytes (before anything is parsed).
async fn read_limited(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, HttpError> {
    let too_large = || StreamableHttpError::ResponseBodyTooLarge { max_size: limit };
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(StreamableHttpError::Client)?
    {
        if chunk.len() > limit - body.len() {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// At most `limit` bytes of a body, for an error message; the rest is never read.
async fn read_prefix(mut response: reqwest::Response, limit: usize) -> String {
    let mut body = Vec::new();
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = limit - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// A refusal's words: the status, and what the server said, shortened.
fn refusal(status: StatusCode, body: &str, hint: &str) -> HttpError {
    let said: String = body.trim().chars().take(QUOTED_BODY).collect();
    let said = if said.is_empty() {
        String::new()
    } else {
        format!(" (the server said: {said})")
    };
    StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!("HTTP {status}{hint}{said}")))
}

const CREDENTIALS_HINT: &str =
    ": the server refused the credentials; check the headers configured for this server";

/// 429 and 5xx keep only their status and `Retry-After` (rmcp classifies them).
fn status_error(status: StatusCode, headers: &HeaderMap) -> Option<HttpStatusError> {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let retry_after = headers
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Some(HttpStatusError::new(status.as_u16(), retry_after))
}

/// The body as SSE events, each refused once it passes `limit` bytes. The count is made on the
/// raw bytes (a blank line ends an event), so an endless event is cut off before the parser
/// buffers it.
fn events(response: reqwest::Response, limit: usize) -> Events {
    SseStream::from_bytes_stream(limit_events(response.bytes_stream(), limit)).boxed()
}

fn limit_events(
    body: impl Stream<Item = Result<Bytes, reqwest::Error>> + Send + 'static,
    limit: usize,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let mut event_len = 0usize;
    let mut at_line_start = true;
    let mut after_cr = false;
    let mut failed = false;
    body.map(move |chunk| {
        if failed {
            return Err(std::io::Error::other("the event stream was cut off"));
        }
        let chunk = chunk.map_err(std::io::Error::other)?;
        for &b in chunk.iter() {
            if after_cr && b == b'\n' {
                after_cr = false;
                continue;
            }
            after_cr = b == b'\r';
            if b == b'\n' || b == b'\r' {
                if at_line_start {
                    event_len = 0;
                }
                at_line_start = true;
            } else {
                at_line_start = false;
                event_len += 1;
                if event_len > limit {
                    failed = true;
                    return Err(std::io::Error::other(format!(
                        "an event of the server's stream passed {limit} bytes"
                    )));
                }
            }
        }
        Ok(chunk)
    })
}

impl StreamableHttpClient for HttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let with_session = session_id.is_some();
        let response = self
            .request(
                reqwest::Method::POST,
                &uri,
                "application/json, text/event-stream",
                session_id.as_deref(),
                auth_header,
                custom_headers,
            )
            .json(&message)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        let status = response.status();
        let headers = response.headers().clone();
        // Notifications and replies leave nothing waiting on this response.
        let awaits_nothing = !matches!(message, ClientJsonRpcMessage::Request(_));
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            let said = read_prefix(response, limits.max_error_response_size.min(QUOTED_BODY)).await;
            return Err(refusal(status, &said, CREDENTIALS_HINT));
        }
        if status == StatusCode::NOT_FOUND && with_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        let session = headers
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let json = is_media(&headers, JSON);
        if !status.is_success() {
            // A JSON-RPC error in a failure's body is the server's answer to the request.
            if json && status != StatusCode::TOO_MANY_REQUESTS {
                let body = match read_limited(response, limits.max_json_response_size).await {
                    Ok(body) => body,
                    Err(too_large) => {
                        return Err(status_error(status, &headers)
                            .map(StreamableHttpError::from)
                            .unwrap_or(too_large));
                    }
                };
                if let Ok(error @ ServerJsonRpcMessage::Error(_)) =
                    serde_json::from_slice::<ServerJsonRpcMessage>(&body)
                {
                    return Ok(StreamableHttpPostResponse::Json(error, session));
                }
                if let Some(error) = status_error(status, &headers) {
                    return Err(error.into());
                }
                let cut = body.len().min(limits.max_error_response_size);
                return Err(refusal(status, &String::from_utf8_lossy(&body[..cut]), ""));
            }
            if let Some(error) = status_error(status, &headers) {
                return Err(error.into());
            }
            let said = read_prefix(response, limits.max_error_response_size).await;
            return Err(refusal(status, &said, ""));
        }
        if is_media(&headers, EVENT_STREAM) {
            return Ok(StreamableHttpPostResponse::Sse(
                events(response, limits.max_sse_event_size),
                session,
            ));
        }
        if json {
            let body = read_limited(response, limits.max_json_response_size).await?;
            if body.is_empty() && awaits_nothing {
                return Ok(StreamableHttpPostResponse::Accepted);
            }
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(reply) => Ok(StreamableHttpPostResponse::Json(reply, session)),
                Err(_) if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    format!("the server's JSON answer is not a JSON-RPC message: {e}"),
                ))),
            };
        }
        // Some servers answer a notification with an empty 200 and no type.
        if awaits_nothing {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(content_type(
            &headers,
        )))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        let response = self
            .request(
                reqwest::Method::DELETE,
                &uri,
                "application/json, text/event-stream",
                Some(&session_id),
                auth_header,
                custom_headers,
            )
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        let status = response.status();
        // 405: the server ends sessions itself; 404: it already forgot this one.
        if status.is_success()
            || matches!(
                status,
                StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_FOUND
            )
        {
            return Ok(());
        }
        Err(refusal(status, "", ""))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Events, HttpError> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<Events, HttpError> {
        let mut request = self.request(
            reqwest::Method::GET,
            &uri,
            EVENT_STREAM,
            session_id.as_deref(),
            auth_header,
            custom_headers,
        );
        if let Some(id) = last_event_id {
            request = request.header(LAST_EVENT_ID, id);
        }
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            let said = read_prefix(response, QUOTED_BODY).await;
            return Err(refusal(status, &said, CREDENTIALS_HINT));
        }
        if let Some(error) = status_error(status, response.headers()) {
            return Err(error.into());
        }
        if !status.is_success() {
            let said = read_prefix(response, QUOTED_BODY).await;
            return Err(refusal(status, &said, ""));
        }
        if !is_media(response.headers(), EVENT_STREAM) {
            return Err(StreamableHttpError::UnexpectedContentType(content_type(
                response.headers(),
            )));
        }
        Ok(events(response, max_sse_event_size))
    }
}
