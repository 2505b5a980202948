//! What every subcommand shares: the parsed config, the data directory and the host, built once by
//! `mpa_core::Host::open`.

use crate::config::Config;
use anyhow::Context as _;
use mpa_protocol::Actor;
use mpa_store::Store;
use std::path::PathBuf;

pub struct CliContext {
    pub config: Config,
    pub data_dir: PathBuf,
    pub host: mpa_core::Host,
    pub store: Store,
}

impl CliContext {
    pub fn open(config: Config) -> anyhow::Result<CliContext> {
        let data_dir = config.data_dir.clone();
        let workdir = match &config.workdir {
            Some(w) => w.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let mut host_cfg = mpa_core::HostConfig::new(data_dir.clone(), config.agent_config());
        host_cfg.workdir = workdir;
        host_cfg.venv_path = config.venv_path.clone();
        host_cfg.diagnostic_tools = config.enable_test_tools;
        let host = mpa_core::Host::open(host_cfg)
            .with_context(|| format!("cannot open the host in {}", data_dir.display()))?;
        let store = host.agent().store().clone();
        Ok(CliContext {
            config,
            data_dir,
            host,
            store,
        })
    }

    /// The local user `name`, created on first use. `admin` grants admin rights for this
    /// invocation only.
    pub async fn local_actor_with(&self, name: &str, admin: bool) -> anyhow::Result<Actor> {
        Ok(self.host.local_actor(name, admin).await?)
    }

    pub async fn local_actor(&self, name: &str) -> anyhow::Result<Actor> {
        self.local_actor_with(name, false).await
    }

    pub fn agent(&self) -> anyhow::Result<mpa_core::Agent> {
        Ok(self.host.agent().clone())
    }
}
