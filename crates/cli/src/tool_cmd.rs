//! `mpagent tool NAME --args JSON`: runs one tool exactly as the agent would and prints its JSON
//! result. Exit 0 for succeeded/pending, 1 for failed/unknown, 2 for bad usage.

use crate::context::CliContext;
use clap::Args;
use mpa_protocol::Outcome;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ToolArgs {
    /// Tool name (e.g. update_plan).
    pub name: String,
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

pub async fn run(args: ToolArgs, ctx: &CliContext) -> anyhow::Result<ExitCode> {
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
