//! Incremental UTF-8 decoding of a byte stream read in arbitrary pieces: a character split across
//! two reads is joined, invalid bytes become U+FFFD, nothing ever panics.

/// Decoder state: at most 3 bytes of an unfinished character carried to the next read.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Decodes `input` (continuing any pending partial character) and appends to `out`.
    pub fn decode(&mut self, input: &[u8], out: &mut String) {
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
    pub fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            self.pending.clear();
            out.push('\u{FFFD}');
        }
    }
}
