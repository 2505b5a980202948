//! `TestHost`: the agent every session-level test drives — a real SQLite store in a temporary
//! directory, the mock model server, a local user — built in one place instead of a copy per
//! test file.

use mpa_core::capability::{Learning, Terminals};
use mpa_core::tools::Tool;
use mpa_core::{Agent, AgentBuilder, AgentConfig, Capabilities, RegistryOptions};
use mpa_model::ModelConfig;
use mpa_protocol::{Actor, Event, Message, TurnStatus};
use mpa_store::Store;
use mpa_test_support::MockModelServer;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct TestHost {
    pub dir: tempfile::TempDir,
    /// The data directory: the store and the capabilities' files live here.
    pub data: PathBuf,
    pub store: Store,
    pub agent: Agent,
    pub actor: Actor,
}

type CapsFn = Box<dyn FnOnce(&Path) -> Capabilities>;
type ExtendFn = Box<dyn FnOnce(AgentBuilder) -> AgentBuilder>;
type ConfigFn = Box<dyn FnOnce(&mut AgentConfig)>;

pub struct TestHostBuilder {
    model: ModelConfig,
    user: String,
    admin: bool,
    data_subdir: Option<String>,
    config: Vec<ConfigFn>,
    caps: Option<CapsFn>,
    diagnostic_tools: bool,
    extend: Vec<ExtendFn>,
}

impl TestHost {
    /// A host talking to `mock` as model `model` (no retries), for user `lin`, with the
    /// diagnostic tools and no capability hubs.
    pub fn builder(mock: &MockModelServer, model: &str) -> TestHostBuilder {
        Self::offline().model(|m| {
            m.base_url = mock.base_url.clone();
            m.model = model.into();
            m.max_retries = 0;
        })
    }

    /// A host whose model is never called (the default model configuration).
    pub fn offline() -> TestHostBuilder {
        TestHostBuilder {
            model: ModelConfig::default(),
            user: "lin".into(),
            admin: false,
            data_subdir: None,
            config: Vec::new(),
            caps: None,
            diagnostic_tools: true,
            extend: Vec::new(),
        }
    }

    /// Runs one turn as the host's user and collects its events.
    pub async fn turn(&self, session: &str, text: &str) -> Turn {
        self.turn_on("test", session, text).await
    }

    /// [`TestHost::turn`] from `channel` (a message channel such as `telegram` stops tool loops
    /// that the web page only warns about).
    pub async fn turn_on(&self, channel: &str, session: &str, text: &str) -> Turn {
        run_turn_on(&self.agent, &self.actor, channel, session, text).await
    }

    /// The stored conversation of `session`.
    pub async fn messages(&self, session: &str) -> Vec<Message> {
        self.agent
            .chat_for(&self.actor, session)
            .await
            .unwrap()
            .agent_messages
    }
}

/// Runs one turn of `session` as `actor` (channel `test`) and collects its events.
pub async fn run_turn(agent: &Agent, actor: &Actor, session: &str, text: &str) -> Turn {
    run_turn_on(agent, actor, "test", session, text).await
}

/// [`run_turn`] from `channel`.
pub async fn run_turn_on(
    agent: &Agent,
    actor: &Actor,
    channel: &str,
    session: &str,
    text: &str,
) -> Turn {
    let mut rx = agent
        .submit(actor, session, channel, text.into(), vec![])
        .await
        .unwrap();
    let mut events = Vec::new();
    while let Some(ev) = rx.recv().await {
        if let Event::TurnEnded {
            status,
            final_text,
            halt,
        } = ev
        {
            return Turn {
                status,
                final_text,
                halt,
                events,
            };
        }
        events.push(ev);
    }
    panic!("the turn ended without TurnEnded")
}

/// How a turn ended, and its events before `TurnEnded`.
pub struct Turn {
    pub status: TurnStatus,
    pub final_text: String,
    pub halt: Option<mpa_protocol::TurnHalt>,
    pub events: Vec<Event>,
}

impl TestHostBuilder {
    /// Changes the model client's configuration (retries, output limit, …).
    pub fn model(mut self, f: impl FnOnce(&mut ModelConfig)) -> Self {
        f(&mut self.model);
        self
    }

    pub fn user(mut self, name: &str) -> Self {
        self.user = name.into();
        self
    }

    /// The user acts as an administrator.
    pub fn admin(mut self) -> Self {
        self.admin = true;
        self
    }

    /// The store and files go under `<tempdir>/<sub>` instead of the temporary directory itself.
    pub fn data_subdir(mut self, sub: &str) -> Self {
        self.data_subdir = Some(sub.into());
        self
    }

    pub fn config(mut self, f: impl FnOnce(&mut AgentConfig) + 'static) -> Self {
        self.config.push(Box::new(f));
        self
    }

    /// The capability hubs, built inside the data directory.
    pub fn caps(mut self, f: impl FnOnce(&Path) -> Capabilities + 'static) -> Self {
        self.caps = Some(Box::new(f));
        self
    }

    pub fn diagnostic_tools(mut self, on: bool) -> Self {
        self.diagnostic_tools = on;
        self
    }

    /// A built-in tool of the test's own.
    pub fn tool(self, tool: Arc<dyn Tool>) -> Self {
        self.extend(move |b| b.tool(tool))
    }

    /// Anything else the agent builder takes (capabilities, gates, contributors).
    pub fn extend(mut self, f: impl FnOnce(AgentBuilder) -> AgentBuilder + 'static) -> Self {
        self.extend.push(Box::new(f));
        self
    }

    pub async fn build(self) -> TestHost {
        let dir = tempfile::tempdir().unwrap();
        let data = match &self.data_subdir {
            Some(sub) => dir.path().join(sub),
            None => dir.path().to_path_buf(),
        };
        let store = Store::open_in(&data).unwrap();
        let user = store.ensure_local_user(&self.user).await.unwrap();
        let actor = Actor {
            user_id: user.id,
            user_name: user.name,
            is_admin: self.admin,
        };
        let mut cfg = AgentConfig::new(self.model);
        for f in self.config {
            f(&mut cfg);
        }
        let caps = self.caps.map(|f| f(&data)).unwrap_or_default();
        let mut builder = Agent::builder(cfg, store.clone())
            .caps(caps)
            .options(RegistryOptions {
                diagnostic_tools: self.diagnostic_tools,
            });
        for f in self.extend {
            builder = f(builder);
        }
        let agent = builder.build().unwrap();
        TestHost {
            dir,
            data,
            store,
            agent,
            actor,
        }
    }
}

/// Terminals, memory and skills under `data` (what the learning tests and reviews need).
pub fn learning_caps(data: &Path) -> Capabilities {
    Capabilities::default()
        .with(Terminals::new(mpa_exec::Processes::new(
            mpa_exec::ExecConfig::new(data.to_path_buf(), data.join("spill")),
        )))
        .with(Learning::new(
            mpa_learning::Memory::new(mpa_learning::MemoryConfig::new(data.to_path_buf())),
            mpa_learning::Skills::new(data.to_path_buf()),
        ))
}

/// How a test host reaches MoviePilot (the fake, or a closed port).
pub struct Gateway {
    pub url: String,
    pub secret: String,
    /// Who calls are made as; `None`: the account store decides (as in production).
    pub identity: Option<Arc<dyn mpa_core::moviepilot::identity::IdentityResolver>>,
}

/// The model the host-level tests talk to: `gpt-4o` on the mock, no retries.
pub fn mock_model(mock: &MockModelServer) -> ModelConfig {
    ModelConfig {
        base_url: mock.base_url.clone(),
        api_key: Some("sk-test".into()),
        model: "gpt-4o".into(),
        max_retries: 0,
        ..Default::default()
    }
}

/// The real `Host::open` over `<dir>/data`, with `model` and, when given, the gateway.
pub async fn open_host(dir: &Path, model: ModelConfig, gateway: Option<Gateway>) -> mpa_core::Host {
    use mpa_core::moviepilot::{AuthMode, MoviePilotConfig};
    let mut cfg = mpa_core::HostConfig::new(dir.join("data"), AgentConfig::new(model));
    cfg.moviepilot = gateway.map(|g| mpa_core::MoviePilotHostConfig {
        config: MoviePilotConfig {
            url: g.url,
            secret_key: Some(g.secret),
            auth: AuthMode::Local,
        },
        identity: g.identity,
        account_clock: None,
    });
    mpa_core::Host::open(cfg).await.unwrap()
}

/// Tokens minted with `secret` for the host users named in `links`, as the MoviePilot users
/// `(id, name)` they are linked to; anyone else is not linked.
pub fn linked(
    secret: &str,
    links: &[(&str, (&str, &str))],
) -> Arc<dyn mpa_core::moviepilot::identity::IdentityResolver> {
    use mpa_core::moviepilot::identity::{MintingResolver, MoviePilotUser};
    let links: Vec<(String, MoviePilotUser)> = links
        .iter()
        .map(|(host, (id, name))| {
            (
                host.to_string(),
                MoviePilotUser {
                    id: id.to_string(),
                    name: name.to_string(),
                },
            )
        })
        .collect();
    Arc::new(MintingResolver::new(secret, move |a: &Actor| {
        links
            .iter()
            .find(|(host, _)| host == "*" || *host == a.user_name)
            .map(|(_, user)| user.clone())
    }))
}

/// The fake MoviePilot's demo world.
pub fn demo_world() -> mpa_eval::WorldState {
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/../../eval/worlds/demo.json");
    mpa_eval::StateFile::load(Path::new(demo)).unwrap().state
}
