//! The services every turn uses, built once per host: configuration, the model client, the main
//! store, the layered tool registry, the call-gate chain, the outbound contributors, the settle
//! rules, the capabilities.

use crate::capability::Capabilities;
use crate::config::AgentConfig;
use crate::tools::gate::Gates;
use crate::tools::invoke::Invoker;
use crate::tools::registry::Tools;
use crate::turn::outbound::Contributor;
use crate::turn::settle::SettleRule;
use mpa_model::ModelClient;
use mpa_store::Store;
use std::sync::Arc;

pub struct Services {
    pub cfg: AgentConfig,
    pub model: ModelClient,
    pub store: Store,
    pub tools: Tools,
    pub gates: Gates,
    pub contributors: Arc<[Arc<dyn Contributor>]>,
    pub settle_rules: Arc<[Arc<dyn SettleRule>]>,
    /// Every capability, in registration order.
    pub caps: Arc<Capabilities>,
    /// The global persona (the system prompt's persona layer, `/persona`).
    pub personas: Arc<crate::web::personas::Personas>,
    /// What users attached on the web page: the turn sends a referenced image from here on the
    /// outbound copy only (the transcript keeps the reference, never the bytes).
    pub attachments: Arc<crate::web::attachments::Attachments>,
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
