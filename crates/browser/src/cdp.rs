//! The DevTools protocol over Chromium's `--remote-debugging-pipe`: JSON messages separated by
//! NUL bytes, commands written to the browser's fd 3, answers and events read from its fd 4.
//! A pipe instead of a WebSocket: no port on the machine that another local user could attach
//! to, no WebSocket crate, and the browser sees end-of-file (and exits) when this process dies.
//!
//! Only the handful of commands the browser actions need are used; they are plain JSON here
//! (the generated bindings of a full CDP crate cost minutes of every cold build).

use crate::error::{BrowserError, Result};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};

/// An event the browser sent (no `id`), with the flat-mode session it belongs to.
#[derive(Debug)]
pub(crate) struct CdpEvent {
    pub method: String,
    pub params: Value,
    pub session_id: Option<String>,
}

type Pending = Mutex<HashMap<u64, oneshot::Sender<std::result::Result<Value, String>>>>;

/// One connection to one browser process. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Cdp {
    inner: Arc<Inner>,
}

struct Inner {
    writer: tokio::sync::Mutex<pipe::Sender>,
    next_id: AtomicU64,
    pending: Pending,
    closed: AtomicBool,
}

impl Cdp {
    /// Starts reading `from_browser`; events go to the returned receiver (unbounded: a paused
    /// request must never be dropped, or the page waits for it forever).
    pub fn start(
        to_browser: pipe::Sender,
        from_browser: pipe::Receiver,
    ) -> (Self, mpsc::UnboundedReceiver<CdpEvent>) {
        let inner = Arc::new(Inner {
            writer: tokio::sync::Mutex::new(to_browser),
            next_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
        });
        let (events, rx) = mpsc::unbounded_channel();
        tokio::spawn(read_loop(inner.clone(), from_browser, events));
        (Self { inner }, rx)
    }

    /// Sends `method` (to a page's flat session when `session` is given) and waits for its answer.
    pub async fn call(&self, method: &str, params: Value, session: Option<&str>) -> Result<Value> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(BrowserError::Closed);
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = Value::String(s.to_string());
        }
        let (tx, rx) = oneshot::channel();
        self.pending().insert(id, tx);
        let mut bytes =
            serde_json::to_vec(&msg).map_err(|e| BrowserError::Protocol(e.to_string()))?;
        bytes.push(0);
        let written = {
            let mut w = self.inner.writer.lock().await;
            w.write_all(&bytes).await
        };
        if let Err(e) = written {
            self.pending().remove(&id);
            self.inner.closed.store(true, Ordering::Release);
            return Err(BrowserError::Protocol(format!("browser pipe closed: {e}")));
        }
        match rx.await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(message)) => Err(BrowserError::Protocol(format!("{method}: {message}"))),
            Err(_) => Err(BrowserError::Closed),
        }
    }

    /// Whether the browser's end of the pipe closed.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<std::result::Result<Value, String>>>>
    {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

async fn read_loop(
    inner: Arc<Inner>,
    from_browser: pipe::Receiver,
    events: mpsc::UnboundedSender<CdpEvent>,
) {
    let mut reader = BufReader::with_capacity(1 << 16, from_browser);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(0, &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if buf.last() == Some(&0) {
            buf.pop();
        }
        let Ok(mut msg) = serde_json::from_slice::<Value>(&buf) else {
            tracing::warn!("unreadable DevTools message ({} bytes)", buf.len());
            continue;
        };
        if let Some(id) = msg.get("id").and_then(Value::as_u64) {
            let waiter = inner
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            if let Some(tx) = waiter {
                let answer = match msg.get_mut("error") {
                    Some(err) => Err(err
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("error")
                        .to_string()),
                    None => Ok(msg
                        .get_mut("result")
                        .map(Value::take)
                        .unwrap_or(Value::Null)),
                };
                let _ = tx.send(answer);
            }
        } else if let Some(method) = msg.get("method").and_then(Value::as_str) {
            let _ = events.send(CdpEvent {
                method: method.to_string(),
                session_id: msg
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                params: msg
                    .get_mut("params")
                    .map(Value::take)
                    .unwrap_or(Value::Null),
            });
        }
    }
    inner.closed.store(true, Ordering::Release);
    // Every waiter learns the browser is gone (dropping the senders answers `Closed`).
    inner
        .pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}
