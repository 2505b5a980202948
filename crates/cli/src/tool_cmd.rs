//! `mpagent tool NAME --args JSON`: runs one tool exactly as the agent would (same policy, ledger
//! and outcome) and prints its JSON result. Exit 0 for succeeded/pending, 1 for failed/unknown,
//! 2 for bad usage. `mpagent tool list` and `mpagent tool show NAME` print the tools the user may
//! call and their schemas.

use crate::context::CliContext;
use clap::Args;
use mpa_protocol::Outcome;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ToolArgs {
    /// Tool name (e.g. update_plan), or `list`, or `show`.
    pub name: String,
    /// With `show`: the tool to describe.
    pub tool: Option<String>,
    /// Local user to run as (created on first use).
    #[arg(long, env = "MPA_USER", default_value = "local")]
    pub user: String,
    /// Run with admin rights.
    #[arg(long)]
    pub admin: bool,
    /// Session context (default: a fresh one).
    #[arg(long)]
    pub session: Option<String>,
    /// Tool arguments as a JSON object.
    #[arg(long, default_value = "{}")]
    pub args: String,
}

fn visible(ctx: &CliContext, admin: bool) -> Vec<mpa_core::tools::RegisteredTool> {
    let actor = mpa_protocol::Actor {
        user_id: mpa_protocol::UserId(String::new()),
        user_name: String::new(),
        is_admin: admin,
    };
    ctx.host
        .agent()
        .services()
        .tools
        .list()
        .into_iter()
        .filter(|t| mpa_core::tools::policy::visible(&actor, &t.meta))
        .collect()
}

fn meta_json(t: &mpa_core::tools::RegisteredTool) -> serde_json::Value {
    serde_json::json!({
        "effect": t.meta.effect,
        "requires_admin": t.meta.requires_admin,
        "internal": t.meta.internal,
    })
}

fn list(ctx: &CliContext, admin: bool) -> ExitCode {
    let tools = visible(ctx, admin);
    let width = tools.iter().map(|t| t.spec.name.len()).max().unwrap_or(4);
    // External tools name the MCP server they come from; built-in ones are the host's.
    let server = |name: &str| {
        ctx.host
            .mcp()
            .and_then(|hub| hub.server_of(name))
            .unwrap_or_else(|| "-".into())
    };
    let server_width = tools
        .iter()
        .map(|t| server(&t.spec.name).len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!(
        "{:width$}  {:<20}  ADMIN  {:server_width$}  DESCRIPTION",
        "TOOL", "EFFECT", "SERVER"
    );
    for t in tools {
        let first = t.spec.description.split(". ").next().unwrap_or_default();
        let short: String = first.chars().take(80).collect();
        println!(
            "{:width$}  {:<20}  {:<5}  {:server_width$}  {short}",
            t.spec.name,
            t.meta.effect.as_str(),
            if t.meta.requires_admin { "yes" } else { "" },
            server(&t.spec.name),
        );
    }
    ExitCode::SUCCESS
}

fn show(ctx: &CliContext, admin: bool, name: Option<&str>) -> ExitCode {
    let Some(name) = name else {
        eprintln!("error: usage: mpagent tool show NAME (see `mpagent tool list`)");
        return ExitCode::from(2);
    };
    match visible(ctx, admin)
        .into_iter()
        .find(|t| t.spec.name == name)
    {
        Some(t) => {
            let v = serde_json::json!({
                "name": t.spec.name,
                "description": t.spec.description,
                "parameters": t.spec.parameters,
                "meta": meta_json(&t),
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&v).unwrap_or_else(|_| v.to_string())
            );
            ExitCode::SUCCESS
        }
        None => {
            eprintln!(
                "error: no tool named {name:?}{}; see `mpagent tool list`",
                if admin {
                    ""
                } else {
                    " for a non-admin (try --admin)"
                }
            );
            ExitCode::from(2)
        }
    }
}

pub async fn run(args: ToolArgs, ctx: &CliContext) -> anyhow::Result<ExitCode> {
    match args.name.as_str() {
        "list" => return Ok(list(ctx, args.admin)),
        "show" => return Ok(show(ctx, args.admin, args.tool.as_deref())),
        _ => {}
    }
    if let Some(extra) = &args.tool {
        eprintln!("error: unexpected argument {extra:?}; pass tool arguments with --args JSON");
        return Ok(ExitCode::from(2));
    }
    let parsed: serde_json::Value = match serde_json::from_str(&args.args) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        Ok(_) => {
            eprintln!("error: --args must be a JSON object");
            return Ok(ExitCode::from(2));
        }
        Err(e) => {
            eprintln!("error: --args is not valid JSON: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let actor = ctx.local_actor_with(&args.user, args.admin).await?;
    let agent = ctx.agent()?;
    let session = args.session.unwrap_or_else(mpa_core::new_session_id);
    match agent.run_tool(&actor, &session, &args.name, parsed).await {
        Ok((out, outcome)) => {
            println!("{}", out.content);
            eprintln!("outcome: {outcome}");
            Ok(ExitCode::from(match outcome {
                Outcome::Succeeded | Outcome::Pending => 0,
                Outcome::Failed | Outcome::Unknown => 1,
            }))
        }
        Err(
            e @ (mpa_core::CoreError::UnknownTool(_) | mpa_core::CoreError::InvalidSessionId(_)),
        ) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(2))
        }
        Err(e) => Err(e.into()),
    }
}
