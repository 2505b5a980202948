//! Token counts for budgeting a request (spec runtime §12.1): the model family's own tokenizer
//! where a crate ships it, the calibrated estimate ([`crate::estimate_text_tokens`]) elsewhere.
//!
//! [`TokenCounter::for_model`] decides by the configured model name, with the catalogue's lenient
//! matching ([`crate::model_profile`]): OpenAI's families are counted with their real BPE
//! vocabularies (`tiktoken-rs`) — `o200k_base` for gpt-4o, chatgpt-4o, gpt-4.1, gpt-4.5, gpt-5,
//! o1 / o3 / o4 and gpt-oss (whose `o200k_harmony` only adds special tokens), `cl100k_base` for
//! gpt-4, gpt-3.5-turbo and the text-embedding models — and every other model keeps the estimate.
//!
//! Units. The budget compares `counter.budgeted(raw)` with the window. For the estimate, `raw` is
//! the estimate and `budgeted` multiplies it by the provider-serialisation factor (×1.5, see
//! [`crate::with_serialisation_factor`]): chat templates and a tokenizer that splits finer than four
//! bytes a token are unknown. With a real tokenizer the text is counted exactly and the chat
//! framing is OpenAI's documented one (the cookbook "How to count tokens with tiktoken":
//! [`CHAT_MESSAGE_TOKENS`] per message plus its role, [`REPLY_PRIMING_TOKENS`] per request), so
//! messages get no factor and `budgeted` is the identity. Two parts are not documented and stay
//! estimates inside the exact count:
//! - tool schemas: the provider rewrites them (OpenAI renders a TypeScript-like namespace, not the
//!   JSON it is sent), so each schema's tokenized JSON keeps the ×1.5 factor in its own figure
//!   ([`TokenCounter::tool_tokens`]);
//! - assistant tool calls: each counts its id, name and arguments plus
//!   [`TOOL_CALL_FRAMING_TOKENS`]; the id is likely not rendered at all, so a call is counted a
//!   little high, the safe direction.
//!
//! A BPE costs ~50–80 ns a byte (release; ~100× the estimate), so a model call must not tokenize
//! the whole conversation again: [`TokenCache`] keeps each message's and each schema's count,
//! keyed by a hash of everything the count depends on, so only new or changed messages are
//! tokenized and a changed message never gets its old count.

use crate::estimate::{
    self, IMAGE_TOKENS, TOOL_OVERHEAD_TOKENS, TokenEstimate, with_serialisation_factor,
    without_serialisation_factor,
};
use mpa_protocol::{Content, ContentPart, Message, ToolSpec};
use rustc_hash::{FxHashMap, FxHasher};
use std::hash::Hasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use tiktoken_rs::CoreBPE;

/// Framing tokens of one chat message with a real tokenizer, besides its role
/// (`<|start|>{role}<|message|>{content}<|end|>`; OpenAI's documented `tokens_per_message`).
pub const CHAT_MESSAGE_TOKENS: u64 = 3;
/// Tokens priming the reply, once per request (`<|start|>assistant<|message|>`).
pub const REPLY_PRIMING_TOKENS: u64 = 3;
/// Framing counted per assistant tool call with a real tokenizer (undocumented by OpenAI).
pub const TOOL_CALL_FRAMING_TOKENS: u64 = 3;

/// Set once a vocabulary has loaded (o200k_base, cl100k_base).
static LOADED: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// How a model's tokens are counted; reported as the budget's `estimator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TokenCounter {
    /// OpenAI's `o200k_base` BPE.
    O200kBase,
    /// OpenAI's `cl100k_base` BPE.
    Cl100kBase,
    /// No tokenizer for the family: the calibrated estimate.
    #[default]
    Estimate,
}

impl TokenCounter {
    /// The counter for a configured model name (see the module docs for the families).
    pub fn for_model(model_name: &str) -> Self {
        crate::catalogue::token_counter(model_name)
    }

    /// What the budget report says: `o200k_base`, `cl100k_base` or `calibrated_estimate`.
    pub fn name(self) -> &'static str {
        match self {
            TokenCounter::O200kBase => "o200k_base",
            TokenCounter::Cl100kBase => "cl100k_base",
            TokenCounter::Estimate => estimate::ESTIMATOR,
        }
    }

    /// Whether this is a real tokenizer (exact text counts).
    pub fn is_tokenizer(self) -> bool {
        self != TokenCounter::Estimate
    }

    fn bpe(self) -> Option<&'static CoreBPE> {
        let (bpe, slot) = match self {
            TokenCounter::O200kBase => (tiktoken_rs::o200k_base_singleton(), 0),
            TokenCounter::Cl100kBase => (tiktoken_rs::cl100k_base_singleton(), 1),
            TokenCounter::Estimate => return None,
        };
        if !LOADED[slot].load(Ordering::Relaxed) {
            LOADED[slot].store(true, Ordering::Relaxed);
        }
        Some(bpe)
    }

    /// Whether counting can start without loading a vocabulary first (always for the estimate),
    /// so an async caller can load it off its runtime's threads.
    pub fn is_ready(self) -> bool {
        match self {
            TokenCounter::O200kBase => LOADED[0].load(Ordering::Relaxed),
            TokenCounter::Cl100kBase => LOADED[1].load(Ordering::Relaxed),
            TokenCounter::Estimate => true,
        }
    }

    /// Loads the vocabulary now (once per process: ~0.1–0.6 s) rather than in the first model
    /// call; blocks while it loads. A no-op for the estimate.
    pub fn warm_up(self) {
        let _ = self.bpe();
    }

    /// Tokens of a piece of text.
    pub fn text_tokens(self, text: &str) -> u64 {
        match self.bpe() {
            Some(bpe) => bpe_count(bpe, text),
            None => estimate::estimate_text_tokens(text),
        }
    }

    /// Raw tokens of one message: framing, role, text, tool calls, [`IMAGE_TOKENS`] per image.
    pub fn message_tokens(self, m: &Message) -> u64 {
        let Some(bpe) = self.bpe() else {
            return estimate::estimate_message_tokens(m);
        };
        let text = match &m.content {
            Content::Text(t) => bpe_count(bpe, t),
            Content::Parts(parts) => parts
                .iter()
                .map(|p| match p {
                    ContentPart::Text { text } => bpe_count(bpe, text),
                    ContentPart::ImageUrl { .. } => IMAGE_TOKENS,
                })
                .sum(),
        };
        let calls: u64 = m
            .tool_calls
            .iter()
            .map(|c| {
                TOOL_CALL_FRAMING_TOKENS
                    + bpe_count(bpe, &c.id)
                    + bpe_count(bpe, &c.name)
                    + bpe_count(bpe, &c.arguments)
            })
            .sum();
        let id = m.tool_call_id.as_deref().map_or(0, |id| bpe_count(bpe, id));
        CHAT_MESSAGE_TOKENS + bpe_count(bpe, m.role.as_str()) + text + calls + id
    }

    /// Tokens of one tool schema. With a tokenizer: its tokenized name, description and JSON
    /// schema plus framing, times the serialisation factor (the provider's rendering of schemas
    /// is undocumented), so the figure is already in budget units.
    pub fn tool_tokens(self, t: &ToolSpec) -> u64 {
        match self.bpe() {
            None => estimate::estimate_tool_tokens(t),
            Some(bpe) => with_serialisation_factor(
                TOOL_OVERHEAD_TOKENS
                    + bpe_count(bpe, &t.name)
                    + bpe_count(bpe, &t.description)
                    + bpe_count(bpe, &t.parameters.to_string()),
            ),
        }
    }

    /// Tokens every request costs besides its messages and tools.
    pub fn request_overhead(self) -> u64 {
        if self.is_tokenizer() {
            REPLY_PRIMING_TOKENS
        } else {
            0
        }
    }

    /// Raw tokens → what is budgeted against the window (×1.5 for the estimate; exact counts are
    /// taken as they are).
    pub fn budgeted(self, raw: u64) -> u64 {
        if self.is_tokenizer() {
            raw
        } else {
            with_serialisation_factor(raw)
        }
    }

    /// The raw tokens that fit in `budget` (the inverse of [`TokenCounter::budgeted`], rounded
    /// down).
    pub fn raw_room(self, budget: u64) -> u64 {
        if self.is_tokenizer() {
            budget
        } else {
            without_serialisation_factor(budget)
        }
    }

    /// The breakdown of a request, counting only messages and schemas `cache` has not seen.
    pub fn breakdown<'a>(
        self,
        messages: impl IntoIterator<Item = &'a Message>,
        tools: &[ToolSpec],
        cache: &TokenCache,
    ) -> TokenEstimate {
        let mut memo = cache.open(self, true);
        let mut est = TokenEstimate {
            counter: self,
            tool_count: tools.len() as u64,
            ..TokenEstimate::default()
        };
        for m in messages {
            est.add_message(m, memo.message(m));
        }
        est.message_tokens += self.request_overhead();
        est.tool_tokens = tools.iter().map(|t| memo.tool(t)).sum();
        est
    }
}

fn bpe_count(bpe: &CoreBPE, text: &str) -> u64 {
    if text.is_empty() {
        return 0;
    }
    bpe.encode_ordinary(text).len() as u64
}

/// Cached per-message (and per-schema) token counts, for one conversation. Only real tokenizers
/// use it (the estimate is as cheap as a lookup).
///
/// An entry is keyed by the counter and a 64-bit hash (plus the byte length) of everything its
/// count depends on — role, every text part, image parts, tool calls, the tool-call id; a
/// schema's name, description and JSON — so an edited message is a new key, never a stale hit.
/// The hash is not keyed against deliberate collisions: at worst a crafted message would get
/// another message's count in its own conversation's budget. Entries not used by the latest
/// request are dropped once they outnumber the used ones, so the cache stays about the size of
/// the live context.
#[derive(Default)]
pub struct TokenCache {
    entries: Mutex<Entries>,
}

#[derive(Default, Clone)]
struct Entries {
    map: FxHashMap<Key, Entry>,
    /// Number of the latest request (breakdown).
    round: u64,
    /// Distinct entries the latest request used.
    used: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    hash: u64,
    bytes: u64,
}

#[derive(Clone, Copy)]
struct Entry {
    tokens: u64,
    round: u64,
}

/// Unused entries tolerated beyond the used ones before a sweep.
pub const SWEEP_SLACK: usize = 256;

impl TokenCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Raw tokens of each message (as [`TokenCounter::message_tokens`]), cached.
    pub fn message_tokens<'a>(
        &self,
        counter: TokenCounter,
        messages: impl IntoIterator<Item = &'a Message>,
    ) -> Vec<u64> {
        let mut memo = self.open(counter, false);
        messages.into_iter().map(|m| memo.message(m)).collect()
    }

    /// Tokens of a piece of text (as [`TokenCounter::text_tokens`]), cached.
    pub fn text_tokens(&self, counter: TokenCounter, text: &str) -> u64 {
        let mut memo = self.open(counter, false);
        memo.get(
            || {
                let mut k = KeyHasher::new(counter, 2);
                k.text(text);
                k.finish()
            },
            || counter.text_tokens(text),
        )
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        // A panic elsewhere cannot leave an entry half-written: the map only gains whole entries.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `request`: a whole request is counted (a new round; unused entries may be swept after).
    fn open(&self, counter: TokenCounter, request: bool) -> Memo<'_> {
        let entries = counter.is_tokenizer().then(|| {
            let mut e = self.lock();
            if request {
                e.round += 1;
                e.used = 0;
            }
            e
        });
        Memo {
            counter,
            entries,
            request,
        }
    }
}

impl Clone for TokenCache {
    fn clone(&self) -> Self {
        Self {
            entries: Mutex::new(self.lock().clone()),
        }
    }
}

impl std::fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCache")
            .field("entries", &self.len())
            .finish()
    }
}

/// One use of the cache: holds its lock (a conversation's requests are counted one at a time).
struct Memo<'c> {
    counter: TokenCounter,
    /// `None` for the estimate, which is not cached.
    entries: Option<MutexGuard<'c, Entries>>,
    request: bool,
}

impl Memo<'_> {
    fn message(&mut self, m: &Message) -> u64 {
        let counter = self.counter;
        self.get(|| message_key(counter, m), || counter.message_tokens(m))
    }

    fn tool(&mut self, t: &ToolSpec) -> u64 {
        let counter = self.counter;
        self.get(|| tool_key(counter, t), || counter.tool_tokens(t))
    }

    fn get(&mut self, key: impl FnOnce() -> Key, count: impl FnOnce() -> u64) -> u64 {
        let Some(entries) = self.entries.as_mut() else {
            return count();
        };
        let key = key();
        let round = entries.round;
        if let Some(entry) = entries.map.get_mut(&key) {
            let fresh = entry.round != round;
            entry.round = round;
            let tokens = entry.tokens;
            if fresh {
                entries.used += 1;
            }
            return tokens;
        }
        let tokens = count();
        entries.map.insert(key, Entry { tokens, round });
        entries.used += 1;
        tokens
    }
}

impl Drop for Memo<'_> {
    fn drop(&mut self) {
        if !self.request {
            return;
        }
        if let Some(e) = self.entries.as_mut()
            && e.map.len() > 2 * e.used + SWEEP_SLACK
        {
            let round = e.round;
            e.map.retain(|_, entry| entry.round == round);
        }
    }
}

/// Hashes what a count depends on, with lengths and tags between fields so that moving bytes
/// from one field to the next changes the key.
struct KeyHasher {
    h: FxHasher,
    bytes: u64,
}

impl KeyHasher {
    fn new(counter: TokenCounter, kind: u8) -> Self {
        let mut h = FxHasher::default();
        h.write_u8(counter as u8);
        h.write_u8(kind);
        Self { h, bytes: 0 }
    }

    fn tag(&mut self, t: u8) {
        self.h.write_u8(t);
    }

    fn text(&mut self, s: &str) {
        self.h.write_usize(s.len());
        self.h.write(s.as_bytes());
        self.bytes += s.len() as u64;
    }

    fn json(&mut self, v: &serde_json::Value) {
        use serde_json::Value;
        match v {
            Value::Null => self.tag(10),
            Value::Bool(b) => self.tag(if *b { 11 } else { 12 }),
            Value::Number(n) => {
                self.tag(13);
                match (n.as_u64(), n.as_i64(), n.as_f64()) {
                    (Some(u), _, _) => self.h.write_u64(u),
                    (None, Some(i), _) => self.h.write_i64(i),
                    (None, None, f) => self.h.write_u64(f.unwrap_or(0.0).to_bits()),
                }
            }
            Value::String(s) => {
                self.tag(14);
                self.text(s);
            }
            Value::Array(items) => {
                self.tag(15);
                self.h.write_usize(items.len());
                for item in items {
                    self.json(item);
                }
            }
            Value::Object(map) => {
                // In insertion order, as it is serialised (`preserve_order`).
                self.tag(16);
                self.h.write_usize(map.len());
                for (k, item) in map {
                    self.text(k);
                    self.json(item);
                }
            }
        }
    }

    fn finish(&self) -> Key {
        Key {
            hash: self.h.finish(),
            bytes: self.bytes,
        }
    }
}

fn message_key(counter: TokenCounter, m: &Message) -> Key {
    let mut k = KeyHasher::new(counter, 0);
    k.text(m.role.as_str());
    match &m.content {
        Content::Text(t) => {
            k.tag(1);
            k.text(t);
        }
        Content::Parts(parts) => {
            k.tag(2);
            for p in parts {
                match p {
                    ContentPart::Text { text } => {
                        k.tag(3);
                        k.text(text);
                    }
                    // An image costs the same whatever it shows: its URL is not hashed.
                    ContentPart::ImageUrl { .. } => k.tag(4),
                }
            }
        }
    }
    for c in &m.tool_calls {
        k.tag(5);
        k.text(&c.id);
        k.text(&c.name);
        k.text(&c.arguments);
    }
    if let Some(id) = &m.tool_call_id {
        k.tag(6);
        k.text(id);
    }
    k.finish()
}

fn tool_key(counter: TokenCounter, t: &ToolSpec) -> Key {
    let mut k = KeyHasher::new(counter, 1);
    k.text(&t.name);
    k.text(&t.description);
    k.json(&t.parameters);
    k.finish()
}
