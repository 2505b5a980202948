//! The HTTP side: one POST per attempt, retries before the first streamed byte, the non-streamed
//! fallback for a stream that said nothing, one refit of a refused output limit, cancellation.

use crate::catalogue::takes_max_completion_tokens;
use crate::classify::{classify_http, parse_retry_after};
use crate::decoder::{StreamDecoder, decode_completion_json};
use crate::error::{ModelError, NetworkFailure, Result, scrub};
use crate::output_limit::{OutputLimit, refit};
use crate::wire::{BodyOptions, OutputLimitParam};
use crate::{ChatRequest, Completion, ModelConfig, StreamEvent, effective_max_output_tokens, wire};
use bytes::Bytes;
use rand::Rng;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// Error bodies are read only this far: enough for the message, bounded against hostile servers.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// Non-streamed JSON answers are read only this far.
const MAX_JSON_BODY: usize = 32 * 1024 * 1024;
pub const BACKOFF_BASE: Duration = Duration::from_millis(500);
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// Idle connections to the model server kept for reuse after a turn.
const IDLE_CONNECTIONS: usize = 16;

/// A cheap-to-clone client for one configured model endpoint.
#[derive(Clone)]
pub struct ModelClient {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: ModelConfig,
    api_key: Option<String>,
    http: reqwest::Client,
    url: reqwest::Url,
    /// `scheme://host:port` of the endpoint: what error messages name (never userinfo or query).
    endpoint: String,
}

impl std::fmt::Debug for ModelClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelClient")
            .field("endpoint", &self.inner.endpoint)
            .field("model", &self.inner.cfg.model)
            .finish_non_exhaustive()
    }
}

/// How one attempt ended badly.
enum AttemptError {
    /// Nothing of a 200 stream arrived and the error class allows another try.
    Retry(ModelError),
    Fail(ModelError),
    /// HTTP 200 and an event stream that ended without a single event: the server told nothing
    /// (llama-cpp-python answers an over-context request so), and nothing reached the caller.
    EmptyStream,
}

impl AttemptError {
    fn classified(e: ModelError) -> Self {
        if e.is_retryable() {
            AttemptError::Retry(e)
        } else {
            AttemptError::Fail(e)
        }
    }
}

impl ModelClient {
    /// The URL requests are sent to.
    // public for the crate's tests (tests/all.rs); not part of the API
    #[doc(hidden)]
    pub fn endpoint_url(&self) -> &str {
        self.inner.url.as_str()
    }

    pub fn new(cfg: ModelConfig) -> Result<Self> {
        let trimmed = cfg.base_url.trim().trim_end_matches('/');
        let config_err = |what: &str| ModelError::Config {
            message: format!("invalid LLM base URL: {what}"),
        };
        let base = reqwest::Url::parse(trimmed).map_err(|e| config_err(&e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(config_err("the scheme must be http or https"));
        }
        let host = base
            .host_str()
            .ok_or_else(|| config_err("no host"))?
            .to_owned();
        let endpoint = match base.port() {
            Some(port) => format!("{}://{host}:{port}", base.scheme()),
            None => format!("{}://{host}", base.scheme()),
        };
        let url = reqwest::Url::parse(&format!("{trimmed}/chat/completions"))
            .map_err(|e| config_err(&e.to_string()))?;
        let http = reqwest::Client::builder()
            .connect_timeout(cfg.connect_timeout)
            // A burst of concurrent turns opens a connection each; unbounded, every one of them
            // (its buffers, and TLS state to a provider) would stay open for the pool's idle
            // timeout after the burst. Keeping a few covers a steady load's reuse.
            .pool_max_idle_per_host(IDLE_CONNECTIONS)
            .build()
            .map_err(|e| ModelError::Config {
                message: format!(
                    "could not build the HTTP client: {}",
                    scrub(&e.to_string(), None)
                ),
            })?;
        let api_key = cfg
            .api_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_owned);
        Ok(Self {
            inner: Arc::new(Inner {
                cfg,
                api_key,
                http,
                url,
                endpoint,
            }),
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.inner.cfg
    }

    /// The catalogue profile of the configured model.
    pub fn profile(&self) -> crate::ModelProfile {
        crate::model_profile(&self.inner.cfg.model)
    }

    /// Sends the request and streams the answer. Text and reasoning reach `on_event` as they
    /// arrive; the assembled result is returned at the end.
    ///
    /// Retries (up to `max_retries`, jittered exponential backoff or the provider's `Retry-After`)
    /// on rate limits, 5xx and transport failures — but only while no byte of a 200 stream has
    /// arrived: after that a failure is final, so the caller never sees text twice. Never retried:
    /// context overflow, validation errors, auth (see [`ModelError::is_retryable`]).
    ///
    /// A 200 stream that ends without any event is asked again once *without* streaming, to learn
    /// the real reason (llama-cpp-python then answers 400 `context_length_exceeded`) or to get the
    /// answer as one JSON body (its text then reaches `on_event` as one event). An output limit the
    /// server refuses — wrong parameter name, above the model's limit, or no room beside the prompt
    /// — is refitted from the refusal and sent once more. A fired `cancel` ends the call at once
    /// with [`ModelError::Cancelled`].
    pub async fn stream_chat(
        &self,
        req: &ChatRequest<'_>,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Completion> {
        self.call(req, true, cancel, on_event).await
    }

    /// [`ModelClient::stream_chat`] without streaming: one `chat.completion` JSON answer (its text
    /// reaches `on_event` as one event at the end). Same retries and classification.
    pub async fn complete_chat(
        &self,
        req: &ChatRequest<'_>,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Completion> {
        self.call(req, false, cancel, on_event).await
    }

    async fn call(
        &self,
        req: &ChatRequest<'_>,
        stream: bool,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Completion> {
        if cancel.is_cancelled() {
            return Err(ModelError::Cancelled);
        }
        let cfg = &self.inner.cfg;
        // Checked here rather than in `new` so a host can start before a model is configured.
        if cfg.model.trim().is_empty() {
            return Err(ModelError::Config {
                message: "no model name configured (LLM_MODEL)".to_owned(),
            });
        }
        let mut plan = Plan {
            stream,
            limit: OutputLimit {
                tokens: effective_max_output_tokens(cfg),
                param: if takes_max_completion_tokens(&cfg.model) {
                    OutputLimitParam::MaxCompletionTokens
                } else {
                    OutputLimitParam::MaxTokens
                },
            },
            fell_back: false,
            refitted: false,
        };
        let mut body = self.body(req, &plan)?;
        let mut retries = 0u32;
        loop {
            let err = match self
                .attempt(body.clone(), plan.stream, cancel, on_event)
                .await
            {
                Ok(completion) => return Ok(completion),
                Err(AttemptError::EmptyStream) if !plan.fell_back => {
                    tracing::warn!(
                        endpoint = %self.inner.endpoint,
                        "model stream ended without any event; asking again without streaming"
                    );
                    plan.stream = false;
                    plan.fell_back = true;
                    body = self.body(req, &plan)?;
                    continue;
                }
                Err(AttemptError::EmptyStream) => {
                    return Err(ModelError::Network {
                        failure: NetworkFailure::Interrupted,
                        message: format!(
                            "{} answered HTTP 200 with nothing in it, streamed and not",
                            self.inner.endpoint
                        ),
                    });
                }
                Err(AttemptError::Fail(e)) => {
                    if !plan.refitted
                        && let Some(limit) = refit(&e, plan.limit)
                    {
                        tracing::warn!(
                            code = e.code(),
                            "model refused the output limit; resending with {} = {:?}: {e}",
                            limit.param.as_str(),
                            limit.tokens
                        );
                        plan.limit = limit;
                        plan.refitted = true;
                        body = self.body(req, &plan)?;
                        continue;
                    }
                    return Err(e);
                }
                Err(AttemptError::Retry(e)) => e,
            };
            if retries >= cfg.max_retries {
                return Err(err);
            }
            let delay = err.retry_after().unwrap_or_else(|| backoff(retries));
            tracing::warn!(
                code = err.code(),
                retry = retries + 1,
                delay_ms = delay.as_millis() as u64,
                "model call failed, retrying: {err}"
            );
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(ModelError::Cancelled),
                _ = tokio::time::sleep(delay) => {}
            }
            retries += 1;
        }
    }

    fn body(&self, req: &ChatRequest<'_>, plan: &Plan) -> Result<Bytes> {
        let cfg = &self.inner.cfg;
        let opts = BodyOptions {
            model: &cfg.model,
            temperature: cfg.temperature,
            max_output_tokens: plan.limit.tokens,
            output_limit_param: plan.limit.param,
            stream: plan.stream,
        };
        wire::request_body(&opts, req)
            .map(Bytes::from)
            .map_err(|e| ModelError::Config {
                message: format!("could not serialise the request: {e}"),
            })
    }

    async fn attempt(
        &self,
        body: Bytes,
        stream: bool,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> std::result::Result<Completion, AttemptError> {
        let inner = &self.inner;
        let idle = inner.cfg.idle_timeout;
        let key = inner.api_key.as_deref();
        let mut request = inner
            .http
            .post(inner.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(
                ACCEPT,
                if stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            )
            .body(body);
        if let Some(key) = key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                AttemptError::Fail(ModelError::Config {
                    message: "the API key contains characters not allowed in an HTTP header"
                        .to_owned(),
                })
            })?;
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        let sent = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(AttemptError::Fail(ModelError::Cancelled)),
            r = tokio::time::timeout(idle, request.send()) => r,
        };
        let mut resp = match sent {
            Err(_) => {
                return Err(AttemptError::Retry(ModelError::Network {
                    failure: NetworkFailure::Timeout,
                    message: format!(
                        "no response from {} within {}s",
                        inner.endpoint,
                        idle.as_secs_f64()
                    ),
                }));
            }
            Ok(Err(e)) => {
                let (failure, message) = self.transport_error(e);
                return Err(AttemptError::Retry(ModelError::Network {
                    failure,
                    message,
                }));
            }
            Ok(Ok(resp)) => resp,
        };
        let status = resp.status();
        if !status.is_success() {
            let retry_after = resp
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, SystemTime::now()));
            let body = read_capped(&mut resp, cancel, idle, MAX_ERROR_BODY).await?;
            let e = classify_http(status.as_u16(), retry_after, &body, key);
            return Err(AttemptError::classified(e));
        }
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if content_type.contains("text/html") {
            // Typically a base URL pointing at a web UI or a login proxy instead of the API.
            let body = read_capped(&mut resp, cancel, idle, MAX_ERROR_BODY).await?;
            return Err(AttemptError::Fail(ModelError::BadResponse {
                status: Some(status.as_u16()),
                message: format!(
                    "expected an event stream from {}/chat/completions but got an HTML page \
                     (is LLM_BASE_URL the API root, e.g. ending in /v1?): {}",
                    inner.endpoint,
                    scrub(&body, key)
                ),
            }));
        }
        // Some servers ignore `stream` either way: the content type decides.
        if content_type.contains("application/json")
            || (!stream && !content_type.contains("text/event-stream"))
        {
            let body = read_capped(&mut resp, cancel, idle, MAX_JSON_BODY).await?;
            if body.trim().is_empty() {
                return Err(AttemptError::EmptyStream);
            }
            return decode_completion_json(&body, key, on_event).map_err(AttemptError::Fail);
        }
        let mut decoder = StreamDecoder::with_api_key(key);
        let mut got_byte = false;
        loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(AttemptError::Fail(ModelError::Cancelled)),
                r = tokio::time::timeout(idle, resp.chunk()) => r,
            };
            let fail_or_retry = move |e: ModelError| {
                if got_byte {
                    AttemptError::Fail(e)
                } else {
                    AttemptError::Retry(e)
                }
            };
            match next {
                Err(_) => {
                    return Err(fail_or_retry(ModelError::Network {
                        failure: NetworkFailure::Timeout,
                        message: format!(
                            "stream stalled: no data from {} for {}s",
                            inner.endpoint,
                            idle.as_secs_f64()
                        ),
                    }));
                }
                Ok(Err(e)) => {
                    let (_, detail) = self.transport_error(e);
                    return Err(fail_or_retry(ModelError::Network {
                        failure: NetworkFailure::Interrupted,
                        message: format!("stream ended before completion: {detail}"),
                    }));
                }
                Ok(Ok(None)) => {
                    decoder
                        .end_of_stream(on_event)
                        .map_err(AttemptError::Fail)?;
                    if !decoder.saw_event() {
                        // Comments and keep-alives at most: nothing reached the caller.
                        return Err(AttemptError::EmptyStream);
                    }
                    return decoder.finish(on_event).map_err(AttemptError::Fail);
                }
                Ok(Ok(Some(bytes))) => {
                    if bytes.is_empty() {
                        continue;
                    }
                    got_byte = true;
                    decoder.feed(&bytes, on_event).map_err(AttemptError::Fail)?;
                    if decoder.is_done() {
                        return Ok(decoder.into_completion());
                    }
                }
            }
        }
    }

    /// A transport error: what kind it was (reqwest's own classification: a failed connect —
    /// refused, no route, a name that did not resolve — is `Unreachable`) and scrubbed text
    /// naming the endpoint, never the full URL.
    fn transport_error(&self, e: reqwest::Error) -> (NetworkFailure, String) {
        let endpoint = &self.inner.endpoint;
        let (failure, what) = if e.is_connect() {
            (
                NetworkFailure::Unreachable,
                format!("could not connect to {endpoint}"),
            )
        } else if e.is_timeout() {
            (
                NetworkFailure::Timeout,
                format!("timed out talking to {endpoint}"),
            )
        } else if e.is_body() || e.is_decode() {
            (
                NetworkFailure::Interrupted,
                format!("response body from {endpoint} broke off"),
            )
        } else {
            (
                NetworkFailure::Interrupted,
                format!("request to {endpoint} failed"),
            )
        };
        let e = e.without_url();
        let mut causes: Vec<String> = Vec::new();
        let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(&e);
        while let Some(s) = source {
            let text = s.to_string();
            if !causes.iter().any(|c| c.contains(&text)) {
                causes.push(text);
            }
            source = s.source();
        }
        let message = if causes.is_empty() {
            what
        } else {
            format!("{what}: {}", causes.join(": "))
        };
        (failure, scrub(&message, self.inner.api_key.as_deref()))
    }
}

/// What the next request of one call looks like.
struct Plan {
    stream: bool,
    limit: OutputLimit,
    /// The non-streamed retry after an empty stream was made.
    fell_back: bool,
    /// The output limit was refitted after a refusal.
    refitted: bool,
}

/// Reads at most `cap` bytes of a body, honouring cancellation and the idle timeout. A body that
/// breaks off yields what arrived.
async fn read_capped(
    resp: &mut reqwest::Response,
    cancel: &CancellationToken,
    idle: Duration,
    cap: usize,
) -> std::result::Result<String, AttemptError> {
    let mut buf: Vec<u8> = Vec::new();
    while buf.len() < cap {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(AttemptError::Fail(ModelError::Cancelled)),
            r = tokio::time::timeout(idle, resp.chunk()) => r,
        };
        match next {
            Ok(Ok(Some(bytes))) => buf.extend_from_slice(&bytes),
            Ok(Ok(None)) | Ok(Err(_)) | Err(_) => break,
        }
    }
    buf.truncate(cap);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Full-jitter exponential backoff: uniform in `[0, min(cap, base · 2^retry)]`.
pub fn backoff(retry: u32) -> Duration {
    let ceiling = BACKOFF_BASE
        .saturating_mul(2u32.saturating_pow(retry.min(16)))
        .min(BACKOFF_CAP);
    let millis = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(rand::rng().random_range(0..=millis))
}
