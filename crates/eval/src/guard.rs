//! The evaluation wrapper's rules for `execute_command` — only the scenario's command, actions
//! and mode — and for `browse_webpage` — only `goto` (the scenario's page, with
//! `allow_private_network=true`), `snapshot`, `click_ref`, `get_content` (text) and
//! `close_session`, in the current session. A refused call runs nothing and is written to the
//! world ledger as a failed attempt. Every receipt (refused or not) goes to the ledger with the
//! host-assigned scope.

use crate::ledger::{ToolEvent, ToolScope};
use crate::scenario::CommandRules;
use crate::server::ToolRecorder;
use mpa_protocol::Outcome;
use serde_json::{Value, json};
use std::sync::Mutex;

pub const COMMAND_TOOL: &str = "execute_command";
pub const BROWSER_TOOL: &str = "browse_webpage";
/// The tools the wrapper guards.
pub const GUARDED_TOOLS: [&str; 2] = [COMMAND_TOOL, BROWSER_TOOL];
/// The browser actions the evaluation allows.
pub const BROWSER_ACTIONS: [&str; 5] = [
    "goto",
    "snapshot",
    "click_ref",
    "get_content",
    "close_session",
];
/// The error code of a refused command.
pub const REJECTED: &str = "evaluation_command_rejected";

/// Checks and records `execute_command` calls for one scenario run.
#[derive(Debug)]
pub struct CommandGuard {
    rules: Option<CommandRules>,
    /// The only `cwd` accepted besides none.
    workdir: String,
    recorder: ToolRecorder,
    /// The scenario's page (browser tasks): the only URL `goto` may open.
    page_url: Option<String>,
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
            page_url: None,
            sessions: Mutex::new(Vec::new()),
        }
    }

    fn known_session(&self, id: &str) -> bool {
        self.sessions
            .lock()
            .map(|s| s.iter().any(|k| k == id))
            .unwrap_or(false)
    }

    /// Allows `goto` to this page only (the scenario's page server).
    pub fn with_page(mut self, url: Option<String>) -> Self {
        self.page_url = url;
        self
    }

    /// `Err(reason)` when the call of `tool` is outside the scenario's rules (nothing may run).
    pub fn check_tool(&self, tool: &str, args: &Value) -> Result<(), String> {
        if tool == BROWSER_TOOL {
            self.check_browser(args)
        } else {
            self.check(args)
        }
    }

    fn check_browser(&self, args: &Value) -> Result<(), String> {
        let Some(page) = &self.page_url else {
            return Err("the browser is not part of this task".into());
        };
        let action = text(args, "action").unwrap_or_default();
        if !BROWSER_ACTIONS.contains(&action) {
            return Err(format!(
                "action {action:?} is not allowed here (allowed: {})",
                BROWSER_ACTIONS.join(", ")
            ));
        }
        if args.get("session_key").is_some_and(|k| !k.is_null()) {
            return Err("session_key must be omitted (the current session)".into());
        }
        match action {
            "goto" => {
                if text(args, "url") != Some(page.as_str()) {
                    return Err(format!("goto may open only {page}, exactly as given"));
                }
                if args.get("allow_private_network").and_then(Value::as_bool) != Some(true) {
                    return Err("goto needs allow_private_network=true for this page".into());
                }
            }
            "click_ref" if text(args, "ref").is_none_or(str::is_empty) => {
                return Err("click_ref needs the ref from a snapshot".into());
            }
            "get_content" if text(args, "content_type").is_some_and(|t| t != "text") => {
                return Err("get_content accepts only content_type=text".into());
            }
            _ => {}
        }
        Ok(())
    }

    /// `Err(reason)` when the command call is outside the scenario's rules (nothing may run).
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

    /// Writes one receipt of `tool` to the world ledger.
    pub fn record_tool(
        &self,
        tool: &str,
        args: &Value,
        scope: ToolScope,
        receipt: Value,
        outcome: Outcome,
        refused: Option<String>,
    ) {
        if tool != BROWSER_TOOL {
            return self.record(args, scope, receipt, outcome, refused);
        }
        self.recorder.record(ToolEvent {
            sequence: 0,
            after_attempts: 0,
            tool: BROWSER_TOOL.to_string(),
            command: None,
            input_text: None,
            action: text(args, "action").unwrap_or_default().to_string(),
            session_id: None,
            arguments: args.clone(),
            scope,
            outcome,
            refused,
            receipt,
        });
    }

    /// Writes one command receipt to the world ledger.
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
