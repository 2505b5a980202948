//! Why an agent loop ended without a final answer: typed, with the stable code front ends and
//! logs key on ([`TurnError::code`]) and the text the user reads ([`TurnError::message`]).

use super::compact::CompactError;
use mpa_model::ModelError;
use mpa_protocol::ErrorKind;

const CONTEXT_EXCEEDED_HELP: &str = "The conversation no longer fits the model's context window: start \
a new session, or raise the model server's context size (and LLM_MAX_CONTEXT_TOKENS)";

const EMPTY_ANSWER_FAILED: &str = "the model returned an empty answer twice (no text and no tool call); \
nothing was done after that — try again, or use a more capable model";

const CONTINUATION_EXHAUSTED: &str = "本轮未完成：模型仍只描述下一步，未给出完成结果。\n\
This turn is not finished: after two prompts to continue, the model still only described its next \
step instead of doing it or giving a result";

const OUTPUT_TRUNCATED: &str = "the answer was cut off by the model's output limit \
(LLM_MAX_OUTPUT_TOKENS); ask to continue, or raise the limit";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnError {
    /// The model call failed (its own code: `model_auth_failed`, `model_context_exceeded`, …).
    Model(ModelError),
    /// `LLM_MAX_ITERATIONS` model calls without a final answer.
    IterationLimit { max_model_calls: u32 },
    /// The loop's input-token budget is spent (the background review's).
    InputBudget { budget: u64 },
    /// Two empty answers in a row.
    EmptyAnswer,
    /// The final answer was cut off by the output limit (the turn is `partial`).
    OutputTruncated,
    /// The request is over the window and compaction could not make it fit.
    Compaction(CompactError),
    /// The turn's snapshot or journal could not be written (`full`: the disk is full): the turn
    /// is not acknowledged; the session keeps it in memory and saves it with the next write.
    Storage { full: bool, lang: Lang },
    /// The model kept announcing work it did not do after the host's continuation prompts (the
    /// turn is `partial`).
    ContinuationExhausted,
}

/// The language a message to the user is written in: the language of what the user wrote.
pub use mpa_protocol::Lang;

impl TurnError {
    /// The stable machine-readable code (the wire `code` of [`mpa_protocol::Event::Error`]).
    pub fn code(&self) -> &'static str {
        match self {
            TurnError::Model(e) if e.is_unreachable() => "model_unreachable",
            TurnError::Model(e) => e.code(),
            TurnError::IterationLimit { .. } => "iteration_limit",
            TurnError::InputBudget { .. } => "input_budget",
            TurnError::EmptyAnswer => "model_empty_answer",
            TurnError::OutputTruncated => "output_truncated",
            TurnError::Compaction(e) => e.code(),
            TurnError::Storage { full: true, .. } => "storage_full",
            TurnError::Storage { full: false, .. } => "storage_error",
            TurnError::ContinuationExhausted => "continuation_exhausted",
        }
    }

    /// What the user reads.
    pub fn message(&self) -> String {
        match self {
            TurnError::Model(e @ ModelError::ContextLengthExceeded { .. }) => {
                format!("{e}. {CONTEXT_EXCEEDED_HELP}")
            }
            // What to set, not a socket error: the first thing a new user meets without a model.
            TurnError::Model(e @ ModelError::Network { message, .. }) if e.is_unreachable() => {
                format!(
                    "The model service cannot be reached ({message}). Check that LLM_BASE_URL points to a \
                     running OpenAI-compatible server and LLM_MODEL names a model it serves, then retry."
                )
            }
            TurnError::Model(e) => e.to_string(),
            TurnError::IterationLimit { max_model_calls } => format!(
                "the turn reached LLM_MAX_ITERATIONS ({max_model_calls}) model calls without a final answer; the work may be incomplete"
            ),
            TurnError::InputBudget { budget } => {
                format!("the input-token budget ({budget}) is used up")
            }
            TurnError::EmptyAnswer => EMPTY_ANSWER_FAILED.to_string(),
            TurnError::OutputTruncated => OUTPUT_TRUNCATED.to_string(),
            TurnError::Compaction(e) => e.message().to_string(),
            TurnError::Storage { full, lang } => storage_message(*full, *lang).to_string(),
            TurnError::ContinuationExhausted => CONTINUATION_EXHAUSTED.to_string(),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        match self {
            TurnError::Model(ModelError::ContextLengthExceeded { .. })
            | TurnError::Compaction(_) => ErrorKind::Context,
            TurnError::Model(_) => ErrorKind::Model,
            TurnError::IterationLimit { .. }
            | TurnError::InputBudget { .. }
            | TurnError::EmptyAnswer
            | TurnError::OutputTruncated
            | TurnError::ContinuationExhausted => ErrorKind::Limit,
            TurnError::Storage { .. } => ErrorKind::Internal,
        }
    }

    /// The event front ends show.
    pub fn to_event(&self) -> mpa_protocol::Event {
        mpa_protocol::Event::Error {
            kind: self.kind(),
            code: self.code().to_string(),
            message: self.message(),
        }
    }
}

fn storage_message(full: bool, lang: Lang) -> &'static str {
    match (full, lang) {
        (true, Lang::En) => {
            "This turn was not saved: the host's disk is full. It is kept in memory and saved with your next message once space is freed; until then it would be lost if the host restarts."
        }
        (true, Lang::Zh) => {
            "本轮对话未能保存：主机磁盘已满。本轮内容暂存在内存中，释放空间后会随下一条消息一起保存；在此之前主机重启会丢失它。"
        }
        (false, Lang::En) => {
            "This turn was not saved (a storage error). It is kept in memory and saved with your next message; if this persists, check the host's data directory."
        }
        (false, Lang::Zh) => {
            "本轮对话未能保存（存储错误）。本轮内容暂存在内存中，会随下一条消息一起保存；如果持续出现，请检查主机的数据目录。"
        }
    }
}

impl std::fmt::Display for TurnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_stay_the_wire_codes() {
        let exceeded = TurnError::Model(ModelError::ContextLengthExceeded {
            status: Some(400),
            message: "too long".into(),
        });
        assert_eq!(exceeded.code(), "model_context_exceeded");
        assert!(exceeded.message().ends_with("(and LLM_MAX_CONTEXT_TOKENS)"));
        assert_eq!(exceeded.kind(), ErrorKind::Context);
        assert_eq!(
            TurnError::IterationLimit { max_model_calls: 3 }.code(),
            "iteration_limit"
        );
        assert_eq!(TurnError::EmptyAnswer.kind(), ErrorKind::Limit);
        assert_eq!(
            TurnError::Compaction(CompactError::StillOver).code(),
            "context_still_over_window"
        );
        let full = TurnError::Storage {
            full: true,
            lang: Lang::of("帮我订阅沙丘"),
        };
        assert_eq!(full.code(), "storage_full");
        assert!(full.message().contains("磁盘已满"));
        let error = TurnError::Storage {
            full: false,
            lang: Lang::of("subscribe to Dune"),
        };
        assert_eq!(error.code(), "storage_error");
        assert!(error.message().starts_with("This turn was not saved"));
    }
}
