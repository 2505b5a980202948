//! Incremental UTF-8 decoding of a byte stream read in arbitrary pieces: a character split across
//! two reads is joined, invalid bytes become U+FFFD, nothing ever panics.

/// Decoder state: at most 3 bytes of an unfinished character carried to the next read.
#[derive(Debug, Default)]
pub(crate) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Decodes `input` (continuing any pending partial character) and appends to `out`.
    pub(crate) fn decode(&mut self, input: &[u8], out: &mut String) {
        let joined;
        let mut rest: &[u8] = if self.pending.is_empty() {
            input
        } else {
            let mut buf = std::mem::take(&mut self.pending);
            buf.extend_from_slice(input);
            joined = buf;
            &joined
        };
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    return;
                }
                Err(err) => {
                    let (valid, after) = rest.split_at(err.valid_up_to());
                    if let Ok(text) = std::str::from_utf8(valid) {
                        out.push_str(text);
                    }
                    match err.error_len() {
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            rest = &after[bad..];
                        }
                        None => {
                            // An unfinished character at the end: wait for the next read.
                            self.pending = after.to_vec();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Flushes at end of stream: an unfinished character is invalid.
    pub(crate) fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            self.pending.clear();
            out.push('\u{FFFD}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
