//! Recorded chat-completion streams in the wire formats of several vendors, byte for byte as they
//! arrive (line endings, comments and keep-alives included), with what each must assemble to.

use std::path::PathBuf;

/// One recorded stream.
#[derive(Debug, Clone, Copy)]
pub struct Fixture {
    /// File stem under `crates/test-support/fixtures/`.
    pub name: &'static str,
    pub bytes: &'static [u8],
    /// What the stream is an example of.
    pub about: &'static str,
}

/// Every recorded stream.
pub const FIXTURES: &[Fixture] = &[
    Fixture {
        name: "openai_text",
        bytes: include_bytes!("../fixtures/openai_text.sse"),
        about: "OpenAI gpt-4o: text deltas, finish chunk, then a usage-only chunk (include_usage)",
    },
    Fixture {
        name: "openai_tool_calls",
        bytes: include_bytes!("../fixtures/openai_tool_calls.sse"),
        about: "OpenAI: two parallel tool calls with index, arguments fragmented, cached tokens",
    },
    Fixture {
        name: "llamacpp_no_index",
        bytes: include_bytes!("../fixtures/llamacpp_no_index.sse"),
        about: "llama.cpp / vLLM style: no tool-call index, repeated name, whole arguments in one \
                chunk, usage and timings in the finish chunk",
    },
    Fixture {
        name: "deepseek_reasoning",
        bytes: include_bytes!("../fixtures/deepseek_reasoning.sse"),
        about: "DeepSeek reasoner: reasoning_content then content, keep-alive comments, \
                prompt_cache_hit_tokens",
    },
    Fixture {
        name: "openrouter_crlf",
        bytes: include_bytes!("../fixtures/openrouter_crlf.sse"),
        about: "OpenRouter style: CRLF line ends, processing comments, `reasoning` field, one \
                chunk spread over two data lines, usage in the finish chunk",
    },
    // Recorded from a real llama.cpp server: llama-cpp-python 0.3.36, `python3 -m
    // llama_cpp.server`, Gemma 3 270M Q4_K_M; model paths shortened to the file name.
    Fixture {
        name: "llamacpp_python_plain",
        bytes: include_bytes!("../fixtures/llamacpp_python_plain.sse"),
        about: "llama-cpp-python, default chat format, no tools: role chunk, content chunks, \
                `logprobs: null` on every choice, `finish_reason: length`, no usage chunk even \
                with include_usage",
    },
    Fixture {
        name: "llamacpp_python_cfc_plain",
        bytes: include_bytes!("../fixtures/llamacpp_python_cfc_plain.sse"),
        about: "llama-cpp-python, `--chat_format chatml-function-calling`, no tools: the same \
                shape, `finish_reason: stop`",
    },
    Fixture {
        name: "llamacpp_python_tools_forced",
        bytes: include_bytes!("../fixtures/llamacpp_python_tools_forced.sse"),
        about: "llama-cpp-python, tools + tool_choice naming a function: every fragment repeats \
                `index: 0`, the same `id` and the `name`, plus a duplicate legacy \
                `function_call`; explicit nulls; `finish_reason: tool_calls`; no usage",
    },
    Fixture {
        name: "llamacpp_python_trunc_forced",
        bytes: include_bytes!("../fixtures/llamacpp_python_trunc_forced.sse"),
        about: "llama-cpp-python, a forced call at the edge of the context size: 32 one-token \
                argument fragments (they happen to close the JSON) and `finish_reason: tool_calls`",
    },
    Fixture {
        name: "llamacpp_python_tool_args_cut",
        bytes: include_bytes!("../fixtures/llamacpp_python_tool_args_cut.sse"),
        about: "llama-cpp-python, a forced call with max_tokens = 3 (recorded by hand with curl): \
                the arguments stop at `{\"city\":`, yet `finish_reason` says `tool_calls`",
    },
];

/// llama-cpp-python 0.3.36's HTTP 400 to an over-context request sent without streaming (the same
/// request streamed gets HTTP 200 and an empty event stream).
pub const LLAMACPP_OVERFLOW_400: &str =
    include_str!("../fixtures/llamacpp_python_overflow_400.json");

/// llama-cpp-python 0.3.36's HTTP 500 to a history whose assistant tool-call message has
/// `"content": null`: seven pydantic validation errors and a traceback line.
pub const LLAMACPP_CONTENT_NULL_500: &str =
    include_str!("../fixtures/llamacpp_python_content_null_500.json");

/// The bytes of a recorded stream, by name.
pub fn fixture(name: &str) -> Option<&'static [u8]> {
    FIXTURES.iter().find(|f| f.name == name).map(|f| f.bytes)
}

/// Where a fixture lives on disk (for tools that want a path, e.g. a subprocess).
pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(format!("{name}.sse"))
}

/// Splits a stream after each blank line, so a replay sends one event per write as a server would.
pub fn split_events(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        let end = if rest.starts_with(b"\r\n\r\n") {
            Some(4)
        } else if rest.starts_with(b"\n\n") || rest.starts_with(b"\r\r") {
            Some(2)
        } else {
            None
        };
        match end {
            Some(n) => {
                i += n;
                frames.push(bytes[start..i].to_vec());
                start = i;
            }
            None => i += 1,
        }
    }
    if start < bytes.len() {
        frames.push(bytes[start..].to_vec());
    }
    frames
}
