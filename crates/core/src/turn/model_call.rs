//! The model-call stage: one streamed request. Text and reasoning become events as they arrive;
//! what was received before a stop or a broken stream is kept for the transcript, marked as such;
//! errors keep their stable code.

use crate::handle::EventSink;
use mpa_model::{ChatRequest, Completion, ModelClient, ModelError, StreamEvent};
use mpa_protocol::Event;
use tokio_util::sync::CancellationToken;

pub enum ModelCallEnd {
    Answer(Completion),
    Stopped { partial: String },
    Failed { partial: String, error: ModelError },
}

pub async fn call(
    model: &ModelClient,
    req: &ChatRequest<'_>,
    cancel: &CancellationToken,
    sink: &EventSink,
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
        Err(error) => ModelCallEnd::Failed { partial, error },
    }
}

/// Per-session usage, from the provider's own usage fields (the host's estimate, marked, when it
/// reports none), shown in the session detail.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct UsageSnapshot {
    pub last_input_tokens: u64,
    pub last_output_tokens: u64,
    pub last_total_tokens: u64,
    pub last_cache_read_tokens: u64,
    pub last_cache_write_tokens: u64,
    /// Cached share of the last request's input tokens.
    pub last_cache_hit_ratio: f64,
    /// The last figures are the host's estimate (the provider reported none).
    pub last_usage_estimated: bool,
    /// What the host estimated for the last request (as budgeted: exact with a tokenizer, with
    /// the serialisation factor for the estimate).
    pub last_estimated_input_tokens: u64,
    /// How that was counted: `o200k_base`, `cl100k_base` or `calibrated_estimate`.
    pub estimator: String,
    pub context_window_tokens: u64,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    pub total_tokens: u64,
    pub total_cache_read_tokens: u64,
    pub total_cache_write_tokens: u64,
    pub model_call_count: u64,
    /// What background reviews of this session used (already inside the totals above).
    pub review_total_tokens: u64,
    pub review_model_call_count: u64,
}

impl UsageSnapshot {
    /// Records one answered model call.
    pub fn record(&mut self, u: &mpa_protocol::Usage, budget: &mpa_protocol::RequestBudget) {
        self.last_input_tokens = u.input_tokens;
        self.last_output_tokens = u.output_tokens;
        self.last_total_tokens = u.total_tokens;
        self.last_cache_read_tokens = u.cache_read_tokens;
        self.last_cache_write_tokens = u.cache_write_tokens;
        self.last_cache_hit_ratio = if u.input_tokens == 0 {
            0.0
        } else {
            ((u.cache_read_tokens as f64 / u.input_tokens as f64) * 10_000.0).round() / 10_000.0
        };
        self.last_usage_estimated = u.estimated;
        self.last_estimated_input_tokens = budget.estimated_input_tokens;
        self.estimator.clone_from(&budget.estimator);
        self.context_window_tokens = budget.context_window_tokens;
        self.total_input_tokens += u.input_tokens;
        self.total_output_tokens += u.output_tokens;
        self.total_tokens += u.total_tokens;
        self.total_cache_read_tokens += u.cache_read_tokens;
        self.total_cache_write_tokens += u.cache_write_tokens;
        self.model_call_count += 1;
    }

    /// Adds a background review's usage to the totals; the `last_*` figures stay those of the
    /// conversation's own last request.
    pub fn record_review(&mut self, u: &mpa_protocol::Usage, model_calls: u32) {
        self.total_input_tokens += u.input_tokens;
        self.total_output_tokens += u.output_tokens;
        self.total_tokens += u.total_tokens;
        self.total_cache_read_tokens += u.cache_read_tokens;
        self.total_cache_write_tokens += u.cache_write_tokens;
        self.model_call_count += u64::from(model_calls);
        self.review_total_tokens += u.total_tokens;
        self.review_model_call_count += u64::from(model_calls);
    }
}
