//! `mpagent doctor`: checks the MoviePilot the agent is configured for (configuration,
//! reachability, its routes and version, the secret key, the operations offered) and prints one
//! line per check. Exit 0 when nothing failed (warnings allowed), 1 otherwise. Opens nothing in
//! the data directory, so it can run beside a live host.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {}

pub async fn run(_args: DoctorArgs, config: &crate::config::Config) -> anyhow::Result<ExitCode> {
    let mp = config.moviepilot();
    let report = mpa_core::moviepilot::doctor::examine(mp.as_ref().map(|m| &m.config)).await;
    print!("{report}");
    Ok(if report.healthy() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
