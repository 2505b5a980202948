//! `mpagent user add|list|passwd|rename`: local accounts for the server.

use crate::context::CliContext;
use anyhow::bail;
use clap::{Args, Subcommand};
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
    /// Set a user's password (prompt on a terminal, or `--password-stdin`).
    Passwd {
        name: String,
        #[arg(long)]
        password_stdin: bool,
    },
    /// Rename a user; the stable id, and so all of the user's data, stays the same.
    Rename { name: String, new_name: String },
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
        } => {
            if accounts.find(&name).await?.is_none() {
                bail!("no such user: {name}");
            }
            let pw = read_password(password_stdin)?;
            accounts.set_password(&name, &pw).await?;
            println!("password updated for {name}");
        }
        UserCommand::Rename { name, new_name } => {
            let u = accounts.rename(&name, &new_name).await?;
            println!("renamed {name} to {new_name} (id {} unchanged)", u.id);
        }
    }
    Ok(ExitCode::SUCCESS)
}
