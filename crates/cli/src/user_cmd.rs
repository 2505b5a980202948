//! `mpagent user add|list|passwd|rename|delete|revoke|link|unlink`: local accounts for the server,
//! through the core's accounts facade. `link` (and `add --moviepilot-user`) makes an account act
//! as a MoviePilot user: with `MOVIEPILOT_SECRET_KEY` the host mints that user's tokens.

use crate::context::CliContext;
use anyhow::bail;
use clap::{Args, Subcommand};
use mpa_core::Tokens;
use std::io::BufRead;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct UserArgs {
    #[command(subcommand)]
    pub cmd: UserCommand,
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user. Prompts for a password on a terminal; `--password-stdin` reads one line.
    Add {
        name: String,
        /// Give the user admin rights.
        #[arg(long)]
        admin: bool,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
        /// Create the user without a password (it can chat locally but cannot log in).
        #[arg(long, conflicts_with = "password_stdin")]
        no_password: bool,
        /// Link the user to this MoviePilot user id (see `user link`).
        #[arg(long, value_name = "ID")]
        moviepilot_user: Option<String>,
    },
    /// List users (id, name, admin).
    List,
    /// Set a user's password (prompt on a terminal, or `--password-stdin`). Every session of the
    /// user is logged out, unless `--keep-sessions`.
    Passwd {
        name: String,
        #[arg(long)]
        password_stdin: bool,
        /// Keep the user's existing login sessions (tokens) valid.
        #[arg(long)]
        keep_sessions: bool,
    },
    /// Rename a user; the stable id, and so all of the user's data, stays the same.
    Rename { name: String, new_name: String },
    /// Delete a user account and log out its sessions. Its chats and history stay on disk under
    /// its id (never reused: a new user of the same name sees none of them).
    Delete { name: String },
    /// Log out every session of a user (its login tokens stop working at once).
    Revoke { name: String },
    /// Link a user to a MoviePilot user id (MoviePilot → 用户管理): its MoviePilot calls are made
    /// as that user, with tokens the host mints with MOVIEPILOT_SECRET_KEY (administrator rights
    /// in MoviePilot only when this user is an admin here).
    Link {
        name: String,
        /// The MoviePilot user id (a number).
        moviepilot_user_id: String,
        /// The MoviePilot user name put in minted tokens (default: NAME).
        #[arg(long)]
        moviepilot_name: Option<String>,
    },
    /// Remove a user's MoviePilot link (its MoviePilot calls then answer moviepilot_not_linked).
    Unlink { name: String },
}

fn read_password(from_stdin: bool) -> anyhow::Result<String> {
    let pw = if from_stdin {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        line.trim_end_matches(['\r', '\n']).to_string()
    } else if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        let a = rpassword::prompt_password("password: ")?;
        let b = rpassword::prompt_password("again: ")?;
        if a != b {
            bail!("the passwords do not match");
        }
        a
    } else {
        bail!("no terminal to prompt for a password: use --password-stdin or --no-password");
    };
    Ok(pw)
}

pub async fn run(args: UserArgs, ctx: &CliContext) -> anyhow::Result<ExitCode> {
    let accounts = ctx.host.accounts();
    match args.cmd {
        UserCommand::Add {
            name,
            admin,
            password_stdin,
            no_password,
            moviepilot_user,
        } => {
            let pw = if no_password {
                None
            } else {
                Some(read_password(password_stdin)?)
            };
            if let Some(id) = &moviepilot_user
                && (id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()))
            {
                bail!("--moviepilot-user takes MoviePilot's numeric user id, not {id:?}");
            }
            // One transaction: a taken name or link creates nothing.
            let created = match &moviepilot_user {
                Some(id) => {
                    accounts
                        .create_linked(&name, admin, pw.as_deref(), id)
                        .await
                }
                None => accounts.create(&name, admin, pw.as_deref()).await,
            };
            let u = match created {
                Ok(u) => u,
                Err(e) => bail!("user {name} not created: {e}"),
            };
            println!(
                "created user {} (id {}){}",
                u.name,
                u.id,
                if u.is_admin { ", admin" } else { "" }
            );
            if let Some(id) = moviepilot_user {
                println!("{name} acts as MoviePilot user {id}");
            }
            if accounts.signs_in_with_moviepilot() && pw.is_some() {
                eprintln!(
                    "note: with MPA_AUTH=moviepilot the web page checks logins at MoviePilot, so this \
                     password is not used there / MPA_AUTH=moviepilot 时网页登录使用 MoviePilot 账户"
                );
            }
        }
        UserCommand::List => {
            for u in accounts.list().await? {
                let link = accounts.moviepilot_link(&u.name).await?;
                println!(
                    "{}\t{}\t{}{}",
                    u.id,
                    u.name,
                    if u.is_admin { "admin" } else { "user" },
                    link.map(|id| format!("\tmoviepilot:{id}"))
                        .unwrap_or_default()
                );
            }
        }
        UserCommand::Passwd {
            name,
            password_stdin,
            keep_sessions,
        } => {
            if accounts.find(&name).await?.is_none() {
                bail!("no such user: {name}");
            }
            let pw = read_password(password_stdin)?;
            let tokens = if keep_sessions {
                Tokens::Keep
            } else {
                Tokens::Revoke
            };
            let revoked = accounts.set_password(&name, &pw, tokens).await?;
            if keep_sessions {
                println!("password updated for {name}; existing sessions kept");
            } else {
                println!("password updated for {name}; {revoked} session(s) logged out");
            }
        }
        UserCommand::Rename { name, new_name } => {
            let u = accounts.rename(&name, &new_name).await?;
            println!("renamed {name} to {new_name} (id {} unchanged)", u.id);
        }
        UserCommand::Delete { name } => {
            let u = accounts.delete(&name).await?;
            println!(
                "deleted user {name} (id {}); its sessions are logged out, its chats and history stay under that id",
                u.id
            );
        }
        UserCommand::Revoke { name } => {
            let revoked = accounts.revoke_tokens(&name).await?;
            println!("{revoked} session(s) of {name} logged out");
        }
        UserCommand::Link {
            name,
            moviepilot_user_id,
            moviepilot_name,
        } => {
            let u = accounts
                .link_moviepilot(
                    &name,
                    Some((&moviepilot_user_id, moviepilot_name.as_deref())),
                )
                .await?;
            println!(
                "{name} (id {}) acts as MoviePilot user {moviepilot_user_id}{}",
                u.id,
                if ctx.config.moviepilot_secret_key.is_some() {
                    ""
                } else {
                    "; set MOVIEPILOT_SECRET_KEY so the host can make its calls"
                }
            );
        }
        UserCommand::Unlink { name } => {
            accounts.link_moviepilot(&name, None).await?;
            println!("{name} is no longer linked to a MoviePilot user");
        }
    }
    Ok(ExitCode::SUCCESS)
}
