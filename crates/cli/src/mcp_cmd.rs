//! `mpagent mcp add|list|remove|test|serve`: the external MCP servers admins configure (local use
//! of the binary is trusted, as for `mpagent user`), and the host's tools served over stdio for
//! desktop clients that launch a command. Output is JSON; env and header values are never
//! printed. Exit 0 on success, 1 when the server could not be reached or the action failed, 2 for
//! bad usage.

use crate::context::CliContext;
use clap::{Args, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(subcommand)]
    pub action: McpAction,
}

#[derive(Debug, Subcommand)]
pub enum McpAction {
    /// Add (or replace) an external server and list its tools.
    Add(AddArgs),
    /// The configured servers and their tools.
    List,
    /// Remove a server: its tools leave the agent, its process ends.
    Remove { name: String },
    /// Connect to a configured server now and list its tools.
    Test { name: String },
    /// Serve the agent's tools as an MCP server (stdio: for desktop clients that launch a
    /// command; the tools run as `--user`).
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// Server name: 1-24 of a-z, 0-9 and '-'; its tools are named mcp__<name>__<tool>.
    pub name: String,
    /// A stdio server: the command to start.
    #[arg(long, conflicts_with = "url")]
    pub command: Option<String>,
    /// An argument of the command (repeat for several).
    #[arg(long = "arg", allow_hyphen_values = true)]
    pub args: Vec<String>,
    /// NAME=VALUE for the command's environment, or NAME alone to pass this shell's value
    /// (repeat for several; values are stored, never shown).
    #[arg(long = "env")]
    pub env: Vec<String>,
    /// A streamable HTTP server: its URL.
    #[arg(long)]
    pub url: Option<String>,
    /// 'Name: Value' (as curl writes it) or NAME=VALUE, sent with every request, e.g.
    /// 'Authorization: Bearer …' (repeat; values are stored, never shown).
    #[arg(long = "header")]
    pub headers: Vec<String>,
    /// A tool of the server that only reads (repeat); every other tool counts as a write.
    #[arg(long = "read")]
    pub read_tools: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve over stdin/stdout (the only transport of this command; `mpagent serve` has /mcp).
    #[arg(long)]
    pub stdio: bool,
    /// Local user the tools run as (created on first use).
    #[arg(long, env = "MPA_USER", default_value = "local")]
    pub user: String,
    /// Run with admin rights.
    #[arg(long)]
    pub admin: bool,
}

/// `NAME=VALUE`, or `NAME` taken from this process's environment.
fn pairs(
    items: &[String],
    from_env: bool,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let mut out = serde_json::Map::new();
    for item in items {
        let (k, v) = match item.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None if from_env => match std::env::var(item) {
                Ok(v) => (item.clone(), v),
                Err(_) => return Err(format!("{item} is not set in this shell's environment")),
            },
            None => return Err(format!("{item:?} must be NAME=VALUE")),
        };
        out.insert(k, v.into());
    }
    Ok(out)
}

/// `Name: Value` (curl's form; a token may hold '=') or `NAME=VALUE`.
fn header_pairs(items: &[String]) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let mut out = serde_json::Map::new();
    for item in items {
        let by_colon = item.split_once(':').filter(|(name, _)| {
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
        let (name, value) = match by_colon.or_else(|| item.split_once('=')) {
            Some((name, value)) => (name.trim(), value.trim()),
            // Not quoted back: the text may be the credential itself.
            None => return Err("a --header must be 'Name: Value' or NAME=VALUE".into()),
        };
        out.insert(name.to_string(), value.into());
    }
    Ok(out)
}

fn print(v: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

fn connected(v: &serde_json::Value) -> ExitCode {
    if v["status"] == "connected" {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

pub async fn run(a: McpArgs, ctx: &CliContext) -> anyhow::Result<ExitCode> {
    let Some(hub) = ctx.host.mcp() else {
        anyhow::bail!("this host has no MCP client");
    };
    let code = match a.action {
        McpAction::Add(add) => {
            let config = match add_config(add) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            match hub.add(config).await {
                Ok(v) => {
                    print(&v);
                    connected(&v)
                }
                Err(e) if e.code() == "invalid_mcp_server" => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
                Err(e) => return Err(e.into()),
            }
        }
        McpAction::List => {
            print(&serde_json::json!({ "servers": hub.list().await? }));
            ExitCode::SUCCESS
        }
        McpAction::Remove { name } => match hub.remove(&name).await {
            Ok(()) => {
                print(&serde_json::json!({ "removed": name }));
                ExitCode::SUCCESS
            }
            Err(e) if e.code() == "mcp_server_not_found" => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
            Err(e) => return Err(e.into()),
        },
        McpAction::Test { name } => match hub.test(serde_json::json!({ "name": name })).await {
            Ok(v) => {
                print(&v);
                connected(&v)
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        McpAction::Serve(s) => {
            if !s.stdio {
                eprintln!(
                    "error: usage: mpagent mcp serve --stdio (over HTTP, `mpagent serve` publishes /mcp)"
                );
                return Ok(ExitCode::from(2));
            }
            let actor = ctx.local_actor_with(&s.user, s.admin).await?;
            mpa_core::mcp::serve_stdio(ctx.host.agent(), actor).await?;
            ExitCode::SUCCESS
        }
    };
    hub.shutdown().await;
    Ok(code)
}

fn add_config(add: AddArgs) -> Result<serde_json::Value, String> {
    let mut v = serde_json::json!({ "name": add.name, "read_tools": add.read_tools });
    let o = v
        .as_object_mut()
        .ok_or_else(|| "internal error".to_string())?;
    match (add.command, add.url) {
        (Some(command), None) => {
            o.insert("transport".into(), "stdio".into());
            o.insert("command".into(), command.into());
            o.insert("args".into(), add.args.into());
            o.insert("env".into(), pairs(&add.env, true)?.into());
        }
        (None, Some(url)) => {
            o.insert("transport".into(), "streamable_http".into());
            o.insert("url".into(), url.into());
            o.insert("headers".into(), header_pairs(&add.headers)?.into());
        }
        _ => return Err("give either --command (stdio) or --url (streamable HTTP)".into()),
    }
    Ok(v)
}
