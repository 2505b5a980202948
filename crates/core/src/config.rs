use std::time::Duration;

/// Typed runtime configuration handed down from the CLI's `Config` (no library crate reads the
/// environment).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub model: mpa_model::ModelConfig,
    /// Model calls per turn before the turn ends with `iteration_limit` (`LLM_MAX_ITERATIONS`).
    pub max_iterations: u32,
    /// Per tool call; `None` = unlimited (`LLM_TOOL_TIMEOUT=0`).
    pub tool_timeout: Option<Duration>,
    /// Tool calls of one model response run concurrently up to this bound.
    pub max_parallel_tools: usize,
    /// Tools offered on a request's first model call besides the always-on internal ones
    /// (`LLM_MAX_TOOLS`; 0 = every tool, no discovery).
    pub max_tools: u32,
    /// Fallback context window in K tokens when the catalogue does not know the model.
    pub max_context_tokens_k: u64,
    pub support_image_input: bool,
    /// Turns that may wait behind the running one in a session (`agent_manager_queue_full` beyond).
    pub queue_capacity: usize,
    /// User turns between background memory reviews (0 = off).
    pub memory_review_interval: u32,
    /// Tool-using model iterations between background skill reviews (0 = off).
    pub skill_review_interval: u32,
    /// A session actor idle this long is reclaimed (reloaded from its snapshot on next use).
    pub session_idle: Duration,
    /// Largest text of one message, in bytes (`MPA_MAX_MESSAGE_KB`): judged before anything is
    /// stored (see [`crate::admission`]).
    pub max_message_bytes: usize,
    /// Free bytes the data directory's file system must keep for a new turn to be accepted
    /// (`MPA_MIN_FREE_MB`; 0 = not checked). See [`crate::disk`].
    pub min_free_bytes: u64,
    /// How long a cancelled subagent gets to stop (5 s, spec runtime.md §8.1).
    pub subagent_cancel_grace: Duration,
}

impl AgentConfig {
    pub fn new(model: mpa_model::ModelConfig) -> Self {
        Self {
            model,
            max_iterations: 512,
            tool_timeout: Some(Duration::from_secs(300)),
            max_parallel_tools: 8,
            max_tools: 0,
            max_context_tokens_k: 128,
            support_image_input: true,
            queue_capacity: 8,
            memory_review_interval: 10,
            skill_review_interval: 10,
            session_idle: Duration::from_secs(600),
            max_message_bytes: crate::admission::DEFAULT_MAX_MESSAGE_BYTES,
            min_free_bytes: crate::disk::DEFAULT_MIN_FREE_BYTES,
            subagent_cancel_grace: crate::subagent::controller::CANCEL_GRACE,
        }
    }
}
