//! The HTTP client for MoviePilot's REST API: sends a [`PreparedRequest`] with the caller's
//! bearer token and agent headers, and types what comes back — an [`ApiResponse`], an
//! [`ApiError`] (HTTP ≥ 400), or a transport failure split by whether the request may have
//! reached MoviePilot (`NotSent` vs `MaybeSent`).
//!
//! Proxies from the environment are ignored (MoviePilot is local; a proxy would see tokens).
//! Tokens are never logged, and errors are built from reqwest errors with the URL stripped.

use crate::catalogue::{DEFAULT_TIMEOUT, HttpMethod, LONG_TIMEOUT};
use crate::error::{GatewayError, Result};
use crate::identity::{self, BearerToken, LoginResult};
use crate::openapi::ServerApi;
use crate::request::PreparedRequest;
use crate::route;
use crate::server::{NoOpenApi, ServerKnowledge, ServerView};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde_json::{Map, Value};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const SESSION_HEADER: &str = "x-moviepilot-agent-session";
pub const CHANNEL_HEADER: &str = "x-moviepilot-agent-channel";
pub const SOURCE_HEADER: &str = "x-moviepilot-agent-source";

/// The sign-in route (OAuth2 password form).
pub const LOGIN_PATH: &str = "/api/v1/login/access-token";

/// FastAPI's OpenAPI document under MoviePilot's API prefix (no credentials needed).
pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";
/// The document is local and small; a server that takes longer is treated as unreachable.
const OPENAPI_TIMEOUT: Duration = Duration::from_secs(10);

/// Header values are ASCII; anything else (a Chinese channel name, a space) is percent-encoded,
/// as MoviePilot's own gateway does.
const HEADER_VALUE: &AsciiSet = &CONTROLS.add(b' ').add(b'%').add(b'"');

/// Where MoviePilot is and how long to wait for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayConfig {
    /// `MOVIEPILOT_URL`: scheme, host, port and an optional path prefix (`http://127.0.0.1:3001`).
    pub base_url: String,
    /// Per-request timeout (30 s).
    pub timeout: Duration,
    /// Timeout of long-running operations, i.e. `search.torrents` (300 s).
    pub long_timeout: Duration,
    /// Responses larger than this are not read to the end (the call is then `MaybeSent`).
    pub max_response_bytes: usize,
}

impl GatewayConfig {
    pub fn new(base_url: impl Into<String>) -> Self {
        GatewayConfig {
            base_url: base_url.into(),
            timeout: DEFAULT_TIMEOUT,
            long_timeout: LONG_TIMEOUT,
            max_response_bytes: 32 * 1024 * 1024,
        }
    }
}

/// Who a call is made for: the user's MoviePilot token and the agent context headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallContext {
    pub token: BearerToken,
    /// `X-MoviePilot-Agent-Session`.
    pub session_id: Option<String>,
    /// `X-MoviePilot-Agent-Channel` (`web`, `telegram`, …).
    pub channel: Option<String>,
    /// `X-MoviePilot-Agent-Source`.
    pub source: Option<String>,
}

impl CallContext {
    pub fn new(token: BearerToken) -> Self {
        CallContext {
            token,
            session_id: None,
            channel: None,
            source: None,
        }
    }
}

/// The collection headers of a list answer (`X-Result-Count`, `X-Total-Count`, `X-Page`,
/// `X-Page-Size`), each present only when MoviePilot sent it as an integer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Collection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_count: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_count: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
}

impl Collection {
    fn from_headers(headers: &HeaderMap) -> Option<Collection> {
        let read = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|s| s.trim().parse::<i64>().ok())
        };
        let c = Collection {
            result_count: read("x-result-count"),
            total_count: read("x-total-count"),
            page: read("x-page"),
            count: read("x-page-size"),
        };
        (c != Collection::default()).then_some(c)
    }
}

/// A 2xx answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiResponse {
    pub status: u16,
    pub collection: Option<Collection>,
    /// The JSON body (`{success, message, data}` for most routes, a bare list for some); a body
    /// that is not JSON is kept as a string, an empty one is `null`.
    pub payload: Value,
}

impl ApiResponse {
    /// The result JSON with `collection` as the first key, so it survives truncation of a long
    /// `data`. An object payload keeps its keys after it (a `collection` key of its own is
    /// replaced); a list or scalar payload goes under `data`. Without collection headers the
    /// payload is returned as it is.
    pub fn result_json(&self) -> Value {
        let Some(collection) = self.collection else {
            return self.payload.clone();
        };
        let mut out = Map::new();
        out.insert(
            "collection".into(),
            serde_json::to_value(collection).unwrap_or(Value::Null),
        );
        match &self.payload {
            Value::Object(m) => {
                for (k, v) in m {
                    if k != "collection" {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            other => {
                out.insert("data".into(), other.clone());
            }
        }
        Value::Object(out)
    }
}

/// MoviePilot answered with HTTP ≥ 400. `data` is its body (JSON, or the text as a string); the
/// `Display` text leaves the body out.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub operation_id: String,
    pub status: u16,
    pub data: Value,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MoviePilot answered {} with HTTP {}",
            self.operation_id, self.status
        )
    }
}

impl std::error::Error for ApiError {}

/// A MoviePilot REST client bound to one base URL. Cheap to clone (one connection pool).
#[derive(Clone)]
pub struct GatewayClient {
    http: reqwest::Client,
    /// `MOVIEPILOT_URL` without a trailing slash, for display and sign-in.
    base_url: String,
    /// The same, parsed: every request URL is this plus route segments.
    base: reqwest::Url,
    /// What is known of this server's routes (shared by all clones).
    server: Arc<ServerView>,
    timeout: Duration,
    long_timeout: Duration,
    max_response_bytes: usize,
}

impl fmt::Debug for GatewayClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayClient")
            .field("timeout", &self.timeout)
            .field("long_timeout", &self.long_timeout)
            .finish_non_exhaustive()
    }
}

fn check_base_url(raw: &str) -> Result<(String, reqwest::Url)> {
    let trimmed = raw.trim().trim_end_matches('/');
    let url = reqwest::Url::parse(trimmed).map_err(|_| GatewayError::InvalidBaseUrl {
        reason: "it does not parse as a URL",
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(GatewayError::InvalidBaseUrl {
            reason: "the scheme must be http or https",
        });
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(GatewayError::InvalidBaseUrl {
            reason: "it names no host",
        });
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(GatewayError::InvalidBaseUrl {
            reason: "it must not have a query or fragment",
        });
    }
    if url.cannot_be_a_base() {
        return Err(GatewayError::InvalidBaseUrl {
            reason: "it cannot take a path",
        });
    }
    Ok((trimmed.to_owned(), url))
}

/// The innermost cause of an error chain, for a short reason text (never holds the URL: callers
/// strip it first).
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// Sorts a reqwest failure into "certainly not sent" and "may have reached MoviePilot".
///
/// Only connection establishment (refused, unresolvable, unreachable, connect timeout) and
/// request building are certain: after the first byte went out, a timeout or a dropped
/// connection may follow a completed effect.
fn transport_error(operation_id: &str, e: reqwest::Error, timeout: Duration) -> GatewayError {
    let e = e.without_url();
    let cause = root_cause(&e);
    if e.is_builder() || e.is_connect() {
        let what = if e.is_builder() {
            "the request could not be built"
        } else if e.is_timeout() {
            "connecting timed out"
        } else {
            "could not connect to MoviePilot"
        };
        return GatewayError::NotSent {
            operation_id: operation_id.to_owned(),
            reason: format!("{what} ({cause})"),
        };
    }
    let what = if e.is_timeout() {
        format!("no complete answer within {} s", timeout.as_secs_f64())
    } else if e.is_body() || e.is_decode() {
        "the answer could not be read to the end".to_owned()
    } else {
        "the connection failed after the request was sent".to_owned()
    };
    GatewayError::MaybeSent {
        operation_id: operation_id.to_owned(),
        reason: format!("{what} ({cause})"),
    }
}

/// Whether an answer says the route itself does not exist: FastAPI's own 404 (`{"detail":
/// "Not Found"}`, unlike a handler's "record not found") and any 405.
fn route_missing(status: u16, payload: &Value) -> bool {
    match status {
        405 => true,
        404 => payload.get("detail").and_then(Value::as_str) == Some("Not Found"),
        _ => false,
    }
}

/// Whether a redirect answer to a call may come after the call took effect. 307/308 ask for the
/// same request elsewhere (FastAPI's trailing-slash redirect is a 307, before any handler
/// runs); 303 is the answer after a write, and 301/302 to a write are ambiguous. A read never
/// acts.
fn redirect_may_follow_an_effect(method: HttpMethod, status: u16) -> bool {
    method != HttpMethod::Get && matches!(status, 301..=303)
}

/// A redirect target as the model may read it: resolved against the request, without user
/// information, query or fragment (they may carry credentials), at most 200 characters.
fn shown_location(request: &reqwest::Url, location: &str) -> String {
    let shown = match request.join(location) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            let had_query = u.query().is_some();
            u.set_query(None);
            u.set_fragment(None);
            let same_origin = u.origin() == request.origin();
            let mut s = if same_origin {
                u.path().to_owned()
            } else {
                u.to_string()
            };
            if had_query {
                s.push_str("?…");
            }
            s
        }
        Err(_) => "an unreadable location".to_owned(),
    };
    shown.chars().take(200).collect()
}

fn header_text(v: &str) -> Option<HeaderValue> {
    let v = v.trim();
    if v.is_empty() {
        return None;
    }
    HeaderValue::from_str(&utf8_percent_encode(v, HEADER_VALUE).to_string()).ok()
}

fn payload_of(bytes: &[u8]) -> Value {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Value::Null;
    }
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

impl GatewayClient {
    /// A client for `config.base_url` (checked here: http/https with a host).
    pub fn new(config: GatewayConfig) -> Result<Self> {
        let (base_url, base) = check_base_url(&config.base_url)?;
        let http = reqwest::Client::builder()
            .no_proxy()
            // A redirect would repeat the call, bearer and all, at a path (or an origin) the
            // catalogue never named: FastAPI answers 307 to a trailing-slash variant, and a
            // resolved `..` once turned a plugin removal into a folder delete that way.
            .redirect(reqwest::redirect::Policy::none())
            // A connect timeout is reported as a connect error, i.e. certainly not sent.
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("moviepilot-agent/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|_| GatewayError::InvalidBaseUrl {
                reason: "the HTTP client could not be set up",
            })?;
        Ok(GatewayClient {
            http,
            base_url,
            base,
            server: Arc::new(ServerView::default()),
            timeout: config.timeout,
            long_timeout: config.long_timeout,
            max_response_bytes: config.max_response_bytes,
        })
    }

    /// The base URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// What is known of this server's routes; [`ServerView::current`] reads them when due.
    pub fn server(&self) -> &ServerView {
        &self.server
    }

    /// The server's knowledge, read again first when due (see [`ServerView::current`]).
    pub async fn server_knowledge(&self) -> Arc<ServerKnowledge> {
        self.server.current(self).await
    }

    /// Reads `GET /api/v1/openapi.json` (FastAPI serves it without credentials; none are
    /// sent) and parses it.
    pub async fn fetch_openapi(&self) -> std::result::Result<ServerApi, NoOpenApi> {
        let Some(url) = route::build_url(&self.base, OPENAPI_PATH, &[], None) else {
            return Err(NoOpenApi::NotServed("no URL for it".into()));
        };
        let timeout = self.timeout.min(OPENAPI_TIMEOUT);
        let response = self
            .http
            .get(url)
            .header(ACCEPT, "application/json")
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| NoOpenApi::Unreachable(root_cause(&e.without_url())))?;
        let status = response.status();
        if !status.is_success() {
            return Err(NoOpenApi::NotServed(format!(
                "GET {OPENAPI_PATH} answered HTTP {}",
                status.as_u16()
            )));
        }
        let body = self
            .read_body("openapi", response, timeout)
            .await
            .map_err(|e| NoOpenApi::Unreachable(e.to_string()))?;
        ServerApi::parse(&body).map_err(|e| NoOpenApi::NotServed(e.reason))
    }

    /// The timeout a request gets.
    pub fn timeout_for(&self, request: &PreparedRequest) -> Duration {
        if request.is_long_running() {
            self.long_timeout
        } else {
            self.timeout
        }
    }

    fn headers(&self, ctx: &CallContext) -> Result<HeaderMap> {
        let mut headers = HeaderMap::new();
        let mut auth =
            HeaderValue::from_str(&format!("Bearer {}", ctx.token.expose())).map_err(|_| {
                GatewayError::InvalidIdentity {
                    reason: "the MoviePilot token holds characters not allowed in a header",
                }
            })?;
        // Keeps the value out of any Debug output of the request.
        auth.set_sensitive(true);
        headers.insert(AUTHORIZATION, auth);
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        for (name, value) in [
            (SESSION_HEADER, &ctx.session_id),
            (CHANNEL_HEADER, &ctx.channel),
            (SOURCE_HEADER, &ctx.source),
        ] {
            if let Some(v) = value.as_deref().and_then(header_text) {
                headers.insert(HeaderName::from_static(name), v);
            }
        }
        Ok(headers)
    }

    /// Reads the body up to the size limit.
    async fn read_body(
        &self,
        operation_id: &str,
        mut response: reqwest::Response,
        timeout: Duration,
    ) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > self.max_response_bytes {
                        return Err(GatewayError::MaybeSent {
                            operation_id: operation_id.to_owned(),
                            reason: format!(
                                "the answer is larger than {} bytes and was not read",
                                self.max_response_bytes
                            ),
                        });
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => return Ok(body),
                Err(e) => return Err(transport_error(operation_id, e, timeout)),
            }
        }
    }

    /// The URL a prepared call goes to: the parsed base plus the route's segments (each value
    /// one percent-encoded segment) and the encoded query. Refused (`NotSent`) unless its path is
    /// exactly the request's route filled with its values.
    pub fn request_url(&self, request: &PreparedRequest) -> Result<reqwest::Url> {
        let not_sent = |reason: &str| GatewayError::NotSent {
            operation_id: request.operation_id().to_owned(),
            reason: reason.to_owned(),
        };
        let query = request.encoded_query();
        let url = route::build_url(
            &self.base,
            request.route(),
            request.path_values(),
            Some(&query),
        )
        .ok_or_else(|| not_sent("its route could not be built from the path parameters"))?;
        if !route::url_matches(&self.base, &url, request.route(), request.path_values()) {
            return Err(not_sent(&format!(
                "the built request did not match its route {}",
                request.route()
            )));
        }
        Ok(url)
    }

    /// Sends a prepared call for the user in `ctx`. A 2xx answer is `Ok`; HTTP ≥ 400 is
    /// `Err(GatewayError::Api)`; a 3xx is `Err(GatewayError::Redirected)` and is not followed;
    /// transport failures are `NotSent` or `MaybeSent`.
    pub async fn send(&self, request: &PreparedRequest, ctx: &CallContext) -> Result<ApiResponse> {
        let operation_id = request.operation_id();
        // Checked against what is known of the server now; no I/O here.
        let knowledge = self.server.knowledge();
        let request = &*knowledge
            .adapt(request)
            .map_err(GatewayError::Unavailable)?;
        let timeout = self.timeout_for(request);
        let url = self.request_url(request)?;
        let method = match request.method() {
            HttpMethod::Get => reqwest::Method::GET,
            HttpMethod::Post => reqwest::Method::POST,
            HttpMethod::Put => reqwest::Method::PUT,
            HttpMethod::Delete => reqwest::Method::DELETE,
            HttpMethod::Patch => reqwest::Method::PATCH,
        };
        let mut builder = self
            .http
            .request(method, url.clone())
            .headers(self.headers(ctx)?)
            .timeout(timeout);
        if let Some(body) = request.body() {
            builder = builder.json(body);
        }
        let started = Instant::now();
        let response = builder
            .send()
            .await
            .map_err(|e| transport_error(operation_id, e, timeout))?;
        let status = response.status().as_u16();
        if response.status().is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(|l| shown_location(&url, l));
            tracing::warn!(
                operation = operation_id,
                status,
                "moviepilot answered with a redirect; not followed"
            );
            return Err(GatewayError::Redirected {
                operation_id: operation_id.to_owned(),
                status,
                location,
                may_have_acted: redirect_may_follow_an_effect(request.method(), status),
            });
        }
        let collection = Collection::from_headers(response.headers());
        let body = self.read_body(operation_id, response, timeout).await?;
        tracing::debug!(
            operation = operation_id,
            status,
            bytes = body.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "moviepilot api call"
        );
        let payload = payload_of(&body);
        if route_missing(status, &payload) {
            // The table said the route exists (or there is none): read the routes again.
            self.server.mark_stale();
            return Err(GatewayError::RouteNotServed {
                operation_id: operation_id.to_owned(),
                status,
                server: knowledge.label(),
            });
        }
        if status >= 400 {
            return Err(GatewayError::Api(ApiError {
                operation_id: operation_id.to_owned(),
                status,
                data: payload,
            }));
        }
        Ok(ApiResponse {
            status,
            collection,
            payload,
        })
    }

    /// Signs in at MoviePilot's `POST /api/v1/login/access-token` with the OAuth2 password form.
    /// A wrong password and an unknown user both give `LoginRejected`.
    pub async fn login(&self, username: &str, password: &str) -> Result<LoginResult> {
        const OP: &str = "login";
        let url = route::build_url(&self.base, LOGIN_PATH, &[], None).ok_or_else(|| {
            GatewayError::NotSent {
                operation_id: OP.to_owned(),
                reason: "the sign-in URL could not be built".to_owned(),
            }
        })?;
        let response = self
            .http
            .post(url)
            .header(ACCEPT, "application/json")
            .form(&[("username", username), ("password", password)])
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| transport_error(OP, e, self.timeout))?;
        let status = response.status().as_u16();
        let body = self.read_body(OP, response, self.timeout).await?;
        match status {
            200..=299 => {
                let signed_in = identity::parse_login_answer(&body, username)?;
                // A sign-in is when a user meets this server again: read its routes anew.
                self.server.mark_stale();
                Ok(signed_in)
            }
            // 400/401: bad credentials (MoviePilot words the two cases differently; the text is
            // dropped so they cannot be told apart).
            400 | 401 => Err(GatewayError::LoginRejected),
            403 => Err(GatewayError::AccountDisabled),
            other => Err(GatewayError::LoginFailed { status: other }),
        }
    }
}
