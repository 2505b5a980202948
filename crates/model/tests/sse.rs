//! The SSE parser: line endings, comments, multi-line events, UTF-8 split across reads.

use mpa_model::sse::*;

fn parse_all(pieces: &[&[u8]]) -> Vec<SseEvent> {
    let mut p = SseParser::new();
    let mut out = Vec::new();
    for piece in pieces {
        p.feed(piece, &mut |e| out.push(e));
    }
    p.finish(&mut |e| out.push(e));
    out
}

fn data(d: &str) -> SseEvent {
    SseEvent {
        event: None,
        data: d.into(),
    }
}

#[test]
fn split_lines_crlf_comments_multiline() {
    let stream = b"\xef\xbb\xbf: keep-alive\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\nevent: error\ndata: boom\n\ndata:[DONE]\n\n";
    let expected = vec![
        data("{\"a\":\n1}"),
        SseEvent {
            event: Some("error".into()),
            data: "boom".into(),
        },
        data("[DONE]"),
    ];
    assert_eq!(parse_all(&[stream]), expected);
    // Every split point, including inside `\r\n` and inside the BOM, gives the same events.
    for cut in 0..stream.len() {
        assert_eq!(
            parse_all(&[&stream[..cut], &stream[cut..]]),
            expected,
            "cut {cut}"
        );
    }
    let singles: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(parse_all(&singles), expected);
}

#[test]
fn lone_cr_and_utf8_split() {
    let stream = "data: 你好\r\rdata: b\r\r".as_bytes();
    let singles: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(parse_all(&singles), vec![data("你好"), data("b")]);
}

#[test]
fn finish_flushes_unterminated_event() {
    assert_eq!(parse_all(&[b"data: x"]), vec![data("x")]);
    assert_eq!(parse_all(&[b"event: ping\n\n"]), vec![]);
}
