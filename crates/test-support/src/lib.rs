//! Test doubles speaking real wire formats: the mock OpenAI-compatible model server and recorded
//! vendor streams. A dev-dependency only; it speaks the wire and imports no `mpa-*` crate.
//!
//! Public API:
//! - [`MockModelServer`]: `start()` (or `start_blocking()`) binds `127.0.0.1:0` on its own thread
//!   and runtime and serves `POST …/chat/completions` (plus `GET …/models`). `base_url` is
//!   `http://127.0.0.1:PORT/v1`, usable from this process or a spawned `mpagent`
//!   (`LLM_BASE_URL`). Replies come from a FIFO queue (`push`), else the `set_default` reply, else
//!   a 500 saying the script ran out. Every request body and header list is recorded
//!   (`requests`, `request_headers`, `wait_for_requests`); [`last_user_text`] reads a recorded
//!   request's last user message.
//! - [`MockReply`]: scripted text / tool calls rendered as real SSE chunk streams in a
//!   [`Dialect`] (OpenAI; no-`index` vLLM/llama.cpp; DeepSeek `reasoning_content`), raw `data:`
//!   payloads, raw bytes, recorded fixtures, an empty 200 stream, or plain HTTP status replies;
//!   modifiers `header`, `chunk_delay`, `stall_after`, `drop_after`, `finish_reason`. A scripted
//!   reply to a request with `stream: false` is one `chat.completion` JSON body.
//! - [`in_own_process!`]: the rest of a test runs in a process of its own, spawned from the same
//!   test binary (for tests that change the environment or other process-wide state).
//! - [`external_program`]: skip-with-notice (or fail under `MPA_REQUIRE_ALL_TESTS=1`) for tests
//!   that need python3, Chromium, node and the like.
//! - [`FIXTURES`] / [`fixture`]: recorded streams under `fixtures/*.sse`, embedded in the crate;
//!   [`LLAMACPP_OVERFLOW_400`] / [`LLAMACPP_CONTENT_NULL_500`]: recorded error bodies.
//! - [`LlamaCppServer::start`]: a real llama.cpp server (llama-cpp-python + a GGUF, named by
//!   `MPA_LLAMA_SERVER_PYTHON` / `MPA_LLAMA_MODEL`, installed by `.ci/run`) as a child process on
//!   `127.0.0.1:<free port>`, killed on drop; skips like [`external_program`] when not installed.
//!
//! Invariants: a scripted stream always ends with `data: [DONE]` unless cut; `stall_after(n)` and
//! `drop_after(n)` count writes (one SSE event per write); dropping the server cuts every open
//! connection, so a stalled stream never outlives its test.

mod eventually;
mod external;
mod fixtures;
pub mod floors;
mod llama;
mod mask;
pub mod own_process;
mod reply;
mod server;

pub use eventually::eventually;
pub use external::external_program;
pub use fixtures::{
    FIXTURES, Fixture, LLAMACPP_CONTENT_NULL_500, LLAMACPP_OVERFLOW_400, fixture, fixture_path,
    split_events,
};
pub use llama::{
    LLAMA_MODEL_VAR, LLAMA_PYTHON_VAR, LlamaCppOptions, LlamaCppServer, first_model_id,
};
pub use mask::{mask, mask_with};
pub use reply::{DEFAULT_REASONING, DEFAULT_USAGE, Dialect, MockReply, MockToolCall, pieces};
pub use server::{MockModelServer, last_user_text};
