//! `mpagent user add|list|passwd|rename|delete|revoke`: local accounts for the server, through the
//! core's accounts facade.

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
        } => {
            let pw = if no_password {
                None
            } else {
                Some(read_password(password_stdin)?)
            };
            let u = accounts.create(&name, admin, pw.as_deref()).await?;
            println!(
                "created user {} (id {}){}",
                u.name,
                u.id,
                if u.is_admin { ", admin" } else { "" }
            );
        }
        UserCommand::List => {
            for u in accounts.list().await? {
                println!(
                    "{}\t{}\t{}",
                    u.id,
                    u.name,
                    if u.is_admin { "admin" } else { "user" }
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
    }
    Ok(ExitCode::SUCCESS)
}
