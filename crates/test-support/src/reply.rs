//! Scripted replies and their rendering into vendor-shaped SSE chunks.

use serde_json::{Value, json};
use std::time::Duration;

/// Which vendor's chunk shape a scripted reply is rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// OpenAI: tool-call fragments with `index`, finish chunk, then a usage-only chunk.
    #[default]
    OpenAi,
    /// vLLM / llama.cpp style: tool-call fragments without `index` (continuations carry no id),
    /// usage and `timings` in the finish chunk.
    NoIndex,
    /// DeepSeek reasoner style: `reasoning_content` deltas before the content, `null` fields,
    /// usage with `prompt_cache_hit_tokens` in the finish chunk.
    Reasoning,
}

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct MockToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

#[derive(Debug, Clone)]
pub(crate) enum Body {
    Script {
        text: String,
        calls: Vec<MockToolCall>,
    },
    /// Each string is one `data:` payload.
    RawSse(Vec<String>),
    /// Exact bytes, one write per segment.
    RawBytes(Vec<Vec<u8>>),
    Status {
        code: u16,
        body: String,
    },
    /// The request body as received, posted to `{base_url}/chat/completions` of a real server;
    /// its status, content type and bytes are relayed as they arrive.
    Forward {
        base_url: String,
    },
}

/// How a stream is cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    /// After n writes, send nothing more and keep the connection open.
    Stall(usize),
    /// After n writes, abort the connection (no terminating chunk).
    Drop(usize),
}

/// What the mock server answers to one request.
#[derive(Debug, Clone)]
pub struct MockReply {
    pub(crate) body: Body,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) chunk_delay: Option<Duration>,
    pub(crate) cut: Option<Cut>,
    dialect: Dialect,
    reasoning: Option<String>,
    usage: Option<(u64, u64)>,
    finish_reason: Option<String>,
}

/// Default usage of scripted replies: (prompt, completion) tokens.
pub const DEFAULT_USAGE: (u64, u64) = (10, 5);
/// Reasoning text of [`Dialect::Reasoning`] replies that set none.
pub const DEFAULT_REASONING: &str = "Let me think about this.";

impl MockReply {
    fn new(body: Body) -> Self {
        Self {
            body,
            headers: Vec::new(),
            chunk_delay: None,
            cut: None,
            dialect: Dialect::OpenAi,
            reasoning: None,
            usage: Some(DEFAULT_USAGE),
            finish_reason: None,
        }
    }

    /// Text streamed in several chunks, then the finish, usage and `[DONE]`.
    pub fn text(s: &str) -> Self {
        Self::text_and_tool_calls(s, &[])
    }

    /// Tool calls (arguments fragmented over several chunks), finish reason `tool_calls`.
    pub fn tool_calls(calls: &[(&str, &str, Value)]) -> Self {
        Self::text_and_tool_calls("", calls)
    }

    pub fn text_and_tool_calls(text: &str, calls: &[(&str, &str, Value)]) -> Self {
        Self::new(Body::Script {
            text: text.to_owned(),
            calls: calls
                .iter()
                .map(|(id, name, arguments)| MockToolCall {
                    id: (*id).to_owned(),
                    name: (*name).to_owned(),
                    arguments: arguments.clone(),
                })
                .collect(),
        })
    }

    pub fn dialect(mut self, d: Dialect) -> Self {
        self.dialect = d;
        self
    }

    /// Reasoning text streamed before the content (`reasoning_content` in the reasoning dialect,
    /// `reasoning` otherwise).
    pub fn reasoning(mut self, text: &str) -> Self {
        self.reasoning = Some(text.to_owned());
        self
    }

    /// Usage reported by a scripted reply.
    pub fn usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.usage = Some((prompt_tokens, completion_tokens));
        self
    }

    /// A scripted reply that reports no usage at all.
    pub fn without_usage(mut self) -> Self {
        self.usage = None;
        self
    }

    /// The finish reason a scripted reply ends with (default: `stop`, or `tool_calls` when it
    /// calls tools), e.g. `length` for an answer cut by the output limit.
    pub fn finish_reason(mut self, reason: &str) -> Self {
        self.finish_reason = Some(reason.to_owned());
        self
    }

    /// HTTP 200, `text/event-stream`, and a body that ends without a single event: what
    /// llama-cpp-python answers to a streamed request over its context size.
    pub fn empty_stream() -> Self {
        Self::raw_bytes(Vec::new())
    }

    /// Exact `data:` payloads, each sent as `data: <payload>\n\n`; nothing is added (include
    /// `"[DONE]"` yourself if wanted).
    pub fn raw_sse(chunks: Vec<String>) -> Self {
        Self::new(Body::RawSse(chunks))
    }

    /// Exact body bytes, one write per segment.
    pub fn raw_bytes(segments: Vec<Vec<u8>>) -> Self {
        Self::new(Body::RawBytes(segments))
    }

    /// A recorded fixture (see [`crate::FIXTURES`]), one event per write.
    ///
    /// # Panics
    /// On an unknown fixture name: a test bug, reported with the names that exist.
    pub fn fixture(name: &str) -> Self {
        match crate::fixtures::fixture(name) {
            Some(bytes) => Self::raw_bytes(crate::fixtures::split_events(bytes)),
            None => {
                let names: Vec<&str> = crate::FIXTURES.iter().map(|f| f.name).collect();
                panic!("unknown fixture {name:?}; known: {names:?}")
            }
        }
    }

    /// A plain HTTP answer (errors, or a non-streamed JSON body). A scripted reply
    /// ([`MockReply::text`], [`MockReply::tool_calls`]) needs none of this for a request with
    /// `stream: false`: it is rendered as a `chat.completion` JSON body then, as a server would. `Content-Type` is JSON when the
    /// body parses as JSON, else text.
    /// Relays the request to a real OpenAI-compatible server (`base_url` ends in `/v1`): script
    /// the first replies, then let a real model answer the rest of the conversation.
    pub fn forward_to(base_url: &str) -> Self {
        Self::new(Body::Forward {
            base_url: base_url.trim_end_matches('/').to_owned(),
        })
    }

    pub fn status(code: u16, body: &str) -> Self {
        Self::new(Body::Status {
            code,
            body: body.to_owned(),
        })
    }

    /// An extra response header, e.g. `Retry-After`.
    pub fn header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.to_owned(), v.to_owned()));
        self
    }

    /// Delay before every write after the first.
    pub fn chunk_delay(mut self, d: Duration) -> Self {
        self.chunk_delay = Some(d);
        self
    }

    /// Send `n_chunks` writes, then hang until the client goes away.
    pub fn stall_after(mut self, n_chunks: usize) -> Self {
        self.cut = Some(Cut::Stall(n_chunks));
        self
    }

    /// Send `n_chunks` writes, then abort the connection mid-body.
    pub fn drop_after(mut self, n_chunks: usize) -> Self {
        self.cut = Some(Cut::Drop(n_chunks));
        self
    }

    /// The writes of a streamed reply (empty for [`MockReply::status`]).
    pub fn frames(&self) -> Vec<Vec<u8>> {
        match &self.body {
            Body::Script { text, calls } => self
                .render_script(text, calls)
                .into_iter()
                .map(|p| format!("data: {p}\n\n").into_bytes())
                .collect(),
            Body::RawSse(payloads) => payloads
                .iter()
                .map(|p| format!("data: {p}\n\n").into_bytes())
                .collect(),
            Body::RawBytes(segments) => segments.clone(),
            Body::Status { .. } | Body::Forward { .. } => Vec::new(),
        }
    }

    /// The `data:` payloads of a scripted reply, `[DONE]` included.
    fn render_script(&self, text: &str, calls: &[MockToolCall]) -> Vec<String> {
        let mut out = Vec::new();
        let dialect = self.dialect;
        let reasoning = match (&self.reasoning, dialect) {
            (Some(r), _) => Some(r.as_str()),
            (None, Dialect::Reasoning) => Some(DEFAULT_REASONING),
            (None, _) => None,
        };
        let chunk = |delta: Value, finish: Option<&str>, extra: Option<(&str, Value)>| {
            let mut c = match dialect {
                Dialect::OpenAi => json!({
                    "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_741_570_000,
                    "model": "mock-model", "system_fingerprint": "fp_mock",
                    "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
                }),
                Dialect::NoIndex => json!({
                    "choices": [{"finish_reason": finish, "index": 0, "delta": delta}],
                    "created": 1_741_570_000, "id": "chatcmpl-mock", "model": "mock-model",
                    "system_fingerprint": "b0000-mock", "object": "chat.completion.chunk",
                }),
                Dialect::Reasoning => json!({
                    "id": "mock-0000", "object": "chat.completion.chunk", "created": 1_741_570_000,
                    "model": "deepseek-reasoner", "system_fingerprint": "fp_mock_prod",
                    "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
                }),
            };
            if let (Some((k, v)), Some(map)) = (extra, c.as_object_mut()) {
                map.insert(k.to_owned(), v);
            }
            c.to_string()
        };
        let first = match dialect {
            Dialect::OpenAi => json!({"role": "assistant", "content": "", "refusal": null}),
            Dialect::NoIndex => json!({"role": "assistant", "content": null}),
            Dialect::Reasoning => {
                json!({"role": "assistant", "content": null, "reasoning_content": ""})
            }
        };
        out.push(chunk(first, None, None));
        if let Some(r) = reasoning {
            for piece in pieces(r, 3) {
                let delta = match dialect {
                    Dialect::Reasoning => json!({"content": null, "reasoning_content": piece}),
                    Dialect::OpenAi | Dialect::NoIndex => json!({"reasoning": piece}),
                };
                out.push(chunk(delta, None, None));
            }
        }
        for piece in pieces(text, 4) {
            let delta = match dialect {
                Dialect::Reasoning => json!({"content": piece, "reasoning_content": null}),
                Dialect::OpenAi | Dialect::NoIndex => json!({"content": piece}),
            };
            out.push(chunk(delta, None, None));
        }
        for (index, call) in calls.iter().enumerate() {
            let args = call.arguments.to_string();
            let arg_pieces = pieces(&args, 3);
            match dialect {
                Dialect::OpenAi | Dialect::Reasoning => {
                    out.push(chunk(
                        json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                            "function": {"name": call.name, "arguments": ""}}]}),
                        None,
                        None,
                    ));
                    for piece in arg_pieces {
                        out.push(chunk(
                            json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                            None,
                            None,
                        ));
                    }
                }
                Dialect::NoIndex => {
                    let mut rest = arg_pieces.into_iter();
                    let head = rest.next().unwrap_or_default();
                    out.push(chunk(
                        json!({"tool_calls": [{"id": call.id, "type": "function",
                            "function": {"name": call.name, "arguments": head}}]}),
                        None,
                        None,
                    ));
                    for piece in rest {
                        out.push(chunk(
                            json!({"tool_calls": [{"function": {"arguments": piece}}]}),
                            None,
                            None,
                        ));
                    }
                }
            }
        }
        let finish = self.finish(calls);
        let usage = self.usage.map(|(p, c)| (p, c, p + c));
        match dialect {
            Dialect::OpenAi => {
                out.push(chunk(json!({}), Some(finish), None));
                if let Some((p, c, t)) = usage {
                    out.push(
                        json!({
                            "id": "chatcmpl-mock", "object": "chat.completion.chunk",
                            "created": 1_741_570_000, "model": "mock-model", "choices": [],
                            "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": t,
                                "prompt_tokens_details": {"cached_tokens": 0}},
                        })
                        .to_string(),
                    );
                }
            }
            Dialect::NoIndex => {
                let extra = usage.map(|(p, c, t)| {
                    (
                        "usage",
                        json!({"completion_tokens": c, "prompt_tokens": p, "total_tokens": t}),
                    )
                });
                out.push(chunk(json!({}), Some(finish), extra));
            }
            Dialect::Reasoning => {
                let extra = usage.map(|(p, c, t)| {
                    (
                        "usage",
                        json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": t,
                            "prompt_tokens_details": {"cached_tokens": 0},
                            "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": p}),
                    )
                });
                out.push(chunk(
                    json!({"content": "", "reasoning_content": null}),
                    Some(finish),
                    extra,
                ));
            }
        }
        out.push("[DONE]".to_owned());
        out
    }
}

impl MockReply {
    fn finish<'s>(&'s self, calls: &[MockToolCall]) -> &'s str {
        match &self.finish_reason {
            Some(f) => f,
            None if calls.is_empty() => "stop",
            None => "tool_calls",
        }
    }

    /// A scripted reply as one non-streamed `chat.completion` body; `None` for other replies.
    pub fn json_body(&self) -> Option<String> {
        let Body::Script { text, calls } = &self.body else {
            return None;
        };
        let mut message = json!({
            "role": "assistant",
            "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) },
        });
        if !calls.is_empty() {
            message["tool_calls"] = calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments.to_string()}})
                })
                .collect();
        }
        let reasoning = match (&self.reasoning, self.dialect) {
            (Some(r), _) => Some(r.as_str()),
            (None, Dialect::Reasoning) => Some(DEFAULT_REASONING),
            (None, _) => None,
        };
        if let Some(r) = reasoning {
            let key = match self.dialect {
                Dialect::Reasoning => "reasoning_content",
                Dialect::OpenAi | Dialect::NoIndex => "reasoning",
            };
            message[key] = json!(r);
        }
        let mut body = json!({
            "id": "chatcmpl-mock", "object": "chat.completion", "created": 1_741_570_000,
            "model": "mock-model",
            "choices": [{"index": 0, "message": message, "logprobs": null,
                "finish_reason": self.finish(calls)}],
        });
        if let Some((p, c)) = self.usage {
            body["usage"] =
                json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c});
        }
        Some(body.to_string())
    }
}

/// Splits text into up to `n` non-empty pieces on char boundaries.
pub fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(n.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}
