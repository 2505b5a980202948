//! The evaluation wrapper's rules for `execute_command`: only the scenario's command, actions
//! and mode; a refused call runs nothing and is written to the world ledger as a failed attempt.
//! Every receipt (refused or not) goes to the ledger with the host-assigned scope.

use crate::ledger::{ToolEvent, ToolScope};
use crate::scenario::CommandRules;
use crate::server::ToolRecorder;
use mpa_protocol::Outcome;
use serde_json::{Value, json};
use std::sync::Mutex;

pub const COMMAND_TOOL: &str = "execute_command";
/// The error code of a refused command.
pub const REJECTED: &str = "evaluation_command_rejected";

/// Checks and records `execute_command` calls for one scenario run.
#[derive(Debug)]
pub struct CommandGuard {
    rules: Option<CommandRules>,
    /// The only `cwd` accepted besides none.
    workdir: String,
    recorder: ToolRecorder,
    /// Session ids that a `start` in this run returned.
    sessions: Mutex<Vec<String>>,
}

fn action_of(args: &Value) -> String {
    args.get("action")
        .and_then(Value::as_str)
        .unwrap_or("start")
        .to_string()
}

fn text<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

impl CommandGuard {
    pub fn new(rules: Option<CommandRules>, workdir: String, recorder: ToolRecorder) -> Self {
        CommandGuard {
            rules,
            workdir,
            recorder,
            sessions: Mutex::new(Vec::new()),
        }
    }

    fn known_session(&self, id: &str) -> bool {
        self.sessions
            .lock()
            .map(|s| s.iter().any(|k| k == id))
            .unwrap_or(false)
    }

    /// `Err(reason)` when the call is outside the scenario's rules (nothing may run).
    pub fn check(&self, args: &Value) -> Result<(), String> {
        let Some(rules) = &self.rules else {
            return Err("commands are not part of this task".into());
        };
        let action = action_of(args);
        if !rules.actions.contains(&action) {
            return Err(format!(
                "action {action:?} is not allowed here (allowed: {})",
                rules.actions.join(", ")
            ));
        }
        match action.as_str() {
            "run" | "start" => {
                if text(args, "command") != Some(rules.command.as_str()) {
                    return Err("only the given command may run, exactly as given".into());
                }
                if args.get("env").is_some_and(|e| !e.is_null()) {
                    return Err("env is not allowed".into());
                }
                if args.get("session_id").is_some_and(|e| !e.is_null()) {
                    return Err("session_id is not an input of run/start".into());
                }
                if let Some(cwd) = text(args, "cwd")
                    && cwd != self.workdir
                {
                    return Err("cwd must be omitted or the working directory".into());
                }
                if action == "start"
                    && let Some(pty) = rules.use_pty
                {
                    let given = args.get("use_pty").and_then(Value::as_bool).unwrap_or(true);
                    if given != pty {
                        return Err(format!(
                            "start must use use_pty={pty} (an omitted use_pty means true)"
                        ));
                    }
                }
            }
            _ => {
                let id = text(args, "session_id").unwrap_or_default();
                if !self.known_session(id) {
                    return Err("session_id must be the one start returned".into());
                }
                if action == "write" {
                    if rules.input.as_deref() != text(args, "input_text") {
                        return Err("write must send exactly the given input".into());
                    }
                    if args.get("close_stdin").and_then(Value::as_bool) == Some(true) {
                        return Err("close_stdin is not allowed".into());
                    }
                }
            }
        }
        Ok(())
    }

    /// The structured failure a refused call gets.
    pub fn refusal(reason: &str) -> Value {
        json!({
            "success": false,
            "status": "error",
            "execution_outcome": "failed",
            "error": REJECTED,
            "message": format!("the evaluation refused this command: {reason}; nothing ran"),
        })
    }

    /// Writes one receipt to the world ledger.
    pub fn record(
        &self,
        args: &Value,
        scope: ToolScope,
        receipt: Value,
        outcome: Outcome,
        refused: Option<String>,
    ) {
        let action = action_of(args);
        let session_id = if action == "start" {
            receipt
                .get("session_id")
                .and_then(Value::as_str)
                .map(str::to_string)
        } else {
            text(args, "session_id").map(str::to_string)
        };
        if action == "start"
            && refused.is_none()
            && let (Some(id), Ok(mut known)) = (&session_id, self.sessions.lock())
        {
            known.push(id.clone());
        }
        self.recorder.record(ToolEvent {
            sequence: 0,
            after_attempts: 0,
            tool: COMMAND_TOOL.to_string(),
            command: text(args, "command").map(str::to_string),
            input_text: text(args, "input_text").map(str::to_string),
            action,
            session_id,
            arguments: args.clone(),
            scope,
            outcome,
            refused,
            receipt,
        });
    }
}
