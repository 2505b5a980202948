//! `mpagent serve`: the HTTP host (web page, SSE chat API, OpenAI-compatible endpoint). Ctrl-C or
//! SIGTERM stops accepting, stops running turns (their snapshots are written) and exits.

use crate::context::CliContext;
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Hours a login token stays valid.
    #[arg(long, env = "MPA_TOKEN_TTL_HOURS", default_value_t = 168, value_parser = clap::value_parser!(u64).range(1..))]
    pub token_ttl_hours: u64,
    /// Model id advertised by /v1/models and echoed in completions.
    #[arg(long, env = "MPA_OPENAI_MODEL_NAME", default_value = "mpagent")]
    pub model_name: String,
    /// Seconds a client may take to send a request's headers; also how long an idle keep-alive
    /// connection stays open.
    #[arg(long, env = "MPA_HEADER_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_secs: u64,
    /// Seconds a request body may stop arriving before the request is answered 408.
    #[arg(long, env = "MPA_BODY_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_secs: u64,
    /// Connections one client address may hold open at once (behind a reverse proxy every user
    /// shares the proxy's address: raise it there).
    #[arg(long, env = "MPA_MAX_CONNECTIONS_PER_IP", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections_per_ip: u64,
}

/// Resolves on the first SIGINT or SIGTERM (the binary is Unix-only, as `chat` is).
async fn shutdown_signal() {
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    eprintln!("mpagent serve: shutting down");
}

/// Hourly retention (`DATA_CLEANUP_ENABLE`, `DATA_CLEANUP_AGENT_CHAT_DAYS`; 0 days = keep
/// forever): chat evidence and settled write receipts. The first pass runs at start.
fn spawn_retention(agent: &mpa_core::Agent, ctx: &CliContext) {
    let days = ctx.config.data_cleanup_agent_chat_days;
    if !ctx.config.data_cleanup_enable || days == 0 {
        return;
    }
    let agent = agent.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tick.tick().await;
            agent.retention_pass(days).await;
        }
    });
}

/// A configured secret key is tried once before the host serves anyone: a key MoviePilot refuses
/// would otherwise show only as every call failing with 403.
async fn check_secret_key(ctx: &CliContext) -> anyhow::Result<()> {
    use mpa_core::moviepilot::doctor::KeyCheck;
    let Some(key) = ctx
        .config
        .moviepilot_secret_key
        .as_deref()
        .filter(|k| !k.is_empty())
    else {
        return Ok(());
    };
    match ctx.host.check_moviepilot_key(key).await {
        Some(KeyCheck::Rejected(why) | KeyCheck::Unusable(why)) => {
            anyhow::bail!("MOVIEPILOT_SECRET_KEY cannot be used: {why}")
        }
        Some(KeyCheck::NotChecked(why) | KeyCheck::Unreachable(why)) => {
            eprintln!("mpagent serve: warning: MOVIEPILOT_SECRET_KEY {why}");
        }
        Some(KeyCheck::Accepted(_)) | None => {}
    }
    Ok(())
}

pub async fn run(args: ServeArgs, ctx: &CliContext) -> anyhow::Result<ExitCode> {
    check_secret_key(ctx).await?;
    let agent = ctx.agent()?;
    spawn_retention(&agent, ctx);
    let mut cfg = mpa_server::ServerConfig::new(ctx.config.listen);
    cfg.admin_token = ctx.config.admin_token.clone().filter(|t| !t.is_empty());
    cfg.token_ttl = Duration::from_secs(args.token_ttl_hours * 3600);
    cfg.model_name = args.model_name;
    cfg.header_read_timeout = Duration::from_secs(args.header_timeout_secs);
    cfg.body_read_timeout = Duration::from_secs(args.body_timeout_secs);
    cfg.max_connections_per_ip = usize::try_from(args.max_connections_per_ip).unwrap_or(usize::MAX);
    let no_users = ctx.host.accounts().list().await?.is_empty();
    let host = mpa_server::Host::bind(agent, cfg).await?;
    let addr = host.local_addr()?;
    if ctx.host.accounts().signs_in_with_moviepilot() {
        eprintln!(
            "mpagent serve: users sign in with their MoviePilot accounts (MPA_AUTH=moviepilot)"
        );
    } else if no_users {
        eprintln!(
            "mpagent serve: no user accounts yet. Create one to log in:\n    mpagent user add NAME --admin"
        );
    }
    // Tests and scripts wait for this exact line (the port is real even when 0 was asked).
    eprintln!("mpagent serve: listening on http://{addr}");
    host.run(shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}
