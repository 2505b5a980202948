//! `mpagent history import-moviepilot` / `import-hermes`: thin front ends over
//! `mpa_core::history::legacy`. A progress bar with the row rate goes to stderr; one JSON summary line
//! (sessions, messages imported, duplicates, skipped with reasons) goes to stdout. Re-running
//! resumes from the saved cursor and never duplicates.

use crate::context::CliContext;
use anyhow::Context as _;
use mpa_core::history::legacy::{self, ImportProgress, ImportSummary, MoviePilotSource};
use mpa_core::history::{History, HistoryConfig};
use std::collections::HashMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct ImportMoviePilotArgs {
    /// MoviePilot's config directory (holds `user.db` and `agent/runtime/history/users/`).
    /// Each MoviePilot user is imported into the local user of the same name (created on
    /// first use).
    #[arg(long)]
    pub config_dir: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct ImportHermesArgs {
    /// The Hermes `state.db` (usually `~/.hermes/state.db`); opened read-only.
    #[arg(long)]
    pub state_db: PathBuf,
    /// Owner of the imported history (created on first use).
    #[arg(long)]
    pub user: String,
}

fn progress_bar() -> indicatif::ProgressBar {
    let bar =
        indicatif::ProgressBar::with_draw_target(Some(0), indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bar:30} {pos}/{len} rows ({per_sec}) {msg} eta {eta}",
    ) {
        bar.set_style(style);
    }
    bar
}

fn on_progress(bar: &indicatif::ProgressBar) -> impl FnMut(ImportProgress) + '_ {
    move |p| {
        bar.set_length(p.total);
        bar.set_position(p.done);
        bar.set_message(format!("{} imported", p.imported));
    }
}

fn print_summary(
    s: &ImportSummary,
    started: Instant,
    extra: serde_json::Value,
) -> anyhow::Result<()> {
    let secs = started.elapsed().as_secs_f64();
    let mut v = serde_json::to_value(s)?;
    if let (Some(obj), serde_json::Value::Object(more)) = (v.as_object_mut(), extra) {
        obj.extend(more);
        obj.insert("skipped_total".into(), s.skipped_total().into());
        obj.insert("seconds".into(), secs.into());
    }
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &v)?;
    writeln!(out)?;
    Ok(())
}

pub async fn import_moviepilot(
    args: ImportMoviePilotArgs,
    ctx: &CliContext,
) -> anyhow::Result<ExitCode> {
    let src = MoviePilotSource::open(&args.config_dir)?;
    let mut users = HashMap::new();
    let mut unusable = Vec::new();
    for name in src.user_names() {
        match ctx.local_actor(&name).await {
            Ok(actor) => {
                users.insert(name, mpa_core::UserKey::for_user(&actor.user_id));
            }
            // A MoviePilot name our store does not accept: its messages are skipped
            // (`unmapped_user`) instead of failing the whole import.
            Err(e) => {
                eprintln!(
                    "warning: MoviePilot user {name:?} cannot be created locally: {}",
                    crate::error_text(&e)
                );
                unusable.push(name);
            }
        }
    }
    let hub = History::new(HistoryConfig::new(&ctx.data_dir));
    let bar = progress_bar();
    let started = Instant::now();
    let summary = legacy::import_moviepilot(&hub, &src, &users, &mut on_progress(&bar))
        .await
        .with_context(|| {
            format!(
                "MoviePilot import from {} failed (a re-run resumes from the saved cursor)",
                args.config_dir.display()
            )
        })?;
    bar.finish_and_clear();
    print_summary(
        &summary,
        started,
        serde_json::json!({"unusable_user_names": unusable}),
    )?;
    Ok(ExitCode::SUCCESS)
}

pub async fn import_hermes(args: ImportHermesArgs, ctx: &CliContext) -> anyhow::Result<ExitCode> {
    let key = mpa_core::UserKey::for_user(&ctx.local_actor(&args.user).await?.user_id);
    let hub = History::new(HistoryConfig::new(&ctx.data_dir));
    let bar = progress_bar();
    let started = Instant::now();
    let summary = legacy::import_hermes(&hub, &args.state_db, &key, &mut on_progress(&bar))
        .await
        .with_context(|| {
            format!(
                "Hermes import from {} failed (a re-run resumes from the saved cursor)",
                args.state_db.display()
            )
        })?;
    bar.finish_and_clear();
    print_summary(&summary, started, serde_json::json!({"user": args.user}))?;
    Ok(ExitCode::SUCCESS)
}
