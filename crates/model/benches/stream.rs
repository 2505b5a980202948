//! Per-chunk cost of stream parsing + assembly (SSE parse, JSON decode, tool-call assembly).
//! Target: ≤ 2 µs per chunk. Run: `cargo bench -p mpa-model --bench stream`.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use divan::Bencher;
use divan::counter::ItemsCount;
use mpa_model::decoder::StreamDecoder;
use mpa_test_support::{FIXTURES, split_events};

fn main() {
    divan::main();
}

const N: usize = 1000;

/// An OpenAI-shaped text stream of `N` content chunks (≈ 230 bytes each, like gpt-4o's).
fn text_stream() -> Vec<u8> {
    let mut s = String::new();
    for i in 0..N {
        s.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"gpt-4o-2024-08-06\",\"system_fingerprint\":\"fp_eb9dce56a8\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" word{i}\"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null}}\n\n"
        ));
    }
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

/// `N` tool-call argument fragments over 4 calls, with index, as OpenAI streams parallel calls.
fn tool_stream() -> Vec<u8> {
    let mut s = String::new();
    for call in 0..4 {
        s.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-x\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"gpt-4o\",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{call},\"id\":\"call_{call}\",\"type\":\"function\",\"function\":{{\"name\":\"search_media\",\"arguments\":\"\"}}}}]}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    for i in 0..N - 4 {
        let call = i % 4;
        s.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-x\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"gpt-4o\",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{call},\"function\":{{\"arguments\":\"\\\"k{i}\\\": \"}}}}]}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

fn decode_frames(frames: &[Vec<u8>]) -> usize {
    let mut decoder = StreamDecoder::new();
    let mut events = 0usize;
    for f in frames {
        decoder.feed(f, &mut |_| events += 1).unwrap();
    }
    let c = decoder.finish(&mut |_| events += 1).unwrap();
    events + c.tool_calls.len()
}

/// One network read per SSE event, as servers flush them.
#[divan::bench(args = ["text", "tool_calls"])]
fn synthetic_one_event_per_read(bencher: Bencher, kind: &str) {
    let bytes = if kind == "text" {
        text_stream()
    } else {
        tool_stream()
    };
    let frames = split_events(&bytes);
    bencher
        .counter(ItemsCount::new(N))
        .bench(|| decode_frames(divan::black_box(&frames)));
}

/// Reads cut every 1460 bytes (one TCP segment), so lines straddle reads.
#[divan::bench(args = ["text", "tool_calls"])]
fn synthetic_tcp_segments(bencher: Bencher, kind: &str) {
    let bytes = if kind == "text" {
        text_stream()
    } else {
        tool_stream()
    };
    let frames: Vec<Vec<u8>> = bytes.chunks(1460).map(<[u8]>::to_vec).collect();
    bencher
        .counter(ItemsCount::new(N))
        .bench(|| decode_frames(divan::black_box(&frames)));
}

/// The recorded vendor fixtures, one read per event.
#[divan::bench(args = ["openai_text", "openai_tool_calls", "llamacpp_no_index", "deepseek_reasoning", "openrouter_crlf"])]
fn recorded_fixture(bencher: Bencher, name: &str) {
    let fixture = FIXTURES.iter().find(|f| f.name == name).unwrap();
    let frames = split_events(fixture.bytes);
    let chunks = frames.iter().filter(|f| f.starts_with(b"data:")).count();
    bencher
        .counter(ItemsCount::new(chunks))
        .bench(|| decode_frames(divan::black_box(&frames)));
}
