//! What every subcommand shares: the parsed config, the data directory and the host, built once by
//! `mpa_core::Host::open`.

use crate::config::Config;
use anyhow::Context as _;
use mpa_protocol::Actor;
use std::path::PathBuf;

pub struct CliContext {
    pub config: Config,
    pub data_dir: PathBuf,
    pub host: mpa_core::Host,
}

impl CliContext {
    pub async fn open(config: Config) -> anyhow::Result<CliContext> {
        if config.auth == "moviepilot" && config.moviepilot().is_none() {
            anyhow::bail!(
                "MPA_AUTH=moviepilot checks logins at MoviePilot: set MOVIEPILOT_URL too / MPA_AUTH=moviepilot 需要同时设置 MOVIEPILOT_URL"
            );
        }
        if config.moviepilot().is_none()
            && config
                .moviepilot_secret_key
                .as_deref()
                .is_some_and(|k| !k.is_empty())
        {
            eprintln!(
                "warning: MOVIEPILOT_SECRET_KEY is set but MOVIEPILOT_URL is not, so the key is not \
                 used / 已设置 MOVIEPILOT_SECRET_KEY 但未设置 MOVIEPILOT_URL，密钥不会被使用"
            );
        }
        let data_dir = config.data_dir.clone();
        let workdir = match &config.workdir {
            Some(w) => w.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let mut host_cfg = mpa_core::HostConfig::new(data_dir.clone(), config.agent_config());
        host_cfg.workdir = workdir;
        host_cfg.venv_path = config.venv_path.clone();
        host_cfg.search = mpa_core::tools::search_web::SearchConfig::from_settings(
            config.searxng_url.as_deref(),
            config.brave_search_api_key.as_deref(),
        )
        .map_err(anyhow::Error::msg)?;
        host_cfg.diagnostic_tools = config.enable_test_tools;
        host_cfg.moviepilot = config.moviepilot();
        host_cfg.browser.executable = config.browser_path.clone();
        host_cfg.browser.idle_ttl = std::time::Duration::from_secs(config.browser_idle_ttl);
        host_cfg.browser.ocr_url = config.captcha_ocr_url.clone();
        host_cfg.terminal_idle_ttl = (config.terminal_idle_ttl > 0)
            .then(|| std::time::Duration::from_secs(config.terminal_idle_ttl));
        let host = mpa_core::Host::open(host_cfg)
            .await
            .with_context(|| format!("cannot open the host in {}", data_dir.display()))?;
        Ok(CliContext {
            config,
            data_dir,
            host,
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
