//! Final-request compaction (spec runtime.md §12.2–§12.3): at the model-call boundary, when the
//! request about to be sent reaches 85 % of the window, everything but the recent messages is
//! summarised by the model and the request is rebuilt as summary, the task's first user message
//! and the preserved tail. Nothing changes in the session until the main model call with the
//! rebuilt request succeeds: a [`Compaction`] is only a proposal, which the loop commits with
//! [`crate::transcript::Transcript::compact`], so a failed call leaves the old history intact.
//!
//! The rebuilt request must come down to 60 % of the window ([`TARGET_FRACTION`]), else it is
//! repartitioned strictly once: keeping the last 20 messages alone would, on a small window,
//! leave the request just under the trigger and compact again at every turn.
//!
//! Invariants:
//! - the cut never separates an assistant tool call from its results (the preserved tail never
//!   starts with a tool message) and never drops a message the evidence store has not captured
//!   (compacted-out messages stay searchable with `session_search`);
//! - the first user message of the task (its constraints) is kept verbatim after the summary;
//! - the plan, steering ids and the invocation ledger live outside messages and are untouched;
//! - a request still over the window after a strict repartition is an error, never sent.
//!
//! Sizes are raw tokens of the model's [`TokenCounter`] (its real tokenizer, or the calibrated
//! estimate, whose fractions of the window are converted with the serialisation factor).

use mpa_model::{BudgetLimits, ChatRequest, ModelClient, TokenCache, TokenCounter};
use mpa_protocol::{Message, RequestBudget, Role};
use tokio_util::sync::CancellationToken;

/// Compaction starts at this share of the window.
pub const TRIGGER_FRACTION: f64 = 0.85;
/// What a compaction aims for (then accepted up to the window after the strict repartition).
pub const TARGET_FRACTION: f64 = 0.60;
/// Messages the retention policy keeps.
pub const KEEP_MESSAGES: usize = 20;
/// Recent history kept by the token partition, as a share of the window.
pub const KEEP_FRACTION: f64 = 0.10;
/// Metadata marking a summary message (`lc_source: "summarization"`).
pub const SUMMARY_SOURCE_KEY: &str = "lc_source";
pub const SUMMARY_SOURCE: &str = "summarization";
/// On the summary message: the uid (or position) of the last preserved message.
pub const ANCHOR_KEY: &str = "moviepilot_compaction_anchor_id";
/// On the copy of the task's first user message kept after the summary: the model reads it
/// again, the display list does not show it twice.
pub const PINNED_KEY: &str = "moviepilot_compaction_pinned";

/// The summariser's instructions.
pub use crate::prompt::SUMMARY_PROMPT;

const SUMMARY_HEADER: &str = "[Summary of the earlier conversation / 较早对话的摘要. The messages \
it replaces are kept in the session history: use session_search for exact wording. The plan and \
write receipts are unchanged.]";

/// Why compaction did not produce a request that fits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactError {
    /// The summariser call failed.
    SummariserFailed(String),
    /// Nothing (or only summaries) could be summarised.
    NothingToCompress,
    /// Rebuilt and strictly repartitioned, still over the window.
    StillOver,
    Cancelled,
}

impl CompactError {
    pub fn code(&self) -> &'static str {
        match self {
            CompactError::SummariserFailed(_) => "context_compaction_failed",
            CompactError::NothingToCompress => "context_uncompressible",
            CompactError::StillOver => "context_still_over_window",
            CompactError::Cancelled => "cancelled",
        }
    }

    /// The §12.3 wording, English then Chinese.
    pub fn message(&self) -> &'static str {
        match self {
            CompactError::SummariserFailed(_) => {
                "context compression failed, original context kept, retry later / 上下文压缩失败，已保留原始上下文，请稍后重试"
            }
            CompactError::NothingToCompress => {
                "history contains over-long content that cannot be compressed; start or clear the session / 历史中有无法压缩的超长内容，请新建或清空会话"
            }
            CompactError::StillOver => {
                "final request still exceeds window after compaction; original context kept; reduce enabled tools or use a larger model / 压缩后请求仍超出上下文窗口，已保留原始上下文；请减少启用的工具或使用更大的模型"
            }
            CompactError::Cancelled => "stopped",
        }
    }
}

/// A proposed compaction: replace `messages[..cut]` with `prefix` (summary + the task's first
/// user message). Applied only after the main call succeeds.
#[derive(Debug, Clone)]
pub struct Compaction {
    pub cut: usize,
    pub prefix: Vec<Message>,
    /// Raw (unfactored) estimate of the rebuilt request.
    pub rebuilt_raw_tokens: u64,
    pub summarised_messages: usize,
    pub attempts: u32,
}

pub fn is_summary(m: &Message) -> bool {
    m.metadata.get(SUMMARY_SOURCE_KEY).and_then(|v| v.as_str()) == Some(SUMMARY_SOURCE)
}

/// The summary a summary message carries, without the header addressed to the model.
pub fn summary_text(m: &Message) -> String {
    let text = m.text();
    match text.strip_prefix(SUMMARY_HEADER) {
        Some(rest) => rest.trim().to_string(),
        None => text,
    }
}

/// The copy of the task's first user message a compaction kept after its summary.
pub fn is_pinned_copy(m: &Message) -> bool {
    m.metadata.get(PINNED_KEY).and_then(|v| v.as_bool()) == Some(true)
}

/// Whether this request must be compacted: ≥ 85 % of the window, or — once compacted this turn
/// (the same-turn guard) — only when new results pushed it over the window.
pub fn due(budget: &RequestBudget, compacted_this_turn: bool) -> bool {
    if budget.context_window_tokens == 0 {
        return false;
    }
    if compacted_this_turn {
        return budget.estimated_over_input_limit;
    }
    budget.estimated_input_tokens as f64 >= TRIGGER_FRACTION * budget.context_window_tokens as f64
}

/// Where the transcript may be cut: `messages[k]` starts the preserved tail, so it is not a tool
/// result (its call would be summarised away) and not a summary; at least one message stays.
fn safe_cuts(messages: &[Message], max_cut: usize) -> Vec<usize> {
    (1..messages.len().min(max_cut.saturating_add(1)))
        .filter(|&k| messages[k].role != Role::Tool && !is_summary(&messages[k]))
        .collect()
}

/// The task's first user message (not a summary), whose constraints are kept verbatim.
fn first_user(messages: &[Message]) -> Option<usize> {
    messages
        .iter()
        .position(|m| m.role == Role::User && !is_summary(m))
}

/// The partition decision, without the summariser call (cheap; benchmarked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub cut: usize,
    /// Index of the task's first user message when it is in the summarised part.
    pub pinned: Option<usize>,
}

/// Per-message raw token costs, and the fixed cost of the request (system, tools, outbound
/// additions) given its raw total.
pub struct Costs {
    pub per_message: Vec<u64>,
    pub fixed: u64,
    pub counter: TokenCounter,
}

impl Costs {
    /// Counted by `counter`; `tokens` holds the counts the request's budget just made.
    pub fn of(
        counter: TokenCounter,
        tokens: &TokenCache,
        messages: &[Message],
        request_raw_total: u64,
    ) -> Self {
        let per_message = tokens.message_tokens(counter, messages);
        let sum: u64 = per_message.iter().sum();
        Costs {
            fixed: request_raw_total.saturating_sub(sum),
            per_message,
            counter,
        }
    }

    fn tail(&self, from: usize) -> u64 {
        self.per_message[from..].iter().sum()
    }
}

/// Chooses the cut: the retention policy (keep the last 20, safe cut) first; when it finds none,
/// the token partition keeping ≈ 10 % of the window. `after` forces a strictly later cut (the
/// repartition), `room` is the raw budget the preserved tail must fit in then.
pub fn partition(
    messages: &[Message],
    costs: &Costs,
    window: u64,
    max_cut: usize,
    after: Option<(usize, u64)>,
) -> Option<Partition> {
    let cuts = safe_cuts(messages, max_cut);
    let summarisable = |k: usize| messages[..k].iter().any(|m| !is_summary(m));
    let pinned_of = |k: usize| first_user(messages).filter(|&f| f < k);
    let cut = match after {
        Some((previous, room)) => cuts
            .iter()
            .copied()
            .filter(|&k| k > previous)
            .find(|&k| costs.tail(k) <= room)
            .or_else(|| cuts.iter().copied().rfind(|&k| k > previous))?,
        None => {
            let retention = messages
                .len()
                .checked_sub(KEEP_MESSAGES)
                .and_then(|limit| cuts.iter().copied().rfind(|&k| k <= limit));
            match retention.filter(|&k| summarisable(k)) {
                Some(k) => k,
                None => {
                    let keep = costs
                        .counter
                        .raw_room((window as f64 * KEEP_FRACTION) as u64);
                    cuts.iter()
                        .copied()
                        .find(|&k| costs.tail(k) <= keep)
                        .or_else(|| cuts.last().copied())?
                }
            }
        }
    };
    if !summarisable(cut) {
        return None;
    }
    Some(Partition {
        cut,
        pinned: pinned_of(cut),
    })
}

/// What one compaction needs.
pub struct Input<'a> {
    pub model: &'a ModelClient,
    pub messages: &'a [Message],
    /// The conversation's token counts (the budget of this request filled it).
    pub tokens: &'a TokenCache,
    /// Raw (unfactored) estimate of the whole request as it would be sent.
    pub request_raw_tokens: u64,
    pub limits: BudgetLimits,
    /// Messages at or after this index are not yet in the evidence store and must stay.
    pub max_cut: usize,
    pub cancel: &'a CancellationToken,
}

/// Summarises, rebuilds and validates; repartitions strictly once when the rebuilt request is
/// still over the target. Returns the proposal to commit after the main call succeeds.
pub async fn compact(input: &Input<'_>) -> Result<Compaction, CompactError> {
    let window = input.limits.context_window_tokens;
    let counter = input.limits.counter;
    let messages = input.messages;
    let costs = Costs::of(counter, input.tokens, messages, input.request_raw_tokens);
    let target_raw = counter.raw_room((window as f64 * TARGET_FRACTION) as u64);
    let window_raw = counter.raw_room(window);
    let mut part = partition(messages, &costs, window, input.max_cut, None)
        .ok_or(CompactError::NothingToCompress)?;
    // Planned with the largest summary the summariser may return, so one call usually does.
    let pinned = part.pinned.map_or(0, |f| costs.per_message[f]);
    let largest_summary = summary_limit(counter, window) + counter.text_tokens(SUMMARY_HEADER) + 8;
    let planned_room = target_raw.saturating_sub(costs.fixed + largest_summary + pinned);
    if costs.tail(part.cut) > planned_room
        && let Some(p) = partition(
            messages,
            &costs,
            window,
            input.max_cut,
            Some((part.cut - 1, planned_room)),
        )
    {
        part = p;
    }
    let mut attempts = 0;
    loop {
        attempts += 1;
        let summary = summarise(input, &messages[..part.cut]).await?;
        let prefix = rebuild(messages, &part, &summary);
        // Cached: the rebuilt request's budget counts the same summary again.
        let prefix_cost: u64 = input.tokens.message_tokens(counter, &prefix).iter().sum();
        let rebuilt = costs.fixed + prefix_cost + costs.tail(part.cut);
        // Strictly, when over the target: a later cut, its tail within the room left beside
        // the fixed cost and this summary.
        let room = target_raw.saturating_sub(costs.fixed + prefix_cost);
        let next = (rebuilt > target_raw && attempts == 1)
            .then(|| {
                partition(
                    messages,
                    &costs,
                    window,
                    input.max_cut,
                    Some((part.cut, room)),
                )
            })
            .flatten();
        match next {
            Some(p) => part = p,
            None if rebuilt <= target_raw || rebuilt <= window_raw => {
                return Ok(Compaction {
                    cut: part.cut,
                    prefix,
                    rebuilt_raw_tokens: rebuilt,
                    summarised_messages: part.cut,
                    attempts,
                });
            }
            None => return Err(CompactError::StillOver),
        }
    }
}

/// Summary message + the task's first user message (verbatim, when it was summarised away).
fn rebuild(messages: &[Message], part: &Partition, summary: &str) -> Vec<Message> {
    let mut m = Message::user(format!("{SUMMARY_HEADER}\n\n{summary}"));
    m.metadata.insert(
        SUMMARY_SOURCE_KEY.into(),
        serde_json::Value::String(SUMMARY_SOURCE.into()),
    );
    let anchor = messages
        .last()
        .and_then(|l| l.metadata.get(super::capture::UID_KEY).cloned())
        .unwrap_or_else(|| serde_json::Value::String(format!("index:{}", messages.len() - 1)));
    m.metadata.insert(ANCHOR_KEY.into(), anchor);
    let mut prefix = vec![m];
    if let Some(f) = part.pinned {
        let mut pinned = messages[f].clone();
        pinned
            .metadata
            .insert(PINNED_KEY.into(), serde_json::Value::Bool(true));
        prefix.push(pinned);
    }
    prefix
}

/// Longest text of one message in the summariser's input.
const RENDER_MESSAGE_CHARS: usize = 1600;

fn clip(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max * 3 / 4).collect();
    let tail: String = text.chars().skip(n - max / 4).collect();
    format!("{head} […{} characters left out…] {tail}", n - max)
}

fn render(m: &Message) -> String {
    let role = match m.role {
        Role::User if is_summary(m) => "earlier summary",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool result",
        Role::System => "system",
    };
    let mut s = format!("[{role}");
    if let Some(name) = &m.name {
        s.push_str(&format!(" {name}"));
    }
    s.push_str("] ");
    let max = if is_summary(m) {
        RENDER_MESSAGE_CHARS * 4
    } else {
        RENDER_MESSAGE_CHARS
    };
    s.push_str(&clip(&m.text(), max));
    for c in &m.tool_calls {
        s.push_str(&format!(
            "\n  calls {}({})",
            c.name,
            clip(&c.arguments, 400)
        ));
    }
    s
}

/// The summariser call: its own small request (no tools), fitted into half the window by
/// dropping the oldest non-summary lines; the answer is bounded to 10 % of the window.
async fn summarise(input: &Input<'_>, part: &[Message]) -> Result<String, CompactError> {
    let window = input.limits.context_window_tokens;
    let counter = input.limits.counter;
    let budget = counter.raw_room(window / 2);
    let mut lines: Vec<(String, u64, bool)> = part
        .iter()
        .map(|m| {
            let s = render(m);
            let t = counter.text_tokens(&s) + 4;
            (s, t, is_summary(m))
        })
        .collect();
    let mut total: u64 = lines.iter().map(|l| l.1).sum();
    while total > budget {
        // The first user message is kept verbatim in the request anyway; drop the oldest other.
        let Some(i) = lines.iter().position(|l| !l.2) else {
            break;
        };
        total -= lines[i].1;
        lines.remove(i);
    }
    let excerpt: Vec<String> = lines.into_iter().map(|l| l.0).collect();
    let system = Message::system(SUMMARY_PROMPT);
    let user = Message::user(format!(
        "Conversation excerpt to summarise:\n\n{}",
        excerpt.join("\n\n")
    ));
    let msgs = [system, user];
    let req = ChatRequest::new(&msgs, &[]);
    let mut ignore = |_ev| {};
    let done = input
        .model
        .complete_chat(&req, input.cancel, &mut ignore)
        .await;
    let text = match done {
        Ok(c) if !c.content.trim().is_empty() => c.content,
        Ok(_) => return Err(CompactError::SummariserFailed("empty summary".into())),
        Err(mpa_model::ModelError::Cancelled) => return Err(CompactError::Cancelled),
        Err(e) => return Err(CompactError::SummariserFailed(e.code().to_string())),
    };
    // Bounded: a summary longer than 10 % of the window is cut at that size.
    let max_tokens = summary_limit(counter, window);
    if counter.text_tokens(&text) <= max_tokens {
        return Ok(text.trim().to_string());
    }
    let mut out = String::new();
    let mut used = 0;
    for line in text.lines() {
        let t = counter.text_tokens(line) + 1;
        if used + t > max_tokens {
            break;
        }
        used += t;
        out.push_str(line);
        out.push('\n');
    }
    Ok(out.trim().to_string())
}

/// The most raw tokens a summary may have: 10 % of the window.
fn summary_limit(counter: TokenCounter, window: u64) -> u64 {
    counter
        .raw_room((window as f64 * KEEP_FRACTION) as u64)
        .max(64)
}

/// The budget report's `compaction` entry.
pub fn report(c: &Compaction, before_raw: u64, limits: &BudgetLimits) -> serde_json::Value {
    let counter = limits.counter;
    serde_json::json!({
        "status": "compacted",
        "summarised_messages": c.summarised_messages,
        "kept_messages_from": c.cut,
        "attempts": c.attempts,
        "estimated_input_tokens_before": counter.budgeted(before_raw),
        "estimated_input_tokens_after": counter.budgeted(c.rebuilt_raw_tokens),
        "context_window_tokens": limits.context_window_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpa_protocol::{Outcome, ToolCall};

    fn convo(turns: usize, result_chars: usize) -> Vec<Message> {
        let mut v = vec![Message::user("task: only page size 20")];
        for i in 0..turns {
            v.push(Message::assistant(
                "",
                vec![ToolCall {
                    id: format!("c{i}"),
                    name: "t".into(),
                    arguments: "{}".into(),
                }],
            ));
            v.push(Message::tool(
                format!("c{i}"),
                "t",
                "x".repeat(result_chars),
                Outcome::Succeeded,
            ));
            v.push(Message::assistant(format!("answer {i}"), vec![]));
            v.push(Message::user(format!("next {i}")));
        }
        v
    }

    #[test]
    fn the_retention_cut_keeps_twenty_and_never_splits_a_call_from_its_result() {
        let m = convo(30, 100);
        let costs = Costs::of(TokenCounter::Estimate, &TokenCache::new(), &m, 0);
        let p = partition(&m, &costs, 16_000, m.len(), None).unwrap();
        assert!(m.len() - p.cut >= KEEP_MESSAGES);
        assert_ne!(m[p.cut].role, Role::Tool);
        assert_eq!(p.pinned, Some(0));
        // Not captured yet: never cut past the watermark.
        let p = partition(&m, &costs, 16_000, 10, None).unwrap();
        assert!(p.cut <= 10);
    }

    #[test]
    fn the_token_partition_and_the_strict_repartition() {
        // Few but huge messages: the retention policy finds no cut.
        let m = convo(4, 8000);
        let costs = Costs::of(TokenCounter::Estimate, &TokenCache::new(), &m, 0);
        let p = partition(&m, &costs, 16_000, m.len(), None).unwrap();
        assert_ne!(m[p.cut].role, Role::Tool);
        let again = partition(&m, &costs, 16_000, m.len(), Some((p.cut, 0)));
        if let Some(q) = again {
            assert!(q.cut > p.cut);
        }
        // Only a summary before any safe cut: nothing to compress.
        let mut s = Message::user("summary");
        s.metadata
            .insert(SUMMARY_SOURCE_KEY.into(), SUMMARY_SOURCE.into());
        let only = vec![s, Message::user("hi")];
        assert_eq!(
            partition(
                &only,
                &Costs::of(TokenCounter::Estimate, &TokenCache::new(), &only, 0),
                16_000,
                2,
                None
            ),
            None
        );
    }
}
