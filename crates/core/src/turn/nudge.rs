//! End-of-turn continuation nudges (spec learning-guardrails.md §6; seed `agent.md` 执行纠偏与
//! 停止): a model that ends a step with a short answer announcing what it will do next
//! ("接下来我会查看下载状态。", "I'll now check the logs.") and no tool call, while tools are
//! offered, has not done it. The settle rule [`ContinuationNudge`] keeps that answer and asks
//! again, at most twice per loop run; the `Continuation` contributor adds the host's prompt to
//! the next request only (never saved, so never a user message and never a learning turn). A
//! third such answer ends the turn `partial`.
//!
//! The detector ([`announces_action`]) looks only at the end of a short answer: a trigger
//! phrase followed by at most 100 characters without a sentence end. Numbers, file names and
//! short real answers never match; neither does an announcement followed by another sentence.

use super::error::TurnError;
use super::settle::{Answer, SettleRule, Settled};
use super::steps::LoopState;
use mpa_protocol::TurnStatus;
use regex::Regex;
use std::sync::LazyLock;

/// Host continuation prompts per loop run.
pub const MAX_NUDGES: u32 = 2;
/// Longer answers are real answers, whatever their last sentence says.
const MAX_ANSWER_CHARS: usize = 400;
/// Where the trailing announcement must sit.
const TAIL_CHARS: usize = 160;

/// Sent (once, after the transcript) after an answer that only announced work.
pub const CONTINUE_NUDGE: &str = "[Host note: continue now. Execute the required tool calls, and \
only send your final answer after completing the task.]";

/// The nudges of this loop run (a slot of the turn's state).
#[derive(Debug, Default)]
pub struct Nudges {
    pub count: u32,
    /// The next request carries [`CONTINUE_NUDGE`].
    pub asking: bool,
}

/// The English triggers (Hermes') and their Chinese localisation (MoviePilot's), each followed
/// by at most 100 characters without a sentence end, one optional final mark, then only
/// whitespace.
static TRAILING_INTENT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let trigger = concat!(
        r"(?:\b(?:let me now|i['’]?ll now|i will now|now i['’]?ll|now i will|next[,:]\s*i)\b",
        r"|(?:接下来|现在)[，,]?\s*我\s*(?:会|将|要)",
        r"|我\s*(?:现在|接下来)\s*(?:会|将|要)",
        r"|让我\s*(?:现在|接下来))",
    );
    let pattern = format!(r"(?i){trigger}[^.!?\n。！？]{{0,100}}[.:…。：]?\s*$");
    Regex::new(&pattern)
        .inspect_err(|e| tracing::error!(error = %e, "trailing-intent pattern does not compile"))
        .ok()
});

static THINK: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?s)<think>.*?</think>").ok());

/// Whether a final answer only announces an action it did not take.
pub fn announces_action(answer: &str) -> bool {
    let text = match THINK.as_ref() {
        Some(think) => think.replace_all(answer, ""),
        None => answer.into(),
    };
    let text = text.trim();
    let chars = text.chars().count();
    if chars == 0 || chars > MAX_ANSWER_CHARS {
        return false;
    }
    let tail = match text.char_indices().nth(chars.saturating_sub(TAIL_CHARS)) {
        Some((at, _)) if chars > TAIL_CHARS => &text[at..],
        _ => text,
    };
    TRAILING_INTENT.as_ref().is_some_and(|re| re.is_match(tail))
}

/// See the module docs.
pub struct ContinuationNudge;

impl SettleRule for ContinuationNudge {
    fn name(&self) -> &'static str {
        "continuation_nudge"
    }

    fn settle(&self, answer: &Answer<'_>, state: &mut LoopState) -> Option<Settled> {
        // The prompt goes with one request only.
        let count = state.turn.with(|n: &mut Nudges| {
            n.asking = false;
            n.count
        });
        let c = answer.completion;
        if !c.tool_calls.is_empty()
            || answer.truncated
            || state.offer.specs.is_empty()
            || !announces_action(&c.content)
        {
            return None;
        }
        if count >= MAX_NUDGES {
            return Some(Settled::Final(
                TurnStatus::Partial,
                Some(TurnError::ContinuationExhausted),
            ));
        }
        state.turn.with(|n: &mut Nudges| {
            n.count += 1;
            n.asking = true;
        });
        Some(Settled::Continue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_announcements_in_english_and_chinese_match() {
        for text in [
            "接下来我会查看下载状态。",
            "接下来我会检查日志",
            "好的。接下来，我将整理这些文件：",
            "我现在会重新搜索一次…",
            "让我现在看看订阅列表",
            "Done reading. I'll now run the tests.",
            "I will now check the download queue",
            "Now I’ll look at the logs:",
            "Next, I check the subscription.",
            "<think>the user wants x</think>Let me now open the folder.",
        ] {
            assert!(announces_action(text), "{text}");
        }
    }

    #[test]
    fn answers_and_mid_text_announcements_do_not_match() {
        for text in [
            "42",
            "config.yaml",
            "是",
            "SQLite",
            ":8080",
            "下载已完成，共 3 个文件。",
            "I'll now check the logs. The download finished at 10:02.",
            "接下来我会检查日志。日志显示下载已完成。",
            "Let me check the logs.",
            "",
        ] {
            assert!(!announces_action(text), "{text}");
        }
        let long = format!("{} I'll now check the logs.", "word ".repeat(90));
        assert!(!announces_action(&long), "longer than 400 characters");
    }
}
