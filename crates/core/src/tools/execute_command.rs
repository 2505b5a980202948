//! `execute_command` (spec runtime.md §5): one-shot runs and background terminals on the host,
//! for administrators. The arguments ([`ExecuteCommandArgs`]) become `mpa-exec`'s typed
//! requests; its typed reports are the reply, serialised once (they size themselves to the
//! 65 536-character budget, so the generic cap leaves them alone). The terminal scope is the
//! conversation's — found again by owner on every call, so it survives a reloaded actor — and is
//! never named by the arguments.

mod args;

pub use args::{ExecuteCommandArgs, RunTimeout};

use super::guardrails::LoopClass;
use super::{ToolContext, ToolMeta, ToolOutput, ToolResult, TypedTool};
use async_trait::async_trait;
use mpa_exec::{
    Action, CommandSpec, ExecError, ListReport, OutputCursor, Processes, RunReport, RunRequest,
    ScopeId, ScopeOwner, SessionAction, SessionReport, SessionRequest, Signal, StartRequest,
    clip_json_escaped,
};
use mpa_protocol::{EffectClass, Outcome};
use serde::Serialize;
use std::time::Duration;

pub struct ExecuteCommand {
    pub processes: Processes,
}

pub const NAME: &str = "execute_command";

/// The fixed answer for a terminal session this scope may not act on (missing, foreign, or not
/// granted for the action): the same for every reason, echoing nothing.
pub fn access_denied(action: &str) -> ToolOutput {
    failure(
        action,
        ExecError::AccessDenied.code(),
        &ExecError::AccessDenied.to_string(),
        None,
    )
    .with_error(ExecError::AccessDenied.code())
}

/// A subtask's own terminal scope, bound by the host when it starts the subtask (spec runtime.md
/// §5.6): the child's calls act through it — its grants, never the conversation's scope.
#[derive(Debug, Default, Clone)]
pub struct SubtaskScope(pub Option<ScopeId>);

/// The scope label of a conversation's terminals.
pub fn scope_label(session_id: &str) -> String {
    format!("session:{session_id}")
}

#[async_trait]
impl TypedTool for ExecuteCommand {
    type Args = ExecuteCommandArgs;
    const NAME: &'static str = NAME;

    fn description(&self) -> String {
        "Run shell commands on the MoviePilot host (admin only).\n\
         - action=run: one-shot command; stdin is closed, timeout (s) default 60, max 300; returns \
         exit_code, status and output (long output: head+tail preview, full text in output_file). \
         success is true only for exit code 0.\n\
         - action=start: start a background terminal (PTY by default, use_pty=false for pipes) and \
         get a session_id; waits up to yield_time_ms (default 250) for first output.\n\
         - read / wait / write / interrupt / kill / status with session_id; list shows your terminals.\n\
         Output paging: pass back output_until_seq as since_seq and output_until_offset as \
         since_offset to continue exactly where the last reply ended (max_bytes per page, default \
         10240). output_lost=true means older output was dropped (1 MiB retained per session). \
         wait returns as soon as new output exists, the process finishes, or timeout_ms passes; it \
         never kills. write sends input_text; close_stdin=true sends EOF (pipe sessions only). \
         interrupt sends one SIGINT; kill sends signal_name (default TERM) and SIGKILL after 3 s.\n\
         A running status means pending, not success; judge by exit_code. Destructive commands \
         (rm -rf /, mkfs, raw disk writes, fork bombs, shutdown/reboot) are refused unless \
         confirm_dangerous=true."
            .into()
    }

    fn meta(&self) -> ToolMeta {
        // A run of distinct failures is diagnosis; `read`/`wait`/`status`/`list` poll.
        ToolMeta::new(EffectClass::ArbitraryExecution)
            .admin()
            .self_capped()
            .loop_class(LoopClass::TERMINAL)
    }

    fn invalid_arguments(&self, args: &serde_json::Value, error: serde_json::Error) -> ToolOutput {
        let message = ExecError::InvalidArgument(error.to_string()).to_string();
        failure(args::action_name(args), "invalid_arguments", &message, None)
    }

    async fn run(&self, ctx: ToolContext, args: ExecuteCommandArgs) -> ToolOutput {
        // The policy refuses non-admins before this runs; this is the second line of defence.
        if !ctx.actor.is_admin {
            return permission_denied();
        }
        let action = args.action();
        let scope = self.scope_of(&ctx);
        self.dispatch(&scope, action, args)
            .await
            .unwrap_or_else(|err| exec_failure(action, &err))
    }
}

/// The session's terminal scope, opened on first use (a slot of the session state): it belongs
/// to the conversation, not to the actor, and closes with it (`capability::Terminals`).
#[derive(Debug, Default)]
pub struct TerminalScope(pub Option<ScopeId>);

impl ExecuteCommand {
    /// The conversation's live scope (the same one after the actor was reloaded), recorded in
    /// the session state so the host can close it with the conversation.
    fn scope_of(&self, ctx: &ToolContext) -> ScopeId {
        if let Some(child) = ctx.session.with(|s: &mut SubtaskScope| s.0.clone()) {
            return child;
        }
        let scope = self.processes.open_scope(ScopeOwner {
            user_key: mpa_redact::UserKey::for_user(&ctx.actor.user_id),
            label: scope_label(&ctx.session_id),
        });
        ctx.session.put(TerminalScope(Some(scope.clone())));
        scope
    }

    async fn dispatch(
        &self,
        scope: &ScopeId,
        action: Action,
        args: ExecuteCommandArgs,
    ) -> Result<ToolOutput, ExecError> {
        let cursor = OutputCursor {
            since_seq: args.since_seq,
            since_offset: args.since_offset,
        };
        let session_action = match action {
            Action::Run => {
                let request = RunRequest {
                    timeout: Duration::from_secs(args.timeout.seconds),
                    spec: command_spec(&args),
                };
                let mut report = self.processes.run(scope, request).await?;
                if let Some(note) = &args.timeout.note {
                    report.message.push_str("; ");
                    report.message.push_str(note);
                }
                return Ok(ToolOutput::result(&report));
            }
            Action::Start => {
                let request = StartRequest {
                    spec: command_spec(&args),
                    use_pty: args.use_pty.unwrap_or(true),
                    yield_time: Duration::from_millis(args.yield_time_ms()),
                    since_offset: args.since_offset,
                    max_bytes: args.max_bytes,
                };
                let report = self.processes.start(scope, request).await?;
                return Ok(ToolOutput::result(&report));
            }
            Action::List => return Ok(ToolOutput::result(&self.processes.list(scope)?)),
            Action::Read => SessionAction::Read,
            Action::Status => SessionAction::Status,
            Action::Wait => SessionAction::Wait {
                timeout: Duration::from_millis(args.timeout_ms),
            },
            Action::Write => SessionAction::Write {
                input: args.input_text.clone().unwrap_or_default(),
                close_stdin: args.close_stdin.unwrap_or(false),
            },
            Action::Interrupt => SessionAction::Interrupt,
            // The signal is checked before anything else can change state.
            Action::Kill => SessionAction::Kill {
                signal: signal(args.signal_name.as_ref())?,
            },
        };
        let request = SessionRequest {
            session_id: args.session_id.unwrap_or_default(),
            cursor,
            max_bytes: args.max_bytes,
            action: session_action,
        };
        let report = self.processes.session_action(scope, request).await?;
        Ok(ToolOutput::result(&report))
    }
}

fn command_spec(args: &ExecuteCommandArgs) -> CommandSpec {
    CommandSpec {
        command: args.command.clone().unwrap_or_default(),
        cwd: args.cwd.clone(),
        shell: args.shell.clone(),
        login: args.login,
        env: args.env.clone(),
        confirm_dangerous: args.confirm_dangerous.unwrap_or(false),
    }
}

/// `signal_name`: a name with or without `SIG`, or its number (default TERM).
fn signal(value: Option<&serde_json::Value>) -> Result<Signal, ExecError> {
    use serde_json::Value;
    let found = match value {
        None => Some(Signal::TERM),
        Some(Value::Number(n)) => n.as_i64().and_then(Signal::from_number),
        Some(Value::String(s)) => Signal::from_name(s),
        Some(_) => None,
    };
    found.ok_or_else(|| {
        let shown: String = value
            .map(|v| v.to_string().chars().take(40).collect())
            .unwrap_or_default();
        let names: Vec<&str> = Signal::SUPPORTED.iter().map(|s| s.name()).collect();
        ExecError::InvalidArgument(format!(
            "signal_name {shown} is not supported; use one of {}",
            names.join(", ")
        ))
    })
}

impl ToolResult for RunReport {
    fn outcome(&self) -> Outcome {
        self.execution_outcome
    }
}

impl ToolResult for SessionReport {
    fn outcome(&self) -> Outcome {
        self.execution_outcome
    }
}

impl ToolResult for ListReport {
    fn outcome(&self) -> Outcome {
        self.execution_outcome
    }
}

/// The error reply of any action (spec runtime.md §5.4 "Error JSON").
#[derive(Serialize)]
struct Failure<'a> {
    error: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    error_truncated: bool,
    status: &'static str,
    action: &'a str,
    success: bool,
    execution_outcome: Outcome,
    code: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    minimum_read_bytes: Option<usize>,
}

fn failure(action: &str, code: &str, message: &str, minimum: Option<usize>) -> ToolOutput {
    let (error, error_truncated) = clip_json_escaped(message, 512);
    ToolOutput::json(
        &Failure {
            error,
            error_truncated,
            status: "error",
            action,
            success: false,
            execution_outcome: Outcome::Failed,
            code,
            minimum_read_bytes: minimum,
        },
        Outcome::Failed,
    )
}

fn exec_failure(action: Action, err: &ExecError) -> ToolOutput {
    failure(
        action.as_str(),
        err.code(),
        &err.to_string(),
        err.minimum_read_bytes(),
    )
}

fn permission_denied() -> ToolOutput {
    ToolOutput::json(
        &serde_json::json!({
            "error": "execute_command is available to administrators only",
            "status": "error",
            "success": false,
            "execution_outcome": "failed",
            "code": "permission_denied"
        }),
        Outcome::Failed,
    )
}
