//! The answer of a tool whose capability returns `Result<T, E>`: serialised as `T` or as `E`
//! (the capability's own failure shape), with the outcome following the variant. The work runs
//! on the blocking pool, because the capabilities that answer this way do file I/O.

use super::{ToolOutput, ToolResult};
use mpa_protocol::Outcome;
use serde::Serialize;
use std::fmt::Display;

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Answer<T, E> {
    Done(T),
    Refused(E),
}

impl<T: Serialize, E: Serialize> ToolResult for Answer<T, E> {
    fn outcome(&self) -> Outcome {
        match self {
            Answer::Done(_) => Outcome::Succeeded,
            Answer::Refused(_) => Outcome::Failed,
        }
    }
}

impl<T, E> From<Result<T, E>> for Answer<T, E> {
    fn from(r: Result<T, E>) -> Self {
        match r {
            Ok(t) => Answer::Done(t),
            Err(e) => Answer::Refused(e),
        }
    }
}

/// `{success: false, error}`: a refusal whose `error` is the capability's own message.
#[derive(Debug, Serialize)]
pub struct Refusal {
    success: bool,
    error: String,
}

impl Refusal {
    pub fn new(error: impl Display) -> Self {
        Self {
            success: false,
            error: error.to_string(),
        }
    }
}

/// Runs `work` on the blocking pool and answers with its result. A panic there becomes the
/// generic `tool_failed` answer (its payload may hold arguments, so it is not shown).
pub async fn answer<T, E>(work: impl FnOnce() -> Result<T, E> + Send + 'static) -> ToolOutput
where
    T: Serialize + Send + 'static,
    E: Serialize + Send + 'static,
{
    answer_write(work, |_| None).await
}

/// As [`answer`] for a write whose success may have changed nothing: `changed` reads that from
/// the typed answer into [`ToolOutput::changed`].
pub async fn answer_write<T, E>(
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
    changed: impl FnOnce(&T) -> Option<bool>,
) -> ToolOutput
where
    T: Serialize + Send + 'static,
    E: Serialize + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(r) => {
            let changed = r.as_ref().ok().and_then(changed);
            let mut out = ToolOutput::result(&Answer::from(r));
            out.changed = changed;
            out
        }
        Err(_) => ToolOutput::failure(
            "tool_failed",
            "tool failed (internal error); check arguments or query current state",
        ),
    }
}
