//! `mpagent chat`: one turn, or a REPL. The terminal renderer only translates the session's event
//! stream. Ctrl-C stops the running turn; a second Ctrl-C exits.

use crate::context::CliContext;
use clap::{Args, ValueEnum};
use mpa_protocol::{Event, Outcome, TurnStatus};
use std::io::Write;
use std::process::ExitCode;
use tokio::io::AsyncBufReadExt;
use tokio::signal::unix::{Signal, SignalKind, signal};

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum OutputFormat {
    /// Streamed text with one line per tool activity.
    Text,
    /// One JSON event per line (machine-readable).
    Jsonl,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Local user to chat as (created on first use).
    #[arg(long, env = "MPA_USER", default_value = "local")]
    pub user: String,
    /// Continue this session (default: a new session; its id is printed to stderr).
    #[arg(long)]
    pub session: Option<String>,
    /// Run tools with admin rights for this invocation.
    #[arg(long)]
    pub admin: bool,
    /// Attach an image (URL or data URL); repeatable.
    #[arg(long = "image")]
    pub images: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// The message. Without it, an interactive REPL reads one message per line (`/exit` quits).
    pub message: Option<String>,
}

/// The language of the text renderer's own words: Chinese when the locale (`LC_ALL`,
/// `LC_MESSAGES`, `LANG`, first one set) starts with `zh`, else English.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    En,
    Zh,
}

impl Lang {
    pub fn from_locale(get: impl Fn(&str) -> Option<String>) -> Lang {
        let locale = ["LC_ALL", "LC_MESSAGES", "LANG"]
            .iter()
            .find_map(|k| get(k).filter(|v| !v.is_empty()))
            .unwrap_or_default();
        if locale.to_ascii_lowercase().starts_with("zh") {
            Lang::Zh
        } else {
            Lang::En
        }
    }
}

/// One tool line: a marker and the outcome word in the user's language. `unknown` says what it
/// means (it may have happened), so it never reads like a success.
pub fn tool_line(lang: Lang, name: &str, outcome: Outcome, message: &str) -> String {
    let (mark, word) = match (lang, outcome) {
        (Lang::En, Outcome::Succeeded) => ("✓", "succeeded"),
        (Lang::En, Outcome::Failed) => ("✗", "failed"),
        (Lang::En, Outcome::Pending) => ("…", "pending (submitted, not finished yet)"),
        (Lang::En, Outcome::Unknown) => (
            "?",
            "UNKNOWN (may or may not have happened; verify before retrying)",
        ),
        (Lang::Zh, Outcome::Succeeded) => ("✓", "成功"),
        (Lang::Zh, Outcome::Failed) => ("✗", "失败"),
        (Lang::Zh, Outcome::Pending) => ("…", "已提交（尚未完成）"),
        (Lang::Zh, Outcome::Unknown) => ("?", "结果未知（可能已生效，重试前请先核实）"),
    };
    let (tag, sep) = match lang {
        Lang::En => ("[tool]", ": "),
        Lang::Zh => ("[工具]", "："),
    };
    format!("{tag} {mark} {name} {word}{sep}{message}")
}

fn running_line(lang: Lang, message: &str) -> String {
    match lang {
        Lang::En => format!("[tool] {message} … running"),
        Lang::Zh => format!("[工具] {message} … 进行中"),
    }
}

struct Renderer {
    format: OutputFormat,
    lang: Lang,
    /// Colour the outcome (a terminal, and `NO_COLOR` unset).
    color: bool,
    mid_line: bool,
}

impl Renderer {
    fn render(&mut self, ev: &Event) {
        let mut out = std::io::stdout().lock();
        if self.format == OutputFormat::Jsonl {
            let _ = writeln!(out, "{}", serde_json::to_string(ev).unwrap_or_default());
            let _ = out.flush();
            return;
        }
        match ev {
            Event::Delta { content } => {
                let _ = write!(out, "{content}");
                self.mid_line = !content.ends_with('\n');
            }
            Event::ToolStarted { message, .. } => {
                self.break_line(&mut out);
                let _ = writeln!(out, "{}", running_line(self.lang, message));
            }
            Event::ToolFinished {
                name,
                outcome,
                message,
                ..
            } => {
                self.break_line(&mut out);
                let line = tool_line(self.lang, name, *outcome, message);
                let color = match outcome {
                    Outcome::Succeeded => "32",
                    Outcome::Failed => "31",
                    Outcome::Pending => "36",
                    Outcome::Unknown => "1;33",
                };
                if self.color {
                    let _ = writeln!(out, "\x1b[{color}m{line}\x1b[0m");
                } else {
                    let _ = writeln!(out, "{line}");
                }
            }
            Event::Error { message, .. } => {
                self.break_line(&mut out);
                let _ = out.flush();
                eprintln!("error: {message}");
            }
            Event::TurnEnded { status, .. } => {
                self.break_line(&mut out);
                if let Some(note) = status_note(*status) {
                    eprintln!("{note}");
                }
            }
            Event::Protected { content } => {
                self.break_line(&mut out);
                let _ = writeln!(out, "[protected — shown only to you, not kept]\n{content}");
            }
            Event::Compacted { .. } => {
                self.break_line(&mut out);
                let _ = out.flush();
                eprintln!("(context summarised: earlier messages stay in the chat and searchable)");
            }
            Event::TurnStarted { .. }
            | Event::Reasoning { .. }
            | Event::PlanUpdated { .. }
            | Event::Usage { .. }
            | Event::Budget { .. }
            // A nested agent's events (a subagent's) are not shown to the user.
            | Event::Nested { .. } => {}
        }
        let _ = out.flush();
    }

    fn break_line(&mut self, out: &mut impl Write) {
        if self.mid_line {
            let _ = writeln!(out);
            self.mid_line = false;
        }
    }
}

/// The line a host stop state gets after the answer (it says what the host saw, not whether
/// the task is done).
fn status_note(status: TurnStatus) -> Option<&'static str> {
    match status {
        TurnStatus::Stopped => Some("(stopped)"),
        TurnStatus::Blocked => Some("(blocked: a host guardrail stopped repeated tool calls)"),
        TurnStatus::Waiting => Some("(waiting: a submitted operation has not finished yet)"),
        TurnStatus::Unknown => {
            Some("(unknown: an operation may or may not have happened; verify before retrying)")
        }
        TurnStatus::Partial => Some("(partial: the answer is not complete)"),
        TurnStatus::Completed | TurnStatus::Failed | TurnStatus::IterationLimit => None,
    }
}

fn exit_code(status: TurnStatus) -> u8 {
    match status {
        // Accepted and not finished yet, as `mpagent tool` exits 0 for `pending`.
        TurnStatus::Completed | TurnStatus::Waiting => 0,
        TurnStatus::Failed
        | TurnStatus::IterationLimit
        | TurnStatus::Partial
        | TurnStatus::Blocked
        | TurnStatus::Unknown => 1,
        TurnStatus::Stopped => 130,
    }
}

pub async fn run(args: ChatArgs, ctx: &CliContext) -> anyhow::Result<ExitCode> {
    let actor = ctx.local_actor_with(&args.user, args.admin).await?;
    let agent = ctx.agent()?;
    let session_id = match &args.session {
        Some(s) => s.clone(),
        None => {
            let id = mpa_core::new_session_id();
            eprintln!("session: {id}");
            id
        }
    };
    let session = agent.session(&actor, &session_id, "cli").await?;
    let mut renderer = Renderer {
        format: args.output,
        lang: Lang::from_locale(|k| std::env::var(k).ok()),
        color: std::io::IsTerminal::is_terminal(&std::io::stdout())
            && std::env::var_os("NO_COLOR").is_none(),
        mid_line: false,
    };
    // One listener for the whole process: a signal that arrives between two events is kept, not
    // lost (a fresh `ctrl_c()` future per loop iteration would miss it).
    let mut sigint = signal(SignalKind::interrupt())?;
    let code = match args.message {
        Some(message) => {
            let status = one_turn(
                &session,
                &actor,
                message,
                args.images,
                &mut renderer,
                &mut sigint,
            )
            .await?;
            exit_code(status)
        }
        None => repl(&session, &actor, &mut renderer, &mut sigint).await?,
    };
    agent.shutdown().await;
    Ok(ExitCode::from(code))
}

/// Runs one turn; a first Ctrl-C stops it, a second exits the process at once.
async fn one_turn(
    session: &mpa_core::SessionHandle,
    actor: &mpa_protocol::Actor,
    text: String,
    images: Vec<String>,
    renderer: &mut Renderer,
    sigint: &mut Signal,
) -> anyhow::Result<TurnStatus> {
    let mut events = session.submit(actor.clone(), text, images)?;
    let mut interrupts = 0u32;
    loop {
        tokio::select! {
            ev = events.recv() => {
                let Some(ev) = ev else { return Ok(TurnStatus::Failed) };
                renderer.render(&ev);
                if let Event::TurnEnded { status, .. } = ev {
                    return Ok(status);
                }
            }
            _ = sigint.recv() => {
                interrupts += 1;
                if interrupts >= 2 {
                    eprintln!("\nexiting");
                    std::process::exit(130);
                }
                eprintln!("\nstopping… (Ctrl-C again to exit now)");
                session.stop();
            }
        }
    }
}

async fn repl(
    session: &mpa_core::SessionHandle,
    actor: &mpa_protocol::Actor,
    renderer: &mut Renderer,
    sigint: &mut Signal,
) -> anyhow::Result<u8> {
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        if interactive {
            eprint!("you> ");
        }
        let line = tokio::select! {
            l = lines.next_line() => l?,
            _ = sigint.recv() => None,
        };
        let Some(line) = line else { return Ok(0) };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if text == "/exit" || text == "/quit" {
            return Ok(0);
        }
        one_turn(
            session,
            actor,
            text.to_string(),
            Vec::new(),
            renderer,
            sigint,
        )
        .await?;
    }
}
