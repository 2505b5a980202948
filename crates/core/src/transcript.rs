//! A session's active messages, plus what the evidence capture has already taken from them.
//!
//! Messages are only appended during a turn (the end stage may annotate this turn's messages:
//! redaction, the plan snapshot, an interruption notice), so "captured" is a watermark: everything
//! before it is in the evidence store. A capped tool result keeps its full content beside it until
//! it is captured, so the evidence store gets the whole result while the model reads the preview.
//!
//! What the user sees is not what the model reads: a compaction replaces older messages with a
//! summary in the model's context, but their display lines stay, marked `compacted`, in the
//! display archive ahead of the live messages' lines. The display list only ever grows; the
//! archive is persisted as the leading `compacted` lines of the chat's `display_messages`.
//!
//! Beside the messages it keeps their token counts ([`Transcript::tokens`]), so a model call
//! tokenizes only what is new (the cache is keyed by content: edits and compactions need no
//! bookkeeping here).

use mpa_protocol::Message;
use std::collections::HashMap;

#[derive(Debug, Default, Clone)]
pub struct Transcript {
    messages: Vec<Message>,
    captured: usize,
    /// Full contents of capped tool results not yet captured, by message index.
    full: HashMap<usize, String>,
    /// Each compaction as (cut, inserted): `messages[..cut]` became `inserted` messages.
    compactions: Vec<(usize, usize)>,
    /// Display lines of the messages compacted out of the context, oldest first, each marked
    /// `"compacted": true`.
    archive: Vec<serde_json::Value>,
    /// Token counts of the messages (and of the requests' other parts) already counted.
    tokens: mpa_model::TokenCache,
}

impl Transcript {
    /// A new transcript none of which is in the evidence store yet (a nested agent's task).
    pub fn fresh(messages: Vec<Message>) -> Self {
        let mut t = Self::restored(messages);
        t.captured = 0;
        t
    }

    /// A transcript loaded from a snapshot: everything in it was captured when it was written.
    pub fn restored(messages: Vec<Message>) -> Self {
        Self {
            captured: messages.len(),
            messages,
            full: HashMap::new(),
            compactions: Vec::new(),
            archive: Vec::new(),
            tokens: mpa_model::TokenCache::new(),
        }
    }

    /// Keeps the display lines of earlier compactions: the leading `compacted` lines of a saved
    /// chat's `display_messages`.
    pub fn with_display_archive(mut self, display: &serde_json::Value) -> Self {
        self.archive = display
            .as_array()
            .into_iter()
            .flatten()
            .take_while(|l| is_archived(l))
            .cloned()
            .collect();
        self
    }

    /// The display list: the archived lines, then the live messages' lines.
    pub fn display(&self) -> serde_json::Value {
        self.display_upto(self.messages.len())
    }

    /// The display list up to (not including) the live message `upto`.
    pub fn display_upto(&self, upto: usize) -> serde_json::Value {
        let live = &self.messages[..upto.min(self.messages.len())];
        let mut lines = self.archive.clone();
        lines.extend(crate::turn::end::display_lines(live));
        serde_json::Value::Array(lines)
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The same transcript with counts made for these messages elsewhere (a copy of the
    /// session's, for a background review).
    pub fn with_tokens(mut self, tokens: mpa_model::TokenCache) -> Self {
        self.tokens = tokens;
        self
    }

    /// The conversation's token-count cache (for [`mpa_model::TokenCounter::breakdown`]).
    pub fn tokens(&self) -> &mpa_model::TokenCache {
        &self.tokens
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn push(&mut self, m: Message) {
        self.messages.push(m);
    }

    /// Appends a tool result whose message holds a capped preview of `full`.
    pub fn push_with_full(&mut self, m: Message, full: Option<String>) {
        if let Some(full) = full {
            self.full.insert(self.messages.len(), full);
        }
        self.messages.push(m);
    }

    /// Drops the messages from `at` on (the user regenerating or editing their last message);
    /// `false`, and nothing dropped, when `at` lies inside what a compaction produced. Evidence
    /// already captured stays in the history store (it happened).
    pub fn rewind(&mut self, at: usize) -> bool {
        let floor = self.compactions.last().map_or(0, |(_, inserted)| *inserted);
        if at < floor || at > self.messages.len() {
            return false;
        }
        self.messages.truncate(at);
        self.captured = self.captured.min(at);
        self.full.retain(|i, _| *i < at);
        true
    }

    /// The messages from `from` on, to annotate at the end of a turn.
    pub fn tail_mut(&mut self, from: usize) -> &mut [Message] {
        let from = from.min(self.messages.len());
        &mut self.messages[from..]
    }

    /// The messages not yet captured, each with its full content when the message holds a
    /// preview. Call [`Transcript::mark_captured`] once they are stored.
    pub fn uncaptured(&mut self) -> (usize, Vec<(&mut Message, Option<String>)>) {
        let from = self.captured;
        let full = &self.full;
        let items = self.messages[from..]
            .iter_mut()
            .enumerate()
            .map(|(i, m)| (m, full.get(&(from + i)).cloned()))
            .collect();
        (from, items)
    }

    /// Everything up to `upto` is in the evidence store; their full contents are dropped.
    pub fn mark_captured(&mut self, upto: usize) {
        self.captured = upto.min(self.messages.len()).max(self.captured);
        let captured = self.captured;
        self.full.retain(|i, _| *i >= captured);
    }

    pub fn captured(&self) -> usize {
        self.captured
    }

    /// Replaces `messages[..cut]` with `prefix` (a compaction summary and the kept first user
    /// message). The replaced messages must already be in the evidence store (or there is none):
    /// the watermark moves with the messages, the prefix counts as captured.
    /// Returns the replaced messages.
    pub fn compact(&mut self, cut: usize, prefix: Vec<Message>) -> Vec<Message> {
        let cut = cut.min(self.messages.len());
        let inserted = prefix.len();
        let removed: Vec<Message> = self.messages.splice(..cut, prefix).collect();
        self.captured = if self.captured >= cut {
            self.captured - cut + inserted
        } else {
            inserted
        };
        self.full = std::mem::take(&mut self.full)
            .into_iter()
            .filter(|(i, _)| *i >= cut)
            .map(|(i, f)| (i - cut + inserted, f))
            .collect();
        self.compactions.push((cut, inserted));
        self.archive.extend(
            crate::turn::end::display_lines(&removed)
                .into_iter()
                .map(|mut l| {
                    if let Some(o) = l.as_object_mut() {
                        o.insert("compacted".into(), serde_json::Value::Bool(true));
                    }
                    l
                }),
        );
        removed
    }

    /// How many compactions happened (a mark for [`Transcript::rebase`]).
    pub fn compaction_count(&self) -> usize {
        self.compactions.len()
    }

    /// Where the message at `index` (before the compactions from `since` on) is now; a message
    /// that was compacted away maps to the first message after the inserted prefix.
    pub fn rebase(&self, index: usize, since: usize) -> usize {
        self.compactions
            .iter()
            .skip(since)
            .fold(index, |i, &(cut, inserted)| {
                if i >= cut {
                    i - cut + inserted
                } else {
                    inserted
                }
            })
    }

    /// Between turns: a streamed answer's text and the message list grew in steps during the
    /// turn, and the map of full contents is empty once they are captured — keep only what is
    /// held.
    pub fn release_turn_memory(&mut self) {
        self.messages.iter_mut().for_each(shrink);
        self.messages.shrink_to_fit();
        self.full.shrink_to_fit();
        self.compactions.shrink_to_fit();
        self.archive.shrink_to_fit();
    }

    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }
}

/// Cuts a message's buffers to what they hold (a no-op for one already cut).
fn shrink(m: &mut Message) {
    match &mut m.content {
        mpa_protocol::Content::Text(t) => t.shrink_to_fit(),
        mpa_protocol::Content::Parts(parts) => parts.shrink_to_fit(),
    }
    for c in &mut m.tool_calls {
        c.arguments.shrink_to_fit();
    }
    m.tool_calls.shrink_to_fit();
}

fn is_archived(line: &serde_json::Value) -> bool {
    line.get("compacted").and_then(serde_json::Value::as_bool) == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpa_protocol::Outcome;

    #[test]
    fn the_watermark_moves_only_forward_and_full_contents_last_until_captured() {
        let mut t = Transcript::restored(vec![Message::user("old")]);
        assert_eq!(t.uncaptured().1.len(), 0);
        t.push(Message::user("new"));
        t.push_with_full(
            Message::tool("c", "x", "preview", Outcome::Succeeded),
            Some("the whole result".into()),
        );
        let (from, items) = t.uncaptured();
        assert_eq!(from, 1);
        let full: Vec<Option<String>> = items.into_iter().map(|(_, f)| f).collect();
        assert_eq!(full, vec![None, Some("the whole result".into())]);
        // A failed flush asks again and gets the full content again.
        assert_eq!(t.uncaptured().1[1].1.as_deref(), Some("the whole result"));
        t.mark_captured(3);
        t.mark_captured(1);
        assert_eq!(t.captured(), 3);
        assert!(t.uncaptured().1.is_empty());
    }

    #[test]
    fn a_compaction_moves_the_watermark_and_the_full_contents_with_the_messages() {
        let mut t = Transcript::restored((0..6).map(|i| Message::user(format!("m{i}"))).collect());
        t.push_with_full(
            Message::tool("c", "x", "preview", Outcome::Succeeded),
            Some("whole".into()),
        );
        let mark = t.compaction_count();
        t.compact(4, vec![Message::user("summary")]);
        assert_eq!(t.len(), 4);
        assert_eq!(t.messages()[1].text(), "m4");
        assert_eq!(t.captured(), 3);
        let (from, items) = t.uncaptured();
        assert_eq!(from, 3);
        assert_eq!(items[0].1.as_deref(), Some("whole"));
        assert_eq!(t.rebase(6, mark), 3);
        assert_eq!(t.rebase(2, mark), 1);
    }

    fn summary(text: &str) -> Message {
        let mut m = Message::user(text);
        m.metadata.insert(
            crate::turn::compact::SUMMARY_SOURCE_KEY.into(),
            crate::turn::compact::SUMMARY_SOURCE.into(),
        );
        m
    }

    fn pinned(text: &str) -> Message {
        let mut m = Message::user(text);
        m.metadata
            .insert(crate::turn::compact::PINNED_KEY.into(), true.into());
        m
    }

    fn shown(t: &Transcript) -> Vec<String> {
        t.display()
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                let text = l["content"]
                    .as_str()
                    .or(l["summary"].as_str())
                    .unwrap_or("");
                let mark = if l["compacted"] == true { "*" } else { "" };
                format!("{mark}{}:{text}", l["role"].as_str().unwrap())
            })
            .collect()
    }

    #[test]
    fn compacted_messages_keep_their_display_lines_in_order_across_compactions_and_reloads() {
        let mut t = Transcript::restored(vec![
            Message::user("q0"),
            Message::assistant("a0", vec![]),
            Message::user("q1"),
            Message::assistant("a1", vec![]),
        ]);
        t.compact(3, vec![summary("s1"), pinned("q0")]);
        t.push(Message::user("q2"));
        assert_eq!(
            shown(&t),
            [
                "*user:q0",
                "*assistant:a0",
                "*user:q1",
                "context:s1",
                "assistant:a1",
                "user:q2"
            ]
        );
        // A second compaction archives the first summary's marker where it stood; the pinned
        // copy is never a line of its own.
        t.compact(3, vec![summary("s2"), pinned("q0")]);
        assert_eq!(
            shown(&t),
            [
                "*user:q0",
                "*assistant:a0",
                "*user:q1",
                "*context:s1",
                "*assistant:a1",
                "context:s2",
                "user:q2"
            ]
        );
        assert_eq!(t.display_upto(2).as_array().unwrap().len(), 6);
        // Reloaded from the saved display list: the archive is its leading compacted lines.
        let saved = t.display();
        let reloaded = Transcript::restored(t.messages().to_vec()).with_display_archive(&saved);
        assert_eq!(shown(&reloaded), shown(&t));
        assert_eq!(reloaded.display(), saved);
    }
}
