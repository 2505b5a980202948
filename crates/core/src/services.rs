//! The services every turn uses, built once per host: configuration, the model client, the main
//! store, the layered tool registry, the call-gate chain, the outbound contributors, the settle
//! rules, the capability hubs and their lifecycles.

use crate::capability::Capability;
use crate::config::AgentConfig;
use crate::tools::gate::Gates;
use crate::tools::invoke::Invoker;
use crate::tools::registry::Tools;
use crate::turn::outbound::Contributor;
use crate::turn::settle::SettleRule;
use mpa_model::ModelClient;
use mpa_store::Store;
use std::sync::Arc;

/// Optional capability hubs (one per process), shared by the tools that adapt them.
#[derive(Clone, Default)]
pub struct Capabilities {
    pub exec: Option<mpa_exec::Processes>,
    pub memory: Option<mpa_learning::Memory>,
    pub skills: Option<mpa_learning::Skills>,
    pub history: Option<mpa_history::History>,
    /// The MoviePilot gateway, when `MOVIEPILOT_URL` is set.
    pub moviepilot: Option<crate::moviepilot::MoviePilotAccess>,
    /// External MCP servers configured by admins (their tools join the registry's dynamic layer).
    pub mcp: Option<crate::mcp::McpHub>,
}

pub struct Services {
    pub cfg: AgentConfig,
    pub model: ModelClient,
    pub store: Store,
    pub tools: Tools,
    pub gates: Gates,
    pub contributors: Arc<[Arc<dyn Contributor>]>,
    pub settle_rules: Arc<[Arc<dyn SettleRule>]>,
    pub caps: Capabilities,
    /// Every capability's lifecycle, in registration order.
    pub capabilities: Arc<[Arc<dyn Capability>]>,
}

impl Services {
    /// What every model request is budgeted against: the catalogue's window for the model, else
    /// `LLM_MAX_CONTEXT_TOKENS`, counted with the model family's tokenizer or the estimate.
    pub fn budget_limits(&self) -> mpa_model::BudgetLimits {
        mpa_model::BudgetLimits::for_model(&self.cfg.model, self.cfg.max_context_tokens_k)
    }

    /// The one tool call path, configured for this host.
    pub fn invoker(&self) -> Invoker<'_> {
        Invoker {
            tools: &self.tools,
            gates: &self.gates,
            timeout: self.cfg.tool_timeout,
            ledger: Some(&self.store),
            max_result_chars: crate::result_cap::cap_for_window(
                self.budget_limits().context_window_tokens,
            ),
        }
    }
}
