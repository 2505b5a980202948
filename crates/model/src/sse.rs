//! Incremental Server-Sent Events parser.
//!
//! Fed arbitrary byte slices as they arrive (a line, a UTF-8 sequence or a `\r\n` pair may be split
//! anywhere); yields complete events. Handles `\n`, `\r\n` and lone `\r` line ends, `:` comments,
//! `event:` names, multi-line `data:` (joined with `\n`), and a leading BOM. `id:` and `retry:` are
//! ignored (a chat stream is never resumed). `data: [DONE]` is an ordinary event here; the decoder
//! gives it meaning.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` name, when one was given.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// The parser state: the unfinished line and the event being built.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the current, unterminated line.
    line: Vec<u8>,
    /// The previous chunk ended in `\r`; a `\n` opening the next one belongs to that line end.
    pending_cr: bool,
    data: String,
    has_data: bool,
    event: Option<String>,
    at_stream_start: bool,
}

impl SseParser {
    pub fn new() -> Self {
        Self {
            at_stream_start: true,
            ..Self::default()
        }
    }

    /// Feeds bytes; calls `on_event` for each event completed by them.
    pub fn feed(&mut self, mut bytes: &[u8], on_event: &mut dyn FnMut(SseEvent)) {
        if self.pending_cr {
            self.pending_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while !bytes.is_empty() {
            match bytes.iter().position(|b| *b == b'\n' || *b == b'\r') {
                None => {
                    self.line.extend_from_slice(bytes);
                    return;
                }
                Some(end) => {
                    let terminator = bytes[end];
                    if self.line.is_empty() {
                        self.process_line(&bytes[..end], on_event);
                    } else {
                        self.line.extend_from_slice(&bytes[..end]);
                        let line = std::mem::take(&mut self.line);
                        self.process_line(&line, on_event);
                        self.line = line;
                        self.line.clear();
                    }
                    bytes = &bytes[end + 1..];
                    if terminator == b'\r' {
                        match bytes.first() {
                            Some(b'\n') => bytes = &bytes[1..],
                            Some(_) => {}
                            None => self.pending_cr = true,
                        }
                    }
                }
            }
        }
    }

    /// End of stream: dispatches what is pending — an unterminated last line and an event lacking
    /// its blank line. Strict SSE would drop it; servers that close right after the last `data:`
    /// line are common enough to be lenient, and the decoder rejects a half JSON anyway.
    pub fn finish(&mut self, on_event: &mut dyn FnMut(SseEvent)) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, on_event);
        }
        self.dispatch(on_event);
    }

    fn process_line(&mut self, mut line: &[u8], on_event: &mut dyn FnMut(SseEvent)) {
        if self.at_stream_start {
            self.at_stream_start = false;
            if let Some(rest) = line.strip_prefix("\u{feff}".as_bytes()) {
                line = rest;
            }
        }
        if line.is_empty() {
            self.dispatch(on_event);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.has_data = true;
                self.data.push_str(&String::from_utf8_lossy(value));
            }
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
    }

    fn dispatch(&mut self, on_event: &mut dyn FnMut(SseEvent)) {
        if self.has_data {
            self.has_data = false;
            on_event(SseEvent {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
            });
        } else {
            self.event = None;
        }
    }
}
