//! Pure state machines that turn parsed chunks into a [`Completion`](crate::Completion). No I/O.
//!
//! [`ToolCallAssembler`] joins tool-call fragments. Providers disagree on how they fragment:
//! - OpenAI, DeepSeek, vLLM: every fragment carries `index`; the first has `id` and `name`.
//! - llama.cpp / older vLLM / some proxies: no `index`. A fragment whose `id` differs from the
//!   current call's starts a new call; one without `id` continues the last call — unless it names
//!   another function, or names one again after the current arguments are whole JSON (gateways
//!   that send each call complete with neither `index` nor `id`).
//! - Some repeat the `name` on every fragment, or send the whole `arguments` in one fragment, or
//!   reuse one `index` for several calls that have distinct ids.
//!
//! - llama-cpp-python repeats `index`, `id` and `name` on every fragment and duplicates each one
//!   in the legacy `function_call` field (read only when a chunk has no `tool_calls`).
//!
//! Output order is by `index` when every call had one, else arrival order. A call whose id never
//! came gets `call_<n>`; empty arguments become `{}` — unless the answer was cut by the output
//! limit, when they stay empty (cut off, see [`crate::arguments_status`]); fragments that never
//! named a function nor carried arguments are dropped.

use crate::chunk::{ChatChunk, ToolCallDelta};
use crate::{Completion, FinishReason, StreamEvent};
use mpa_protocol::ToolCall;

#[derive(Debug, Clone, Default)]
struct PartialCall {
    index: Option<u32>,
    id: String,
    name: String,
    arguments: String,
}

/// Joins tool-call fragments into whole calls.
#[derive(Debug, Clone, Default)]
pub struct ToolCallAssembler {
    calls: Vec<PartialCall>,
    /// Position in `calls` of the call the last fragment went to.
    current: Option<usize>,
}

impl ToolCallAssembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one fragment.
    pub fn push(&mut self, delta: &ToolCallDelta) {
        let id = delta.id.as_deref().filter(|s| !s.is_empty());
        let slot = match delta.index {
            Some(index) => {
                let same_index = self.calls.iter().rposition(|c| c.index == Some(index));
                match same_index {
                    Some(pos) if !Self::conflicting_id(&self.calls[pos], id) => pos,
                    _ => self.open(Some(index)),
                }
            }
            None => match self.current {
                Some(pos)
                    if !Self::conflicting_id(&self.calls[pos], id)
                        && !Self::starts_anonymous_call(&self.calls[pos], id, delta) =>
                {
                    pos
                }
                _ => self.open(None),
            },
        };
        self.current = Some(slot);
        let call = &mut self.calls[slot];
        if let Some(id) = id
            && call.id.is_empty()
        {
            call.id = id.to_owned();
        }
        if let Some(function) = &delta.function {
            if let Some(name) = function.name.as_deref().filter(|n| !n.is_empty()) {
                // A repeated name is a restatement, not a fragment to append.
                if call.name.is_empty() {
                    call.name = name.to_owned();
                } else if call.name != name {
                    call.name.push_str(name);
                }
            }
            if let Some(arguments) = &function.arguments {
                call.arguments.push_str(arguments);
            }
        }
    }

    fn conflicting_id(call: &PartialCall, id: Option<&str>) -> bool {
        matches!(id, Some(id) if !call.id.is_empty() && call.id != id)
    }

    /// Without index and id, a fragment naming a function opens a new call when it names another
    /// function, or names one again with arguments after the current call's arguments are whole
    /// JSON (gateways that send each call complete, unnumbered). A bare repeat of the name with
    /// no arguments is a restatement.
    fn starts_anonymous_call(call: &PartialCall, id: Option<&str>, delta: &ToolCallDelta) -> bool {
        if id.is_some() || call.name.is_empty() {
            return false;
        }
        let Some(function) = &delta.function else {
            return false;
        };
        let Some(name) = function.name.as_deref().filter(|n| !n.is_empty()) else {
            return false;
        };
        if name != call.name {
            return true;
        }
        let has_args = function
            .arguments
            .as_deref()
            .is_some_and(|a| !a.trim().is_empty());
        has_args
            && !call.arguments.trim().is_empty()
            && serde_json::from_str::<serde::de::IgnoredAny>(&call.arguments).is_ok()
    }

    fn open(&mut self, index: Option<u32>) -> usize {
        self.calls.push(PartialCall {
            index,
            ..PartialCall::default()
        });
        self.calls.len() - 1
    }

    /// Whether any fragment has been seen.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The assembled calls, in index order (or arrival order when some call had no index).
    /// Empty arguments become `{}` (a call without parameters).
    pub fn finish(self) -> Vec<ToolCall> {
        self.finish_with(false)
    }

    /// [`ToolCallAssembler::finish`], but when `cut` (the output limit ended the answer) empty
    /// arguments stay empty: the call was cut before its arguments began.
    pub fn finish_with(self, cut: bool) -> Vec<ToolCall> {
        let mut calls: Vec<PartialCall> = self
            .calls
            .into_iter()
            .filter(|c| !c.name.is_empty() || !c.arguments.trim().is_empty())
            .collect();
        if calls.iter().all(|c| c.index.is_some()) {
            calls.sort_by_key(|c| c.index);
        }
        calls
            .into_iter()
            .enumerate()
            .map(|(n, c)| ToolCall {
                id: if c.id.is_empty() {
                    format!("call_{n}")
                } else {
                    c.id
                },
                name: c.name,
                arguments: if c.arguments.trim().is_empty() && !cut {
                    "{}".to_owned()
                } else {
                    c.arguments
                },
            })
            .collect()
    }
}

/// Accumulates whole chunks: text, reasoning, tool calls, usage and finish reason.
///
/// Only choice 0 is read (the client never asks for `n > 1`); a chunk whose choices carry another
/// index is ignored.
#[derive(Debug, Clone, Default)]
pub struct CompletionAssembler {
    content: String,
    reasoning: String,
    tools: ToolCallAssembler,
    usage: Option<mpa_protocol::Usage>,
    finish_reason: Option<FinishReason>,
}

impl CompletionAssembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies a chunk, emitting text and reasoning as they arrive. In-stream errors are not
    /// looked at here (see [`crate::decoder`]).
    pub fn apply(&mut self, chunk: &ChatChunk, on_event: &mut dyn FnMut(StreamEvent)) {
        if let Some(usage) = &chunk.usage {
            self.usage = Some(usage.to_usage());
        }
        for choice in &chunk.choices {
            if choice.index.is_some_and(|i| i != 0) {
                continue;
            }
            if let Some(usage) = &choice.usage {
                self.usage = Some(usage.to_usage());
            }
            for delta in [&choice.delta, &choice.message].into_iter().flatten() {
                let reasoning = delta
                    .reasoning_content
                    .as_deref()
                    .or(delta.reasoning.as_deref());
                if let Some(r) = reasoning.filter(|r| !r.is_empty()) {
                    self.reasoning.push_str(r);
                    on_event(StreamEvent::Reasoning(r.to_owned()));
                }
                if let Some(c) = delta.content.as_deref().filter(|c| !c.is_empty()) {
                    self.content.push_str(c);
                    on_event(StreamEvent::Content(c.to_owned()));
                }
                for call in &delta.tool_calls {
                    self.tools.push(call);
                }
                if delta.tool_calls.is_empty()
                    && let Some(function) = &delta.function_call
                {
                    self.tools.push(&ToolCallDelta {
                        index: None,
                        id: None,
                        function: Some(function.clone()),
                    });
                }
            }
            if let Some(reason) = choice.finish_reason.as_deref().filter(|r| !r.is_empty()) {
                self.finish_reason = Some(FinishReason::from_wire(reason));
            }
        }
    }

    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.finish_reason.as_ref()
    }

    /// Whether anything at all has been assembled.
    pub fn is_empty(&self) -> bool {
        self.content.is_empty()
            && self.reasoning.is_empty()
            && self.tools.is_empty()
            && self.finish_reason.is_none()
    }

    pub fn finish(self) -> Completion {
        let cut = self.finish_reason == Some(FinishReason::Length);
        Completion {
            content: self.content,
            reasoning: self.reasoning,
            tool_calls: self.tools.finish_with(cut),
            usage: self.usage,
            finish_reason: self.finish_reason,
        }
    }
}
