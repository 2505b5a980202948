//! The scripted model: a loopback OpenAI-compatible server that answers a replay [`Script`]
//! response by response (streamed or not, as asked), so a trajectory runs through the real
//! host and its real model client. It records every request body it received.
//!
//! A summariser request of the host's compaction (its first message is the system message the
//! host's summariser opens with, given at start) is answered with the script's `summary` and
//! consumes no step: the replayed conversation goes on where it was, now over the compacted
//! context.

use crate::trajectory::{Script, resolve};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The model name the scripted server reports.
pub const SCRIPTED_MODEL: &str = "scripted-replay";

struct Inner {
    script: Script,
    /// The system message that marks a summariser request.
    summary_prompt: String,
    /// The system message that marks a subagent's request (empty: none does).
    subagent_prompt: String,
    next: usize,
    requests: Vec<Value>,
    /// Summariser requests answered (also in `requests`).
    summaries: usize,
    /// Time spent building answers (to subtract from host overhead).
    busy: Duration,
}

struct Shared(Mutex<Inner>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running scripted model; dropping it stops the server.
pub struct ScriptedModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl ScriptedModel {
    /// Serves `script`; a request whose first message is the system message `summary_prompt`
    /// is a summariser request.
    pub async fn start(
        script: Script,
        summary_prompt: impl Into<String>,
    ) -> std::io::Result<ScriptedModel> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared(Mutex::new(Inner {
            script,
            summary_prompt: summary_prompt.into(),
            subagent_prompt: String::new(),
            next: 0,
            requests: Vec::new(),
            summaries: 0,
            busy: Duration::ZERO,
        })));
        let router = Router::new()
            .route("/v1/chat/completions", post(answer))
            .route("/chat/completions", post(answer))
            .with_state(shared.clone());
        let stop = CancellationToken::new();
        let until = stop.clone();
        tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async move { until.cancelled().await })
                .await;
            if let Err(e) = served {
                tracing::warn!(error = %e, "scripted model stopped");
            }
        });
        Ok(ScriptedModel { addr, shared, stop })
    }

    /// Requests whose system message is `prompt` are a subagent's, answered from the script's
    /// `subagents`.
    pub fn set_subagent_prompt(&self, prompt: &str) {
        self.shared.lock().subagent_prompt = prompt.to_string();
    }

    /// `http://127.0.0.1:PORT/v1`, the base URL for the host's model client.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.lock().requests.clone()
    }

    /// How many of the requests were the host's summariser requests.
    pub fn summariser_requests(&self) -> usize {
        self.shared.lock().summaries
    }

    /// Time the server spent answering.
    pub fn busy(&self) -> Duration {
        self.shared.lock().busy
    }
}

/// The tool results the request carries, oldest first (JSON when they are JSON).
fn tool_results(body: &Value) -> Vec<Value> {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .map(|m| {
            let text = m.get("content").and_then(Value::as_str).unwrap_or_default();
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
        })
        .collect()
}

/// What the task message states that a trajectory may refer to: the page of a browser task
/// (`Page: <url>`, as `page_url`), whose port changes from run to run.
fn task_facts(body: &Value) -> Vec<Value> {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .filter_map(|m| m.get("content").and_then(Value::as_str))
        .flat_map(str::lines)
        .filter_map(|l| l.strip_prefix("Page: "))
        .map(|url| json!({"page_url": url.trim()}))
        .take(1)
        .collect()
}

/// Whether `body` is a summariser request: its first message is the summariser's instructions,
/// `summary_prompt`.
pub fn is_summariser_request(body: &Value, summary_prompt: &str) -> bool {
    opens_with(body, summary_prompt)
}

/// Whether the first message of `body` is the system message `prompt`.
fn opens_with(body: &Value, prompt: &str) -> bool {
    body.get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.first())
        .is_some_and(|m| {
            m.get("role").and_then(Value::as_str) == Some("system")
                && m.get("content").and_then(Value::as_str) == Some(prompt)
        })
}

/// A subagent's answer: its script by the task text, its step by the answers its own
/// transcript holds. The sessions its task grants count as a result it has seen (so
/// `{{session_id}}` names the granted terminal).
fn subagent_answer(script: &Script, body: &Value) -> (String, Vec<(String, String, String)>) {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let task = messages
        .iter()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|m| m.get("content").and_then(Value::as_str))
        .unwrap_or_default();
    let Some((k, child)) = script
        .subagents
        .iter()
        .enumerate()
        .find(|(_, c)| task.contains(&c.task_contains))
    else {
        return (
            "no scripted answer for this subagent task".into(),
            Vec::new(),
        );
    };
    let step = messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .count();
    let Some(s) = child.steps.get(step) else {
        return (child.final_text.clone(), Vec::new());
    };
    let mut results: Vec<Value> = granted_sessions(task)
        .into_iter()
        .map(|id| json!({"session_id": id}))
        .collect();
    results.extend(tool_results(body));
    let calls = s
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let args = resolve(&Value::Object(c.arguments.clone()), &results);
            (
                format!("sub{k}_{step}_{i}"),
                c.tool.clone(),
                args.to_string(),
            )
        })
        .collect();
    (s.text.clone(), calls)
}

/// The session ids of a `<terminal_sessions>` block (`- <id>: read, wait` lines).
fn granted_sessions(task: &str) -> Vec<String> {
    let Some(start) = task.find("<terminal_sessions>") else {
        return Vec::new();
    };
    task[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("</terminal_sessions>"))
        .filter_map(|l| l.strip_prefix("- ")?.split(':').next())
        .map(str::to_string)
        .collect()
}

async fn answer(State(shared): State<Arc<Shared>>, body: axum::body::Bytes) -> Response {
    let started = Instant::now();
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "request body is not JSON").into_response();
    };
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let mut inner = shared.lock();
    inner.requests.push(request.clone());
    if is_summariser_request(&request, &inner.summary_prompt) {
        inner.summaries += 1;
        let summary = inner.script.summary.clone();
        let response = if stream {
            sse(&summary, &[], "stop")
        } else {
            whole(&summary, &[], "stop")
        };
        inner.busy += started.elapsed();
        return response;
    }
    if !inner.subagent_prompt.is_empty() && opens_with(&request, &inner.subagent_prompt) {
        let (text, calls) = subagent_answer(&inner.script, &request);
        let finish = if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        let response = if stream {
            sse(&text, &calls, finish)
        } else {
            whole(&text, &calls, finish)
        };
        inner.busy += started.elapsed();
        return response;
    }
    let index = inner.next;
    inner.next += 1;
    let (text, calls) = match inner.script.responses.get(index) {
        Some(step) => {
            // The task's facts count as a result the model has seen (`{{page_url}}`).
            let mut results = task_facts(&request);
            results.extend(tool_results(&request));
            let calls: Vec<(String, String, String)> = step
                .calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let args = resolve(&Value::Object(c.arguments.clone()), &results);
                    (
                        format!("call_{index}_{i}"),
                        c.tool.clone(),
                        args.to_string(),
                    )
                })
                .collect();
            (step.text.clone(), calls)
        }
        None => (inner.script.final_text.clone(), Vec::new()),
    };
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    let response = if stream {
        sse(&text, &calls, finish)
    } else {
        whole(&text, &calls, finish)
    };
    inner.busy += started.elapsed();
    response
}

fn tool_call_json(i: usize, (id, name, args): &(String, String, String)) -> Value {
    json!({"index": i, "id": id, "type": "function",
           "function": {"name": name, "arguments": args}})
}

fn sse(text: &str, calls: &[(String, String, String)], finish: &str) -> Response {
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({"id": "scripted", "object": "chat.completion.chunk", "created": 0,
               "model": SCRIPTED_MODEL,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut frames = vec![chunk(json!({"role": "assistant", "content": text}), None)];
    if !calls.is_empty() {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| tool_call_json(i, c))
            .collect();
        frames.push(chunk(json!({"tool_calls": calls}), None));
    }
    frames.push(chunk(json!({}), Some(finish)));
    let mut body = String::new();
    for f in frames {
        body.push_str("data: ");
        body.push_str(&f.to_string());
        body.push_str("\n\n");
    }
    body.push_str("data: [DONE]\n\n");
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

fn whole(text: &str, calls: &[(String, String, String)], finish: &str) -> Response {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| tool_call_json(i, c))
        .collect();
    let mut message = json!({"role": "assistant", "content": text});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    axum::Json(
        json!({"id": "scripted", "object": "chat.completion", "created": 0,
        "model": SCRIPTED_MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}]}),
    )
    .into_response()
}
