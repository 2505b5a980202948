//! The output limit: parameter swaps, model limits, refits after a context refusal.

use mpa_model::error::ModelError;
use mpa_model::output_limit::*;
use mpa_model::wire::OutputLimitParam;

const SENT: OutputLimit = OutputLimit {
    tokens: Some(4096),
    param: OutputLimitParam::MaxTokens,
};

fn invalid(message: &str) -> ModelError {
    ModelError::InvalidRequest {
        status: Some(400),
        message: message.into(),
    }
}

fn context(message: &str) -> ModelError {
    ModelError::ContextLengthExceeded {
        status: Some(400),
        message: message.into(),
    }
}

fn tokens(n: u32) -> Option<OutputLimit> {
    Some(OutputLimit {
        tokens: Some(n),
        ..SENT
    })
}

#[test]
fn parameter_name_swaps() {
    let e = invalid(
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
    );
    assert_eq!(
        refit(&e, SENT),
        Some(OutputLimit {
            tokens: Some(4096),
            param: OutputLimitParam::MaxCompletionTokens
        })
    );
    let sent = OutputLimit {
        param: OutputLimitParam::MaxCompletionTokens,
        ..SENT
    };
    let e = invalid("Unrecognized request argument supplied: max_completion_tokens");
    assert_eq!(
        refit(&e, sent).map(|l| l.param),
        Some(OutputLimitParam::MaxTokens)
    );
}

#[test]
fn model_limits_lower_the_request() {
    let e = invalid(
        "max_tokens is too large: 20000. This model supports at most 16384 completion tokens, whereas you provided 20000.",
    );
    assert_eq!(
        refit(
            &e,
            OutputLimit {
                tokens: Some(20_000),
                ..SENT
            }
        ),
        tokens(16_384)
    );
    let e = invalid(
        "max_tokens: 8192 > 4096, which is the maximum allowed number of output tokens for claude-3-opus-20240229",
    );
    assert_eq!(
        refit(
            &e,
            OutputLimit {
                tokens: Some(8192),
                ..SENT
            }
        ),
        tokens(4096)
    );
}

#[test]
fn context_refusals_that_count_the_completion_fit_the_room_left() {
    let e = context(
        "This model's maximum context length is 16384 tokens. However, you requested 19591 tokens (9591 in the messages, 10000 in the completion). Please reduce the length of the messages or completion.",
    );
    assert_eq!(
        refit(
            &e,
            OutputLimit {
                tokens: Some(10_000),
                ..SENT
            }
        ),
        tokens(6793)
    );
    let e = context(
        "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum context length is 8192 tokens and your request has 5000 input tokens (4096 > 8192 - 5000).",
    );
    assert_eq!(refit(&e, SENT), tokens(3192));
    let e = context(
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 3474 `inputs` tokens and 4096 `max_new_tokens`",
    );
    assert_eq!(refit(&e, SENT), tokens(622));
}

#[test]
fn refusals_without_room_or_numbers_stay_errors() {
    // llama-cpp-python: the prompt alone is over the window.
    let e = context(
        "This model's maximum context length is 2048 tokens. However, you requested 4722 tokens (4722 in the messages, None in the completion). Please reduce the length of the messages or completion.",
    );
    assert_eq!(refit(&e, SENT), None);
    // Only a few tokens would be left.
    let e = context(
        "This model's maximum context length is 4096 tokens. However, you requested 8000 tokens (4000 in the messages, 4000 in the completion).",
    );
    assert_eq!(refit(&e, SENT), None);
    assert_eq!(
        refit(
            &context("prompt is too long: 205106 tokens > 200000 maximum"),
            SENT
        ),
        None
    );
    assert_eq!(refit(&invalid("model 'x' not found"), SENT), None);
    let unlimited = OutputLimit {
        tokens: None,
        ..SENT
    };
    assert_eq!(
        refit(&invalid("max_tokens is not supported"), unlimited),
        None
    );
    assert_eq!(
        refit(
            &ModelError::Server {
                status: Some(500),
                message: "supports at most 10 completion tokens".into()
            },
            SENT
        ),
        None
    );
}
