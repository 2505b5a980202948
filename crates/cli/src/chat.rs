//! `mpagent chat`: one turn, or a REPL. The terminal renderer only translates the session's event
//! stream. Ctrl-C stops the running turn; a second Ctrl-C exits. In the REPL, a line typed while
//! a turn streams joins that turn at its next model call (steering, spec runtime.md §2); when the
//! turn cannot take it, it runs as the next turn.

use crate::context::CliContext;
use clap::{Args, ValueEnum};
use mpa_core::Steered;
use mpa_protocol::{Event, Outcome, SteeringStatus, TurnStatus};
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

/// The notice for a steering message's progress (queued, joined the task, or discarded).
pub fn steering_line(lang: Lang, status: SteeringStatus, content: &str) -> String {
    match (lang, status) {
        (Lang::En, SteeringStatus::Queued) => {
            "(queued: joins the running task at its next step)".to_string()
        }
        (Lang::En, SteeringStatus::Applied) => format!("(added to the running task: {content})"),
        (Lang::En, SteeringStatus::Discarded) => {
            format!("(not added — the task was stopped first: {content})")
        }
        (Lang::Zh, SteeringStatus::Queued) => "（已排队：将在下一步加入当前任务）".to_string(),
        (Lang::Zh, SteeringStatus::Applied) => format!("（已加入当前任务：{content}）"),
        (Lang::Zh, SteeringStatus::Discarded) => format!("（未加入——任务已先停止：{content}）"),
    }
}

/// The plan as a compact block, printed each time the model replaces it: the objective, then one
/// line per step with a status mark (the evidence after a dash). Statuses are the model's claims,
/// which the header says.
pub fn plan_block(lang: Lang, plan: &serde_json::Value) -> String {
    use std::fmt::Write as _;
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().trim().to_string();
    let mut out = match lang {
        Lang::En => format!(
            "[plan] {} (step states as the model reports them)\n",
            text(&plan["objective"])
        ),
        Lang::Zh => format!(
            "[计划] {}（步骤状态为模型自述）\n",
            text(&plan["objective"])
        ),
    };
    for step in plan["steps"].as_array().into_iter().flatten() {
        let (mark, word) = match (lang, step["status"].as_str().unwrap_or_default()) {
            (Lang::En, "completed") => ("✓", "done"),
            (Lang::En, "in_progress") => ("▸", "in progress"),
            (Lang::En, "blocked") => ("✗", "blocked"),
            (Lang::En, _) => ("·", "pending"),
            (Lang::Zh, "completed") => ("✓", "已完成"),
            (Lang::Zh, "in_progress") => ("▸", "进行中"),
            (Lang::Zh, "blocked") => ("✗", "受阻"),
            (Lang::Zh, _) => ("·", "待办"),
        };
        let _ = write!(out, "  {mark} {} ({word})", text(&step["step"]));
        let evidence = text(&step["evidence"]);
        if !evidence.is_empty() {
            let _ = write!(out, " — {evidence}");
        }
        out.push('\n');
    }
    out
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
            Event::Steering {
                status, content, ..
            } => {
                self.break_line(&mut out);
                let _ = out.flush();
                eprintln!("{}", steering_line(self.lang, *status, content));
            }
            Event::PlanUpdated { plan } => {
                self.break_line(&mut out);
                let _ = write!(out, "{}", plan_block(self.lang, plan));
            }
            Event::TurnStarted { .. }
            | Event::Reasoning { .. }
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

/// The REPL's input while turns stream: each line typed steers the running turn.
struct Typed {
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::io::Stdin>>,
    /// Stdin ended, or `/exit` was typed: the REPL ends once the running turns are done.
    done: bool,
}

impl Typed {
    /// The next line, or never when there is no more input to read.
    async fn next(typed: &mut Option<&mut Typed>) -> std::io::Result<Option<String>> {
        match typed {
            Some(t) if !t.done => t.lines.next_line().await,
            _ => std::future::pending().await,
        }
    }
}

/// Prints the answer to a REPL command the model never sees (help, the session id, an unknown
/// command), also while a turn runs.
fn answer_locally(session: &mpa_core::SessionHandle, input: ReplInput) {
    match input {
        ReplInput::Help => println!("{REPL_HELP}"),
        ReplInput::Session => println!("session: {}", session.session_id()),
        ReplInput::Unknown(name) => println!(
            "unknown command {name}; /help lists the commands (nothing was sent) / 未知命令 {name}，输入 /help 查看命令"
        ),
        ReplInput::Exit | ReplInput::Message => {}
    }
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
    let events = session.submit(actor.clone(), text, images)?;
    drive(session, actor, events, renderer, sigint, None).await
}

/// Renders `first` and the turns queued behind it; with `typed`, every line typed meanwhile
/// steers the running turn (or, when it cannot take it, becomes a turn of its own, shown after).
/// Returns how the last turn ended.
async fn drive(
    session: &mpa_core::SessionHandle,
    actor: &mpa_protocol::Actor,
    first: tokio::sync::mpsc::UnboundedReceiver<Event>,
    renderer: &mut Renderer,
    sigint: &mut Signal,
    mut typed: Option<&mut Typed>,
) -> anyhow::Result<TurnStatus> {
    let mut turns = std::collections::VecDeque::from([first]);
    let mut status = TurnStatus::Failed;
    let mut interrupts = 0u32;
    while let Some(mut events) = turns.pop_front() {
        loop {
            tokio::select! {
                ev = events.recv() => {
                    let Some(ev) = ev else {
                        status = TurnStatus::Failed;
                        break;
                    };
                    renderer.render(&ev);
                    if let Event::TurnEnded { status: s, .. } = ev {
                        status = s;
                        break;
                    }
                }
                line = Typed::next(&mut typed) => {
                    let Some(t) = typed.as_deref_mut() else { continue };
                    let Some(line) = line? else {
                        t.done = true;
                        continue;
                    };
                    let text = line.trim();
                    if text.is_empty() {
                        continue;
                    }
                    match ReplInput::read(text) {
                        ReplInput::Exit => {
                            t.done = true;
                            continue;
                        }
                        ReplInput::Message => {}
                        local => {
                            answer_locally(session, local);
                            continue;
                        }
                    }
                    match session.steer(actor, text.to_string(), Vec::new())? {
                        Steered::Queued { event, .. } => renderer.render(&event),
                        Steered::Turn(rx) => turns.push_back(rx),
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
    Ok(status)
}

/// What the REPL answers itself (`/help`, `/exit`, `/session`, an unknown `/word`); the host
/// commands (`/memory …`, `/skills …`) go to the session, which answers them without the model.
#[derive(Debug, PartialEq, Eq)]
enum ReplInput<'a> {
    Help,
    Exit,
    Session,
    Unknown(&'a str),
    /// A message for the agent (a host command included).
    Message,
}

const REPL_HELP: &str = "\
commands / 命令:
  /help              this list / 本帮助
  /exit, /quit       leave / 退出 (Ctrl-D too)
  /session           the session id, to continue it with --session / 当前会话 id
  /memory …          show or manage memory (answered by the host, not the model) / 记忆
  /skills …          list or manage skills (answered by the host, not the model) / 技能
Anything else is sent to the agent. Ctrl-C stops a running turn. / 其他输入发送给智能体。";

impl<'a> ReplInput<'a> {
    fn read(text: &'a str) -> ReplInput<'a> {
        let word = text.split_whitespace().next().unwrap_or_default();
        // `/movies/x is missing` is a message, not a command.
        let Some(name) = word.strip_prefix('/').filter(|n| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        }) else {
            return ReplInput::Message;
        };
        match name {
            "help" | "?" => ReplInput::Help,
            "exit" | "quit" => ReplInput::Exit,
            "session" => ReplInput::Session,
            "memory" | "skills" => ReplInput::Message,
            _ => ReplInput::Unknown(word),
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
    let mut typed = Typed {
        lines: tokio::io::BufReader::new(tokio::io::stdin()).lines(),
        done: false,
    };
    loop {
        if typed.done {
            return Ok(0);
        }
        if interactive {
            eprint!("you> ");
        }
        let line = tokio::select! {
            l = typed.lines.next_line() => l?,
            _ = sigint.recv() => None,
        };
        let Some(line) = line else { return Ok(0) };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        match ReplInput::read(text) {
            ReplInput::Exit => return Ok(0),
            ReplInput::Message => {}
            local => {
                answer_locally(session, local);
                continue;
            }
        }
        let events = session.submit(actor.clone(), text.to_string(), Vec::new())?;
        drive(session, actor, events, renderer, sigint, Some(&mut typed)).await?;
    }
}
