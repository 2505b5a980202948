//! Bytes of a `text/event-stream` response → [`Completion`]: SSE parsing, chunk decoding,
//! assembly, `[DONE]` and in-stream errors. Pure; the client feeds it what the socket gives.

use crate::assembly::CompletionAssembler;
use crate::chunk::ChatChunk;
use crate::classify::classify_stream_error;
use crate::error::{ModelError, Result, scrub};
use crate::sse::{SseEvent, SseParser};
use crate::{Completion, StreamEvent};

/// Incremental decoder of one streamed chat completion.
#[derive(Debug)]
pub struct StreamDecoder {
    sse: SseParser,
    state: DecodeState,
}

#[derive(Debug, Default)]
struct DecodeState {
    assembler: CompletionAssembler,
    done: bool,
    error: Option<ModelError>,
    api_key: Option<String>,
    /// At end of stream a half-received chunk is expected noise, not a protocol error.
    at_eof: bool,
    /// `data:` events seen (chunks, `[DONE]`, errors; not comments or keep-alives).
    events: u64,
}

impl Default for StreamDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamDecoder {
    pub fn new() -> Self {
        Self {
            sse: SseParser::new(),
            state: DecodeState::default(),
        }
    }

    /// A decoder that scrubs `api_key` from provider error text.
    pub fn with_api_key(api_key: Option<&str>) -> Self {
        let mut d = Self::new();
        d.state.api_key = api_key.map(str::to_owned);
        d
    }

    /// Feeds received bytes. Returns the first error met (an in-stream error chunk or an
    /// undecodable chunk); bytes after `[DONE]` are ignored.
    pub fn feed(&mut self, bytes: &[u8], on_event: &mut dyn FnMut(StreamEvent)) -> Result<()> {
        if self.state.done {
            return Ok(());
        }
        let state = &mut self.state;
        self.sse.feed(bytes, &mut |ev| state.handle(ev, on_event));
        match self.state.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether `data: [DONE]` has been seen: the completion is whole.
    pub fn is_done(&self) -> bool {
        self.state.done
    }

    /// Whether any event carrying content, a tool call or a finish reason has been decoded.
    pub fn has_output(&self) -> bool {
        !self.state.assembler.is_empty()
    }

    /// Whether any `data:` event at all arrived. A 200 stream that ends without one told nothing
    /// (llama-cpp-python answers an over-context request so); comments and keep-alives don't count.
    pub fn saw_event(&self) -> bool {
        self.state.events > 0
    }

    /// End of the byte stream. A stream is complete with `[DONE]`, or without it when a
    /// `finish_reason` arrived (several local servers close without `[DONE]`).
    pub fn finish(mut self, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Completion> {
        self.end_of_stream(on_event)?;
        if self.state.done || self.state.assembler.finish_reason().is_some() {
            Ok(self.state.assembler.finish())
        } else {
            Err(ModelError::Network {
                failure: crate::NetworkFailure::Interrupted,
                message: "stream ended before completion (no [DONE] and no finish_reason)"
                    .to_owned(),
            })
        }
    }

    /// End of the byte stream, before deciding what it amounted to: dispatches a last event that
    /// lacked its blank line (a half chunk there is tolerated). Idempotent.
    pub fn end_of_stream(&mut self, on_event: &mut dyn FnMut(StreamEvent)) -> Result<()> {
        if !self.state.done && !self.state.at_eof {
            self.state.at_eof = true;
            let state = &mut self.state;
            self.sse.finish(&mut |ev| state.handle(ev, on_event));
            if let Some(e) = self.state.error.take() {
                return Err(e);
            }
        }
        Ok(())
    }

    /// The completion so far, for a caller that stops at `[DONE]` without draining the socket.
    pub fn into_completion(self) -> Completion {
        self.state.assembler.finish()
    }
}

impl DecodeState {
    fn handle(&mut self, ev: SseEvent, on_event: &mut dyn FnMut(StreamEvent)) {
        if self.done || self.error.is_some() {
            return;
        }
        let data = ev.data.trim();
        if data == "[DONE]" {
            self.events += 1;
            self.done = true;
            return;
        }
        let named_error = ev.event.as_deref() == Some("error");
        // Named non-message events (pings, vendor telemetry) carry no chunk.
        if !named_error && ev.event.as_deref().is_some_and(|e| e != "message") {
            return;
        }
        if data.is_empty() {
            return;
        }
        self.events += 1;
        match serde_json::from_str::<ChatChunk>(data) {
            Ok(chunk) => {
                if let Some(err) = &chunk.error {
                    self.error = Some(classify_stream_error(err, self.api_key.as_deref()));
                    return;
                }
                self.assembler.apply(&chunk, on_event);
            }
            Err(_) if named_error => {
                self.error = Some(ModelError::BadResponse {
                    status: None,
                    message: scrub(data, self.api_key.as_deref()),
                });
            }
            Err(_) if self.at_eof => {}
            Err(e) => {
                self.error = Some(ModelError::BadResponse {
                    status: None,
                    message: format!(
                        "undecodable stream chunk ({e}): {}",
                        scrub(data, self.api_key.as_deref())
                    ),
                });
            }
        }
    }
}

/// Decodes a non-streamed `chat.completion` body (servers that ignore `stream: true`).
pub fn decode_completion_json(
    body: &str,
    api_key: Option<&str>,
    on_event: &mut dyn FnMut(StreamEvent),
) -> Result<Completion> {
    let chunk: ChatChunk = serde_json::from_str(body).map_err(|e| ModelError::BadResponse {
        status: Some(200),
        message: format!("undecodable JSON response ({e}): {}", scrub(body, api_key)),
    })?;
    if let Some(err) = &chunk.error {
        return Err(classify_stream_error(err, api_key));
    }
    let mut assembler = CompletionAssembler::new();
    assembler.apply(&chunk, on_event);
    if assembler.is_empty() {
        return Err(ModelError::BadResponse {
            status: Some(200),
            message: format!("response has no choices: {}", scrub(body, api_key)),
        });
    }
    Ok(assembler.finish())
}
