//! Request assembly: the session's frozen system prompt, the transcript (borrowed, never copied),
//! and — last, so the prompt prefix stays byte-identical for provider caches — what changes from
//! call to call: the outbound contributors' blocks (acting note, plan, tool availability, …),
//! appended to an outbound copy of the final message, and a host continuation after it.
//!
//! A proposed compaction sends its `prefix` (summary + the task's first user message) in place
//! of the transcript's compacted part — the transcript itself changes only once the call
//! succeeded.

use mpa_model::ChatRequest;
use mpa_protocol::{Content, ContentPart, Message, ToolSpec};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Outbound-only changes to transcript messages, by their index in the transcript: a copy sent
/// in a message's place, and messages sent right after it (the vision projection's tool notes
/// and observation messages). Shared, so counting a request does not copy image data.
#[derive(Debug, Default, Clone)]
pub struct Patches {
    pub replace: BTreeMap<usize, Message>,
    pub after: BTreeMap<usize, Vec<Message>>,
}

impl Patches {
    pub fn is_empty(&self) -> bool {
        self.replace.is_empty() && self.after.is_empty()
    }

    /// The message sent last for the transcript's message `index`.
    fn last_for<'a>(&'a self, index: usize, own: &'a Message) -> &'a Message {
        self.after
            .get(&index)
            .and_then(|v| v.last())
            .or_else(|| self.replace.get(&index))
            .unwrap_or(own)
    }
}

/// The outbound-only tail of one request.
#[derive(Default)]
pub struct Tail {
    /// Changes to transcript messages on this request's copy (see [`Patches`]).
    patches: Arc<Patches>,
    /// The final transcript message with the plan block appended.
    last: Option<Message>,
    /// What `last` has beyond the transcript's message: the blocks, with their separator when
    /// they follow text, or as a part of their own.
    appendix: Option<String>,
    /// A host continuation after the transcript (outbound only, never saved).
    continuation: Option<Message>,
}

impl Tail {
    /// `blocks` are appended, in order and separated by blank lines, to the outbound copy of the
    /// transcript's final message.
    pub fn new<S: AsRef<str>>(transcript: &[Message], blocks: &[S]) -> Self {
        Self::patched(transcript, Arc::default(), blocks)
    }

    /// [`Tail::new`] on the request's copy of the transcript with `patches` applied: the blocks
    /// go on the message sent last.
    pub fn patched<S: AsRef<str>>(
        transcript: &[Message],
        patches: Arc<Patches>,
        blocks: &[S],
    ) -> Self {
        let mut extra = String::new();
        for block in blocks {
            if !extra.is_empty() {
                extra.push_str("\n\n");
            }
            extra.push_str(block.as_ref());
        }
        let final_index = transcript.len().saturating_sub(1);
        let (last, appendix) = match (transcript.last(), extra.is_empty()) {
            (Some(m), false) => {
                let mut m = patches.last_for(final_index, m).clone();
                let appendix = append_text(&mut m, &extra);
                (Some(m), Some(appendix))
            }
            _ => (None, None),
        };
        Self {
            patches,
            last,
            appendix,
            continuation: None,
        }
    }

    /// The same tail without the blocks appended to the final message (for counting: that
    /// message is then the transcript's own, already counted, and [`Tail::appendix`] the rest).
    pub fn without_appendix(&self) -> Self {
        Self {
            patches: Arc::clone(&self.patches),
            last: None,
            appendix: None,
            continuation: self.continuation.clone(),
        }
    }

    /// The text appended to the final message, as it is sent.
    pub fn appendix(&self) -> Option<&str> {
        self.appendix.as_deref()
    }

    /// A host note after the transcript (asking to continue); sent once, never saved.
    pub fn continuation(&mut self, text: &str) {
        self.continuation = Some(Message::user(text));
    }
}

/// Appends `extra` to the message's text; returns what was added.
fn append_text(m: &mut Message, extra: &str) -> String {
    match &mut m.content {
        Content::Text(t) => {
            let added = if t.is_empty() {
                extra.to_string()
            } else {
                format!("\n\n{extra}")
            };
            t.push_str(&added);
            added
        }
        Content::Parts(parts) => {
            parts.push(ContentPart::Text {
                text: extra.to_string(),
            });
            extra.to_string()
        }
    }
}

/// The request: system, `prefix` (a proposed compaction's, else empty), the transcript (whose
/// first message is the transcript's message `base`: the part a proposed compaction keeps) with
/// the tail's patches applied, the tail.
pub fn assemble<'a>(
    system: &'a Message,
    prefix: &'a [Message],
    (base, transcript): (usize, &'a [Message]),
    tail: &'a Tail,
    tools: &'a [ToolSpec],
) -> ChatRequest<'a> {
    let patches = &*tail.patches;
    let extra: usize = patches.after.values().map(Vec::len).sum();
    let mut messages = Vec::with_capacity(prefix.len() + transcript.len() + extra + 2);
    messages.push(system);
    messages.extend(prefix);
    let before = messages.len();
    if patches.is_empty() {
        messages.extend(transcript);
    } else {
        for (i, m) in transcript.iter().enumerate() {
            messages.push(patches.replace.get(&(base + i)).unwrap_or(m));
            if let Some(after) = patches.after.get(&(base + i)) {
                messages.extend(after);
            }
        }
    }
    if let Some(last) = &tail.last {
        if messages.len() > before {
            messages.pop();
        }
        messages.push(last);
    }
    if let Some(c) = &tail.continuation {
        messages.push(c);
    }
    ChatRequest {
        messages,
        tools,
        tool_choice: None,
    }
}
