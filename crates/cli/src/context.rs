//! What every subcommand shares: the parsed config, the data directory and the main store.

use crate::config::Config;
use anyhow::Context as _;
use mpa_protocol::Actor;
use mpa_store::Store;
use std::path::PathBuf;

pub struct CliContext {
    pub config: Config,
    pub data_dir: PathBuf,
    pub store: Store,
}

impl CliContext {
    pub fn open(config: Config) -> anyhow::Result<CliContext> {
        let data_dir = config.data_dir.clone();
        let store = Store::open_in(&data_dir)
            .with_context(|| format!("cannot open the main store in {}", data_dir.display()))?;
        Ok(CliContext {
            config,
            data_dir,
            store,
        })
    }

    /// The local user `name`, created on first use (local CLI use is trusted: whoever can run the
    /// binary owns the data directory). `admin` grants admin rights for this invocation only.
    pub async fn local_actor_with(&self, name: &str, admin: bool) -> anyhow::Result<Actor> {
        let user = self.store.ensure_local_user(name).await?;
        Ok(Actor {
            user_id: user.id,
            user_name: user.name,
            is_admin: admin || user.is_admin,
        })
    }

    pub async fn local_actor(&self, name: &str) -> anyhow::Result<Actor> {
        self.local_actor_with(name, false).await
    }

    /// The process's capability hubs, built from the config.
    pub fn capabilities(&self) -> anyhow::Result<mpa_core::Capabilities> {
        let workdir = match &self.config.workdir {
            Some(w) => w.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let exec = mpa_exec::Processes::new(mpa_exec::ExecConfig {
            venv_path: self.config.venv_path.clone(),
            ..mpa_exec::ExecConfig::new(workdir, self.data_dir.join("agent/runtime/exec/output"))
        });
        let skills = mpa_skills::SkillHub::new(self.data_dir.clone());
        for line in skills.recover_on_start() {
            tracing::warn!("skills recovery: {line}");
        }
        Ok(mpa_core::Capabilities {
            exec: Some(exec),
            memory: Some(mpa_memory::MemoryHub::new(mpa_memory::MemoryConfig::new(
                self.data_dir.clone(),
            ))),
            skills: Some(skills),
            history: Some(mpa_history::HistoryHub::new(
                mpa_history::HistoryConfig::new(self.data_dir.clone()),
            )),
        })
    }

    pub fn agent(&self) -> anyhow::Result<mpa_core::Agent> {
        let caps = self.capabilities()?;
        let registry = mpa_core::default_registry(
            &mpa_core::RegistryOptions {
                diagnostic_tools: self.config.enable_test_tools,
            },
            &caps,
        );
        Ok(mpa_core::Agent::new(
            self.config.agent_config(),
            self.store.clone(),
            registry,
            caps,
        )?)
    }
}
