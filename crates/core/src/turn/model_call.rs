//! The model-call stage: one streamed request. Text and reasoning become events as they arrive;
//! what was received before a stop or a broken stream is kept for the transcript, marked as such;
//! errors keep their stable code.

use super::EventSink;
use mpa_model::{ChatRequest, Completion, ModelClient, ModelError, StreamEvent};
use mpa_protocol::Event;
use tokio_util::sync::CancellationToken;

pub enum ModelCallEnd {
    Answer(Completion),
    Stopped {
        partial: String,
    },
    Failed {
        partial: String,
        code: String,
        message: String,
    },
}

pub async fn call(
    model: &ModelClient,
    req: &ChatRequest<'_>,
    cancel: &CancellationToken,
    sink: &EventSink<'_>,
) -> ModelCallEnd {
    let mut partial = String::new();
    let mut on_event = |ev: StreamEvent| match ev {
        StreamEvent::Content(c) => {
            partial.push_str(&c);
            sink.emit(Event::Delta { content: c });
        }
        StreamEvent::Reasoning(c) => sink.emit(Event::Reasoning { content: c }),
    };
    match model.stream_chat(req, cancel, &mut on_event).await {
        Ok(c) => {
            if let Some(u) = c.usage {
                sink.emit(Event::Usage { usage: u });
            }
            ModelCallEnd::Answer(c)
        }
        Err(ModelError::Cancelled) => ModelCallEnd::Stopped { partial },
        Err(e) => ModelCallEnd::Failed {
            partial,
            code: e.code().to_string(),
            message: e.to_string(),
        },
    }
}
