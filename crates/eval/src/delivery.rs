//! What reached the model: the tool results in the requests it received (the scripted model's
//! request log in replay, the recording tap's in live runs). A record the world returned counts
//! as observed only when it was delivered whole — so a row cut out of a capped preview, or a
//! page of a kept result the model never read on, is not evidence, while a row the model read
//! with `read_tool_result` (pages put together by their offsets) is.
//!
//! Tool results are read exactly as the model saw them: a capped preview (`content_preview`,
//! `result_id`) contributes its prefix of the full text at offset 0, a `read_tool_result` page
//! its `content` at `offset`, a pattern search its matching lines at their offsets; the pieces of
//! one `result_id` are joined where they touch. A result compacted away later still counts from
//! the requests that carried it; one compacted before any request carried it does not. The
//! summariser's requests are not the model's and are skipped.
//!
//! Records are found in that text as complete JSON objects (parsed from every `{` the text
//! holds), and a world record is delivered when some object carries all of its fields with
//! equal values (the host's `[REDACTED]` stands for any secret value).

use crate::scripted::is_summariser_request;
use rustc_hash::FxHasher;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

/// How the host masks a secret value before the model sees it.
const REDACTED: &str = "[REDACTED]";

/// Fields that identify a record; delivered objects are indexed by them.
const ID_FIELDS: [&str; 5] = ["id", "hash", "infohash", "key", "setting_key"];

/// One step from a delivered value to an object inside it.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// The records delivered to the model.
#[derive(Debug, Clone, Default)]
pub struct Delivery {
    /// The complete JSON values found in what the model received.
    roots: Vec<Value>,
    /// Every object in them: its root and the path to it (nothing is copied).
    objects: Vec<(usize, Vec<Step>)>,
    /// `field=value` → indices into `objects`.
    index: HashMap<String, Vec<usize>>,
    /// Fragment texts (for records that are not objects).
    texts: Vec<String>,
    /// Distinct tool messages seen.
    tool_messages: usize,
}

fn text_of(content: &Value) -> Option<Cow<'_, str>> {
    match content {
        Value::String(s) => Some(Cow::Borrowed(s)),
        Value::Array(parts) => Some(Cow::Owned(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        )),
        _ => None,
    }
}

/// Every complete JSON value that starts at a `{` of `text`, outermost first; a value's inner
/// objects are not parsed again.
fn scan(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(pos) = text[at..].find('{') {
        let start = at + pos;
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(v)) => {
                at = start + values.byte_offset().max(1);
                out.push(v);
            }
            _ => at = start + 1,
        }
    }
    out
}

/// One piece of a kept result: where it starts (characters) and its text.
type Piece = (usize, String);

/// Pieces joined where they touch or overlap.
fn join(mut pieces: Vec<Piece>) -> Vec<String> {
    pieces.sort_by_key(|(o, _)| *o);
    let mut out: Vec<(usize, usize, String)> = Vec::new();
    for (start, text) in pieces {
        let len = text.chars().count();
        match out.last_mut() {
            Some((_, end, joined)) if *end >= start => {
                let overlap = *end - start;
                if len > overlap {
                    joined.extend(text.chars().skip(overlap));
                    *end = start + len;
                }
            }
            _ => out.push((start, start + len, text)),
        }
    }
    out.into_iter().map(|(_, _, t)| t).collect()
}

fn offset(v: &Value, key: &str) -> Option<usize> {
    v.get(key)
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
}

fn covers(delivered: &Map<String, Value>, record: &Map<String, Value>) -> bool {
    record
        .iter()
        .all(|(k, want)| delivered.get(k).is_some_and(|got| same(got, want)))
}

fn same(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::String(s), w) if s == REDACTED => !w.is_null(),
        (Value::Object(g), Value::Object(w)) => covers(g, w),
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(a, b)| same(a, b))
        }
        _ => got == want,
    }
}

fn index_key(field: &str, v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(format!("{field}={s}")),
        Value::Number(n) => Some(format!("{field}={n}")),
        _ => None,
    }
}

/// Every object in `v` with its path, outermost first.
fn walk<'v>(
    v: &'v Value,
    path: &mut Vec<Step>,
    out: &mut Vec<(Vec<Step>, &'v Map<String, Value>)>,
) {
    match v {
        Value::Object(m) => {
            out.push((path.clone(), m));
            for (k, child) in m {
                if child.is_object() || child.is_array() {
                    path.push(Step::Key(k.clone()));
                    walk(child, path, out);
                    path.pop();
                }
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                if child.is_object() || child.is_array() {
                    path.push(Step::Index(i));
                    walk(child, path, out);
                    path.pop();
                }
            }
        }
        _ => {}
    }
}

#[derive(Default)]
struct Builder {
    seen: HashSet<u64>,
    kept: HashMap<String, Vec<Piece>>,
    delivery: Delivery,
}

impl Builder {
    fn tool_text(&mut self, text: &str) {
        // Every request repeats the conversation's results: seen ones are skipped by a fast hash.
        let mut h = FxHasher::default();
        text.hash(&mut h);
        if !self.seen.insert(h.finish()) {
            return;
        }
        self.delivery.tool_messages += 1;
        for v in scan(text) {
            self.top(v);
        }
    }

    /// A tool result's outer object: a preview or a page of a kept result, or a whole result.
    fn top(&mut self, v: Value) {
        let id = v
            .get("result_id")
            .and_then(Value::as_str)
            .map(str::to_string);
        let preview = v.get("content_preview").and_then(Value::as_str);
        if v.get("tool_result_truncated") == Some(&Value::Bool(true))
            && let Some(preview) = preview
        {
            match id {
                Some(id) => self
                    .kept
                    .entry(id)
                    .or_default()
                    .push((0, preview.to_string())),
                None => self.fragment(preview),
            }
            return;
        }
        if let Some(id) = id {
            if let (Some(at), Some(content)) = (
                offset(&v, "offset"),
                v.get("content").and_then(Value::as_str),
            ) {
                self.kept
                    .entry(id)
                    .or_default()
                    .push((at, content.to_string()));
                return;
            }
            if let Some(lines) = v.get("matches").and_then(Value::as_array) {
                for line in lines {
                    if let (Some(at), Some(t)) = (
                        offset(line, "offset"),
                        line.get("text").and_then(Value::as_str),
                    ) {
                        self.kept
                            .entry(id.clone())
                            .or_default()
                            .push((at, t.to_string()));
                    }
                }
                return;
            }
        }
        self.collect(v);
    }

    fn fragment(&mut self, text: &str) {
        for v in scan(text) {
            self.collect(v);
        }
        self.delivery.texts.push(text.to_string());
    }

    /// Keeps `v` and indexes every object in it.
    fn collect(&mut self, v: Value) {
        let root = self.delivery.roots.len();
        let mut found = Vec::new();
        walk(&v, &mut Vec::new(), &mut found);
        for (path, m) in found {
            let i = self.delivery.objects.len();
            for f in ID_FIELDS {
                if let Some(key) = m.get(f).and_then(|v| index_key(f, v)) {
                    self.delivery.index.entry(key).or_default().push(i);
                }
            }
            self.delivery.objects.push((root, path));
        }
        self.delivery.roots.push(v);
    }

    fn finish(mut self) -> Delivery {
        for (_, pieces) in std::mem::take(&mut self.kept) {
            for text in join(pieces) {
                self.fragment(&text);
            }
        }
        self.delivery
    }
}

impl Delivery {
    /// From the request bodies the model received, in order; those that open with
    /// `summary_prompt` are the summariser's, not the model's.
    pub fn from_requests(requests: &[Value], summary_prompt: &str) -> Delivery {
        let mut b = Builder::default();
        for body in requests
            .iter()
            .filter(|r| !is_summariser_request(r, summary_prompt))
        {
            let messages = body.get("messages").and_then(Value::as_array);
            for m in messages.into_iter().flatten() {
                if m.get("role").and_then(Value::as_str) == Some("tool")
                    && let Some(text) = m.get("content").and_then(text_of)
                {
                    b.tool_text(&text);
                }
            }
        }
        b.finish()
    }

    /// From tool result texts directly (tests, and callers that keep their own record).
    pub fn from_tool_texts<S: AsRef<str>>(texts: impl IntoIterator<Item = S>) -> Delivery {
        let mut b = Builder::default();
        for t in texts {
            b.tool_text(t.as_ref());
        }
        b.finish()
    }

    fn object(&self, i: usize) -> Option<&Map<String, Value>> {
        let (root, path) = self.objects.get(i)?;
        let mut v = self.roots.get(*root)?;
        for step in path {
            v = match step {
                Step::Key(k) => v.get(k)?,
                Step::Index(n) => v.get(n)?,
            };
        }
        v.as_object()
    }

    fn all_objects(&self) -> impl Iterator<Item = &Map<String, Value>> {
        (0..self.objects.len()).filter_map(|i| self.object(i))
    }

    /// Distinct tool messages the model received.
    pub fn tool_messages(&self) -> usize {
        self.tool_messages
    }

    /// Whether the model received `record` whole.
    pub fn carried(&self, record: &Value) -> bool {
        let Value::Object(want) = record else {
            let text = record.to_string();
            return self.texts.iter().any(|t| t.contains(&text))
                || self.all_objects().any(|o| o.values().any(|v| v == record));
        };
        let key = ID_FIELDS
            .iter()
            .find_map(|f| want.get(*f).and_then(|v| index_key(f, v)));
        match key {
            Some(key) => self.index.get(&key).is_some_and(|hits| {
                hits.iter()
                    .any(|&i| self.object(i).is_some_and(|o| covers(o, want)))
            }),
            None => self.all_objects().any(|o| covers(o, want)),
        }
    }
}
