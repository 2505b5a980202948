//! The learning tools behind the real call path (`tools::invoke::invoke` with the default
//! registry), on real files in a temporary data directory.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]
#![allow(dead_code, reason = "each test binary uses a part of it")]

pub mod host;

use mpa_core::capability::Learning;
use mpa_core::tools::gate::Gates;
use mpa_core::tools::invoke::{Invoker, invoke};
use mpa_core::tools::policy::Origin;
use mpa_core::tools::registry::Tools;
use mpa_core::tools::{ToolContext, ToolOutput};
use mpa_core::{Capabilities, RegistryOptions, default_registry};
use mpa_learning::{Memory, MemoryConfig, ReviewToken, Skills, WriteOrigin};
use mpa_protocol::{Actor, ToolCall, UserId};
use serde_json::Value;
use std::path::PathBuf;

pub struct LearningEnv {
    _dir: tempfile::TempDir,
    pub data: PathBuf,
    pub memory: Memory,
    pub skills: Skills,
    registry: Tools,
}

pub fn actor(id: &str, admin: bool) -> Actor {
    Actor {
        user_id: UserId(id.into()),
        user_name: id.into(),
        is_admin: admin,
    }
}

pub fn review(id: &str) -> WriteOrigin {
    WriteOrigin::BackgroundReview(ReviewToken::new(id))
}

impl LearningEnv {
    pub fn new() -> Self {
        Self::with_memory(|cfg| cfg)
    }

    /// An environment whose memory budgets are changed by `cfg`.
    pub fn with_memory(cfg: impl FnOnce(MemoryConfig) -> MemoryConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        Self::at(dir, data, cfg)
    }

    /// A second host over the same data directory (other budgets, same files).
    pub fn reopen(&self, cfg: impl FnOnce(MemoryConfig) -> MemoryConfig) -> LearningEnv {
        let dir = tempfile::tempdir().unwrap();
        Self::at(dir, self.data.clone(), cfg)
    }

    fn at(
        dir: tempfile::TempDir,
        data: PathBuf,
        cfg: impl FnOnce(MemoryConfig) -> MemoryConfig,
    ) -> Self {
        let memory = Memory::new(cfg(MemoryConfig::new(&data)));
        let skills = Skills::new(data.clone());
        let caps = Capabilities::default().with(Learning::new(memory.clone(), skills.clone()));
        let registry = default_registry(&RegistryOptions::default(), caps)
            .unwrap()
            .into();
        LearningEnv {
            _dir: dir,
            data,
            memory,
            skills,
            registry,
        }
    }

    /// Run `tool` as `actor` from `origin` (a review gets its token and the review policy).
    pub async fn output(
        &self,
        actor: &Actor,
        origin: &WriteOrigin,
        tool: &str,
        args: Value,
    ) -> ToolOutput {
        let review = match origin {
            WriteOrigin::BackgroundReview(t) => Some(t.clone()),
            WriteOrigin::Foreground => None,
        };
        let policy = match review {
            Some(_) => Origin::Review { memory_due: true },
            None => Origin::Turn,
        };
        let mut ctx = ToolContext::detached(actor.clone(), "learning-test", "call-1");
        ctx.request_id = "request-1".into();
        ctx.review = review;
        let call = ToolCall {
            id: "call-1".into(),
            name: tool.into(),
            arguments: args.to_string(),
        };
        let gates = Gates::standard();
        let inv = Invoker {
            tools: &self.registry,
            gates: &gates,
            timeout: None,
            ledger: None,
            max_result_chars: mpa_core::result_cap::DEFAULT_TOOL_RESULT_MAX_CHARS,
        };
        invoke(inv, ctx, policy, &call, 1).await.output
    }

    /// The JSON the model reads.
    pub async fn call(
        &self,
        actor: &Actor,
        origin: &WriteOrigin,
        tool: &str,
        args: Value,
    ) -> Value {
        let out = self.output(actor, origin, tool, args).await;
        serde_json::from_str(&out.content).unwrap()
    }

    /// The tool's spec as the model sees it (name, description, parameters).
    pub fn spec(&self, tool: &str) -> Value {
        serde_json::to_value(self.registry.get(tool).unwrap().spec).unwrap()
    }
}

/// The names of the tools a recorded model request offered.
pub fn tool_names(req: &Value) -> std::collections::BTreeSet<String> {
    req["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}
