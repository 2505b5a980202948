//! A guardrail decision and how it surfaces (spec learning-guardrails.md §5.8): a warning is a
//! short host note after the result the model reads; a block answers the call "not executed"
//! (outcome failed, nothing dispatched); a halt ends the turn after the batch with a host reply
//! the user reads (English and Chinese). None of them changes a result's outcome.

use super::signature::Signature;
use crate::tools::ToolOutput;
use crate::tools::gate::Halt;
use mpa_protocol::TurnStatus;
use serde_json::{Value, json};

/// What a decision does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The call ran; the model is told.
    Warn,
    /// The call is not executed.
    Block,
    /// The call ran; the turn ends after its batch.
    Halt,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Action::Warn => "warn",
            Action::Block => "block",
            Action::Halt => "halt",
        }
    }
}

/// Why: the stable codes of spec learning-guardrails.md §5.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    ExactFailureWarning,
    ExactFailureBlock,
    SameToolFailureWarning,
    SameToolFailureHalt,
    NoProgressWarning,
    NoProgressBlock,
    IdenticalCallWarning,
    IdenticalCallHalt,
    CycleWarning,
    CycleHalt,
    WebSearchCap,
    SubagentCap,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::ExactFailureWarning => "repeated_exact_failure_warning",
            Code::ExactFailureBlock => "repeated_exact_failure_block",
            Code::SameToolFailureWarning => "same_tool_failure_warning",
            Code::SameToolFailureHalt => "same_tool_failure_halt",
            Code::NoProgressWarning => "idempotent_no_progress_warning",
            Code::NoProgressBlock => "idempotent_no_progress_block",
            Code::IdenticalCallWarning => "identical_call_warning",
            Code::IdenticalCallHalt => "identical_call_streak_halt",
            Code::CycleWarning => "identical_cycle_warning",
            Code::CycleHalt => "identical_cycle_halt",
            Code::WebSearchCap => "loop_web_search_cap",
            Code::SubagentCap => "loop_subagent_cap",
        }
    }
}

/// One decision about one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub action: Action,
    pub code: Code,
    pub message: String,
    pub tool: String,
    pub count: u32,
    pub signature: Option<Signature>,
}

impl Decision {
    pub fn new(action: Action, code: Code, tool: &str, count: u32, message: String) -> Self {
        Self {
            action,
            code,
            message,
            tool: tool.to_string(),
            count,
            signature: None,
        }
    }

    pub fn with_signature(mut self, signature: Signature) -> Self {
        self.signature = Some(signature);
        self
    }

    /// The decision as metadata: never the arguments, only their hash.
    pub fn metadata(&self) -> Value {
        let mut v = json!({
            "action": self.action.as_str(),
            "code": self.code.as_str(),
            "message": self.message,
            "tool_name": self.tool,
            "count": self.count,
        });
        if let Some(sig) = self.signature {
            v["signature"] = json!({"tool_name": self.tool, "args_hash": sig.hex()});
        }
        v
    }

    /// The host note appended to the result the model reads.
    pub fn note(&self) -> String {
        let head = match self.action {
            Action::Warn => "Tool loop warning",
            Action::Block | Action::Halt => "Tool loop hard stop",
        };
        format!(
            "[{head}: {}; count={}; {}]",
            self.code.as_str(),
            self.count,
            self.message
        )
    }

    /// The answer to a blocked call: not executed, outcome failed.
    pub fn refusal(&self) -> ToolOutput {
        let mut out = ToolOutput::json(
            &json!({
                "success": false,
                "error": self.code.as_str(),
                "message": format!("not executed: {}", self.message),
                "guardrail": self.metadata(),
            }),
            mpa_protocol::Outcome::Failed,
        )
        .with_error(self.code.as_str());
        out.metadata
            .insert("guardrail_refusal".into(), Value::Bool(true));
        out
    }

    /// Ends the turn after this batch with the host's reply. The status is `blocked` until the
    /// turn's writes say otherwise (`unknown`, `waiting`: see [`super::outcomes`]).
    pub fn halt(&self) -> Halt {
        Halt {
            code: self.code.as_str().to_string(),
            message: self.message.clone(),
            status: TurnStatus::Blocked,
            reply: Some(halt_reply(&self.tool, self.code, self.count)),
        }
    }
}

/// What the user reads when a guardrail ends the turn: not done, nothing undone.
pub fn halt_reply(tool: &str, code: Code, count: u32) -> String {
    format!(
        "本轮未完成：对 {tool} 的重复调用没有进展（{code}，{count} 次），已停止继续尝试。任务尚未完成，\
         请根据最新结果调整做法；已执行的操作不会被撤销。\n\
         This turn is not finished: I stopped repeating {tool} because it made no progress \
         ({code}, {count} times). The task is not done; adjust based on the latest results. \
         Operations already carried out are not undone.",
        code = code.as_str()
    )
}

pub fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The note for a streak of identical calls with identical results.
pub fn streak_note(tool: &str, count: u32) -> String {
    format!(
        "[Host note: this is the {} consecutive identical call to {tool} with identical arguments \
         returning the same result. Do not repeat it — change arguments, use a different tool, or \
         proceed with what you have.]",
        ordinal(count)
    )
}

/// The note for a repeated cycle of calls.
pub fn cycle_note(tool: &str, period: usize, laps: u32) -> String {
    format!(
        "[Host note: the last {laps} rounds repeated the same cycle of {period} tool calls (ending \
         with {tool}) with identical arguments and identical results. Break the cycle — change \
         arguments, use a different tool, or proceed with what you have.]"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_read_as_english() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 103, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "103rd",
                "111th"
            ]
        );
    }

    #[test]
    fn a_block_is_a_failed_answer_with_its_decision_and_no_arguments() {
        let d = Decision::new(
            Action::Block,
            Code::ExactFailureBlock,
            "flaky",
            5,
            "it failed".into(),
        )
        .with_signature(Signature(7));
        let out = d.refusal();
        assert_eq!(out.outcome, mpa_protocol::Outcome::Failed);
        assert_eq!(out.error.as_deref(), Some("repeated_exact_failure_block"));
        let v: Value = serde_json::from_str(&out.content).unwrap_or_default();
        assert_eq!(v["message"], "not executed: it failed");
        assert_eq!(
            v["guardrail"]["signature"]["args_hash"],
            format!("{:032x}", 7)
        );
        assert_eq!(
            d.note(),
            "[Tool loop hard stop: repeated_exact_failure_block; count=5; it failed]"
        );
    }
}
