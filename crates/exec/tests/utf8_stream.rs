//! Streaming UTF-8 decoding across read boundaries.

use mpa_exec::Utf8Stream;

fn decode_in_pieces(bytes: &[u8], piece: usize) -> String {
    let mut dec = Utf8Stream::default();
    let mut out = String::new();
    for part in bytes.chunks(piece) {
        dec.decode(part, &mut out);
    }
    dec.finish(&mut out);
    out
}

#[test]
fn split_characters_are_joined_at_every_boundary() {
    let text = "héllo 世界 🎬 done";
    for piece in 1..8 {
        assert_eq!(decode_in_pieces(text.as_bytes(), piece), text);
    }
}

#[test]
fn invalid_bytes_become_replacement_characters() {
    let bytes = b"ok \xff\xfe then \xe4\xb8 end";
    assert_eq!(
        decode_in_pieces(bytes, 3),
        "ok \u{FFFD}\u{FFFD} then \u{FFFD} end"
    );
}

#[test]
fn truncated_character_at_eof_is_replaced() {
    assert_eq!(decode_in_pieces(b"abc\xe4\xb8", 2), "abc\u{FFFD}");
}
