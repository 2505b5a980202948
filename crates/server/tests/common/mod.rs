//! What the HTTP tests share: a host on 127.0.0.1:0 over a real SQLite store and the mock model
//! server, and an SSE frame reader.
#![allow(dead_code, reason = "each test crate uses a subset of these helpers")]
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's panic is its failure report"
)]

pub mod gate;

use futures_util::StreamExt;
use mpa_core::capability::{Learning, Recall, Terminals};
use mpa_core::{Accounts, Agent, AgentConfig, Capabilities, RegistryOptions};
use mpa_server::{Host, ServerConfig};
use mpa_store::Store;
use mpa_test_support::MockModelServer;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::oneshot;

pub const ADMIN_TOKEN: &str = "admin-token-for-tests-0123456789";
pub const WAIT: Duration = Duration::from_secs(30);

pub struct Env {
    pub base: String,
    pub http: reqwest::Client,
    pub store: Store,
    pub accounts: Accounts,
    /// The agent behind the server (to observe sessions the HTTP API does not show).
    pub agent: Agent,
    pub mock: MockModelServer,
    pub dir: tempfile::TempDir,
    pub stop: Option<oneshot::Sender<()>>,
    pub task: Option<tokio::task::JoinHandle<()>>,
}

impl Env {
    pub async fn start() -> Env {
        Env::start_with(|_| {}).await
    }

    /// A host whose config `configure` adjusts (limits, timeouts) before it binds.
    pub async fn start_with(configure: impl FnOnce(&mut ServerConfig)) -> Env {
        Env::start_caps(configure, |_| {}, false, None, Vec::new()).await
    }

    /// A full host ([`Env::start_full`]) with these tools besides the built-in ones.
    pub async fn start_tools(tools: Vec<std::sync::Arc<dyn mpa_core::tools::Tool>>) -> Env {
        Env::start_caps(|_| {}, |_| {}, true, None, tools).await
    }

    /// A host with the evidence history (under the data dir, see [`Env::evidence`]) and the
    /// admin-only `execute_command` tool, as `mpagent serve` runs.
    pub async fn start_full() -> Env {
        Env::start_caps(|_| {}, |_| {}, true, None, Vec::new()).await
    }

    /// A full host whose agent config `configure` adjusts (model name, window, idle time).
    pub async fn start_agent(configure: impl FnOnce(&mut AgentConfig)) -> Env {
        Env::start_caps(|_| {}, configure, true, None, Vec::new()).await
    }

    /// A full host with memory and skills too (as `mpagent serve` runs them).
    pub async fn start_learning() -> Env {
        Env::start_learning_with(|_| {}).await
    }

    /// [`Env::start_learning`] with its agent configured by `configure` (review intervals, …).
    pub async fn start_learning_with(configure: impl FnOnce(&mut AgentConfig)) -> Env {
        Env::start_caps(|_| {}, |_| {}, true, None, Vec::new())
            .await
            .with_learning(configure)
            .await
    }

    /// [`Env::start_agent`] with its data directory in `dir` (e.g. a small file system).
    pub async fn start_in(dir: tempfile::TempDir, configure: impl FnOnce(&mut AgentConfig)) -> Env {
        Env::start_caps(|_| {}, configure, true, Some(dir), Vec::new()).await
    }

    async fn start_caps(
        configure: impl FnOnce(&mut ServerConfig),
        configure_agent: impl FnOnce(&mut AgentConfig),
        full: bool,
        dir: Option<tempfile::TempDir>,
        tools: Vec<std::sync::Arc<dyn mpa_core::tools::Tool>>,
    ) -> Env {
        let mock = MockModelServer::start().await;
        let dir = dir.unwrap_or_else(|| tempfile::tempdir().unwrap());
        let store = Store::open_in(dir.path()).unwrap();
        let model = mpa_model::ModelConfig {
            base_url: mock.base_url.clone(),
            api_key: Some("sk-test-key".into()),
            model: "gpt-4o".into(),
            max_retries: 0,
            ..Default::default()
        };
        let mut caps = Capabilities::default();
        if full {
            caps = caps
                .with(Terminals::new(mpa_exec::Processes::new(
                    mpa_exec::ExecConfig::new(
                        dir.path().to_path_buf(),
                        dir.path().join("exec-output"),
                    ),
                )))
                .with(Recall::new(mpa_history::History::new(
                    mpa_history::HistoryConfig::new(dir.path()),
                )));
        }
        let mut agent_cfg = AgentConfig::new(model);
        configure_agent(&mut agent_cfg);
        let mut builder =
            Agent::builder(agent_cfg, store.clone())
                .caps(caps)
                .options(RegistryOptions {
                    diagnostic_tools: true,
                });
        for t in tools {
            builder = builder.tool(t);
        }
        let agent = builder.build().unwrap();
        let accounts = agent.accounts().clone();
        let handle = agent.clone();
        let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.admin_token = Some(ADMIN_TOKEN.into());
        configure(&mut cfg);
        let host = Host::bind(agent, cfg).await.unwrap();
        let addr = host.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            host.run(async move {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        Env {
            base: format!("http://{addr}"),
            http: reqwest::Client::new(),
            store,
            accounts,
            agent: handle,
            mock,
            dir,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// The same host restarted over the same data directory with memory and skills enabled.
    async fn with_learning(mut self, configure: impl FnOnce(&mut AgentConfig)) -> Env {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            tokio::time::timeout(WAIT, t).await.unwrap().unwrap();
        }
        let dir = self.dir.path().to_path_buf();
        let model = mpa_model::ModelConfig {
            base_url: self.mock.base_url.clone(),
            api_key: Some("sk-test-key".into()),
            model: "gpt-4o".into(),
            max_retries: 0,
            ..Default::default()
        };
        let caps = Capabilities::default()
            .with(Terminals::new(mpa_exec::Processes::new(
                mpa_exec::ExecConfig::new(dir.clone(), dir.join("exec-output")),
            )))
            .with(Recall::new(mpa_history::History::new(
                mpa_history::HistoryConfig::new(&dir),
            )))
            .with(Learning::new(
                mpa_learning::Memory::new(mpa_learning::MemoryConfig::new(dir.clone())),
                mpa_learning::Skills::new(dir.clone()),
            ));
        let mut config = AgentConfig::new(model);
        configure(&mut config);
        let agent = Agent::builder(config, self.store.clone())
            .caps(caps)
            .build()
            .unwrap();
        self.accounts = agent.accounts().clone();
        self.agent = agent.clone();
        let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.admin_token = Some(ADMIN_TOKEN.into());
        let host = Host::bind(agent, cfg).await.unwrap();
        let addr = host.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        self.task = Some(tokio::spawn(async move {
            host.run(async move {
                let _ = rx.await;
            })
            .await
            .unwrap();
        }));
        self.stop = Some(tx);
        self.base = format!("http://{addr}");
        self
    }

    pub async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            tokio::time::timeout(WAIT, t).await.unwrap().unwrap();
        }
    }

    /// Every evidence row of every user (user key, session, role, content), in order; empty
    /// without the history ([`Env::start_full`]).
    pub fn evidence(&self) -> Vec<(String, String, String, String)> {
        let root = self.dir.path().join("agent/runtime/history/users");
        let mut out = Vec::new();
        let Ok(users) = std::fs::read_dir(&root) else {
            return out;
        };
        let mut users: Vec<_> = users.map(|e| e.unwrap().path()).collect();
        users.sort();
        for dir in users {
            let db = dir.join("state.db");
            if !db.exists() {
                continue;
            }
            let key = dir.file_name().unwrap().to_string_lossy().into_owned();
            let c = rusqlite::Connection::open(&db).unwrap();
            let mut q = c
                .prepare("SELECT session_id, role, content FROM messages ORDER BY id")
                .unwrap();
            let rows = q
                .query_map([], |r| Ok((key.clone(), r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap();
            out.extend(rows.map(Result::unwrap));
        }
        out
    }

    /// Waits until the evidence holds at least `n` rows and has stopped changing.
    pub async fn evidence_settled(&self, n: usize) -> Vec<(String, String, String, String)> {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut last = self.evidence();
        loop {
            tokio::time::sleep(Duration::from_millis(150)).await;
            let now = self.evidence();
            if now.len() >= n && now == last {
                return now;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "evidence never settled: {now:?}"
            );
            last = now;
        }
    }

    /// Every chat row of the main store (session id, owner, transcript, display), by id.
    pub fn chat_rows(&self) -> Vec<(String, String, String, String)> {
        let db = rusqlite::Connection::open(self.dir.path().join("agent.db")).unwrap();
        let mut q = db
            .prepare(
                "SELECT session_id, user_id, agent_messages, display_messages FROM chats \
                 ORDER BY session_id",
            )
            .unwrap();
        q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn user(&self, name: &str, password: &str, admin: bool) -> String {
        self.accounts
            .create(name, admin, Some(password))
            .await
            .unwrap();
        let r = self.login(name, password).await;
        assert_eq!(r.status(), StatusCode::OK);
        let v: Value = r.json().await.unwrap();
        v["token"].as_str().unwrap().to_string()
    }

    pub async fn login(&self, name: &str, password: &str) -> reqwest::Response {
        self.login_with(&self.http, name, password).await
    }

    /// A login sent by `client` (e.g. one bound to another loopback address, see [`client_from`]).
    pub async fn login_with(
        &self,
        client: &reqwest::Client,
        name: &str,
        password: &str,
    ) -> reqwest::Response {
        client
            .post(self.url("/api/v1/login"))
            .json(&json!({"username": name, "password": password}))
            .send()
            .await
            .unwrap()
    }

    /// `POST /api/v1/logout` with `token`.
    pub async fn logout(&self, token: &str) -> StatusCode {
        self.http
            .post(self.url("/api/v1/logout"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .status()
    }

    pub async fn get(&self, token: &str, path: &str) -> (StatusCode, Value) {
        self.send(reqwest::Method::GET, token, path).await
    }

    pub async fn send(
        &self,
        method: reqwest::Method,
        token: &str,
        path: &str,
    ) -> (StatusCode, Value) {
        let r = self
            .http
            .request(method, self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let s = r.status();
        (s, r.json().await.unwrap_or(Value::Null))
    }

    /// A JSON request; the answer's status and JSON body (`Null` when it has none).
    pub async fn send_json(
        &self,
        method: reqwest::Method,
        token: &str,
        path: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        let r = self
            .http
            .request(method, self.url(path))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let s = r.status();
        (s, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn stream(&self, token: &str, body: Value) -> reqwest::Response {
        self.http
            .post(self.url("/api/v1/agent/stream"))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// Polls until no session actor is live (idle ones reclaimed, closed ones ended).
    pub async fn wait_reclaimed(&self) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while self.agent.live_sessions() > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "a session was never reclaimed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls the detail until the session is idle and has a snapshot.
    pub async fn wait_idle(&self, token: &str, session: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let (s, v) = self
                .get(token, &format!("/api/v1/agent/sessions/{session}"))
                .await;
            if s == StatusCode::OK
                && v["is_processing"] == false
                && v["message_count"].as_i64() > Some(0)
            {
                return v;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "session never went idle: {v}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// An HTTP client whose connections come from `ip` (any 127.x.y.z reaches the host on 127.0.0.1,
/// so one test can play several client addresses).
pub fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip.parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap()
}

/// The `host:port` the host listens on.
pub fn addr(env: &Env) -> String {
    env.base.trim_start_matches("http://").to_string()
}

/// Reads one HTTP/1.1 response from a raw socket: status, lower-cased headers and the body (by
/// `Content-Length`). `None` when the server closed the connection without answering.
pub async fn read_response<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
) -> Option<(u16, std::collections::HashMap<String, String>, String)> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let mut line = String::new();
    if r.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let status: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
    let mut headers = std::collections::HashMap::new();
    loop {
        line.clear();
        r.read_line(&mut line).await.ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).await.ok()?;
    Some((status, headers, String::from_utf8_lossy(&body).into_owned()))
}

/// Sends `request` (raw bytes, e.g. headers without their body) on a new connection and reads
/// the answer; fails the test if none comes within [`WAIT`].
pub async fn raw_exchange(
    env: &Env,
    request: &[u8],
) -> (u16, std::collections::HashMap<String, String>, String) {
    use tokio::io::AsyncWriteExt;
    let s = tokio::net::TcpStream::connect(addr(env)).await.unwrap();
    let mut r = tokio::io::BufReader::new(s);
    r.get_mut().write_all(request).await.unwrap();
    tokio::time::timeout(WAIT, read_response(&mut r))
        .await
        .expect("no answer in time")
        .expect("closed without an answer")
}

/// Asserts that a raw answer is the JSON error envelope with `status` and `code`.
pub fn assert_envelope(
    (status, headers, body): &(u16, std::collections::HashMap<String, String>, String),
    want_status: u16,
    code: &str,
) {
    assert_eq!(*status, want_status, "{body}");
    assert_eq!(headers["content-type"], "application/json", "{body}");
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["error"]["code"], code, "{body}");
}

/// Rows in a table of the main store.
pub fn rows(env: &Env, table: &str) -> i64 {
    let db = rusqlite::Connection::open(env.dir.path().join("agent.db")).unwrap();
    db.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

/// Reads SSE frames from a response.
pub struct Frames {
    pub body:
        std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    pub buf: String,
}

impl Frames {
    pub fn new(r: reqwest::Response) -> Frames {
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            r.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        Frames {
            body: Box::pin(r.bytes_stream()),
            buf: String::new(),
        }
    }

    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(i) = self.buf.find("\n\n") {
                let raw: String = self.buf.drain(..i + 2).collect();
                let data = raw.trim().strip_prefix("data: ").expect("data frame");
                return Some(serde_json::from_str(data).unwrap());
            }
            let chunk = tokio::time::timeout(WAIT, self.body.next())
                .await
                .expect("no SSE frame in time")?;
            self.buf
                .push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }
    }

    pub async fn until(&mut self, ty: &str) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(f) = self.next().await {
            let done = f["type"] == ty;
            out.push(f);
            if done {
                return out;
            }
        }
        panic!("stream ended before a {ty} frame: {out:?}");
    }

    pub async fn all(mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(f) = self.next().await {
            out.push(f);
        }
        out
    }
}

pub fn types(frames: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in frames {
        let t = match f["type"].as_str().unwrap() {
            "tool" => format!("tool:{}", f["status"].as_str().unwrap()),
            "delta" if out.last().is_some_and(|l| l == "delta") => continue,
            "heartbeat" => continue,
            other => other.to_string(),
        };
        out.push(t);
    }
    out
}

pub fn text_of(frames: &[Value]) -> String {
    frames
        .iter()
        .filter(|f| f["type"] == "delta")
        .map(|f| f["content"].as_str().unwrap())
        .collect()
}
