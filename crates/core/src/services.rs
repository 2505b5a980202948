//! The services every turn uses, built once per host: configuration, the model client, the main
//! store, the tool registry and the optional capability hubs.

use crate::config::AgentConfig;
use crate::tools::ToolRegistry;
use crate::tools::invoke::Invoker;
use mpa_model::ModelClient;
use mpa_store::Store;

/// Optional capability hubs (one per process), shared by the tools that adapt them.
#[derive(Clone, Default)]
pub struct Capabilities {
    pub exec: Option<mpa_exec::Processes>,
    pub memory: Option<mpa_learning::Memory>,
    pub skills: Option<mpa_learning::Skills>,
    pub history: Option<mpa_history::History>,
    /// The MoviePilot gateway, when `MOVIEPILOT_URL` is set.
    pub moviepilot: Option<crate::moviepilot::MoviePilotAccess>,
}

pub struct Services {
    pub cfg: AgentConfig,
    pub model: ModelClient,
    pub store: Store,
    pub tools: ToolRegistry,
    pub caps: Capabilities,
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
            registry: &self.tools,
            timeout: self.cfg.tool_timeout,
            ledger: Some(&self.store),
            max_result_chars: crate::result_cap::cap_for_window(
                self.budget_limits().context_window_tokens,
            ),
        }
    }
}
