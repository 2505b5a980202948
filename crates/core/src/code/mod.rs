//! The Python kernel capability (`execute_code`, spec runtime.md §10): the tool, the helper set
//! each request enables ([`CodeHelpers`], an outbound contributor: it lists them in the tool's
//! description and remembers them for the calls of that response), the cell's authority over
//! its helper calls ([`HostRpc`]: every RPC re-checked and run through the one call path as
//! origin `kernel`), the read-only rules for those calls ([`gate::KernelCalls`]) and the
//! lifecycle ([`Code`]: a conversation's kernels end with it, all of them with the host).

pub mod gate;

use crate::capability::{Capability, Configure, SessionInfo, Setup};
use crate::tools::policy::Origin;
use crate::tools::{SessionState, ToolContext, ToolRegistry, execute_code, typed};
use crate::turn::outbound::{Contributor, Outbound, StepView};
use async_trait::async_trait;
use mpa_kernel::{Helper, Kernels, RpcHandler, RpcOutcome, helper_signature};
use serde_json::Value;

/// The tools a kernel may offer as helpers, when they are built-in and enabled in the request.
pub const HELPER_TOOLS: [&str; 3] = ["moviepilot_api", "read_file", "search_web"];

/// The kernel lifecycle.
pub struct Code {
    pub kernels: Kernels,
}

impl Configure for Code {
    fn configure(setup: &Setup<'_>) -> crate::error::Result<Option<Self>> {
        Ok(setup.host.map(|cfg| Code {
            kernels: Kernels::new(mpa_kernel::KernelConfig {
                venv_path: cfg.venv_path.clone(),
                cell_timeout: cfg.code_cell_timeout,
                ..mpa_kernel::KernelConfig::new(
                    cfg.workdir.clone(),
                    cfg.data_dir.join("agent/runtime/code"),
                )
            }),
        }))
    }
}

#[async_trait]
impl Capability for Code {
    fn name(&self) -> &'static str {
        "code"
    }

    fn tools(&self, r: &mut ToolRegistry) {
        r.register(typed(execute_code::ExecuteCode {
            kernels: self.kernels.clone(),
        }));
    }

    async fn close_session(&self, session: SessionInfo<'_>, _state: &SessionState) {
        self.kernels.close_scope(session.session_id).await;
    }

    async fn shutdown(&self) {
        self.kernels.shutdown().await;
    }
}

/// The helper set of the latest model request of this loop run (a turn slot).
#[derive(Debug, Default, Clone)]
pub struct HelperSnapshot {
    pub names: Option<Vec<String>>,
}

/// Whether `execute_code` may be offered to, and run for, this caller at all.
pub fn available(origin: Origin, channel: &str) -> bool {
    origin == Origin::Turn && channel != OPENAI_CHANNEL
}

/// The OpenAI-compatible endpoint's channel: its callers never get the kernel.
pub const OPENAI_CHANNEL: &str = "openai";

/// Helpers among `offered` tool names that are the host's own built-in tools.
fn builtin_helpers<'a>(
    view: &crate::tools::registry::ToolView,
    offered: impl Iterator<Item = &'a str>,
) -> Vec<String> {
    let offered: Vec<&str> = offered.collect();
    HELPER_TOOLS
        .iter()
        .filter(|h| offered.contains(h))
        .filter(|h| view.is_builtin(h))
        .map(|h| (*h).to_string())
        .collect()
}

/// The helpers when no request snapshot exists: the built-in helper tools the actor sees.
pub fn enabled_helpers(ctx: &ToolContext) -> Vec<String> {
    let Ok(view) = ctx.agent.tools(ctx) else {
        return Vec::new();
    };
    let names: Vec<String> = view.names_for(&ctx.actor).map(String::from).collect();
    builtin_helpers(&view, names.iter().map(String::as_str))
}

/// The helpers' specs, as Python will see them.
pub fn helpers_for(ctx: &ToolContext, names: &[String]) -> Vec<Helper> {
    let Ok(view) = ctx.agent.tools(ctx) else {
        return Vec::new();
    };
    let specs = view.specs_for(&ctx.actor);
    names
        .iter()
        .filter_map(|n| specs.iter().find(|s| &s.name == n))
        .map(|s| Helper {
            name: s.name.clone(),
            summary: s.description.lines().next().unwrap_or_default().to_string(),
            parameters: s.parameters.clone(),
        })
        .collect()
}

/// The capture step (spec runtime.md §10.2): where `execute_code` is offered, its description
/// lists the helpers enabled in this exact request (so the budget counts them), and the set is
/// remembered for the calls of the response; where it must not be offered (the OpenAI endpoint,
/// a nested loop), it is taken out of the request.
pub struct CodeHelpers;

impl Contributor for CodeHelpers {
    fn name(&self) -> &'static str {
        "code_helpers"
    }

    fn contribute(&self, view: &StepView<'_>, out: &mut Outbound) {
        let baseline = &view.state.offer.specs;
        let specs = out.specs.as_ref().unwrap_or(baseline);
        if !specs.iter().any(|s| s.name == execute_code::NAME) {
            return;
        }
        let mut specs = specs.clone();
        let stage = &view.setup.tools;
        if !available(stage.origin, stage.channel) {
            specs.retain(|s| s.name != execute_code::NAME);
            out.specs = Some(specs);
            return;
        }
        let registry = view.setup.services.tools.view_for(view.session);
        let names = builtin_helpers(&registry, specs.iter().map(|s| s.name.as_str()));
        let signatures: Vec<String> = names
            .iter()
            .filter_map(|n| specs.iter().find(|s| &s.name == n))
            .map(|s| {
                helper_signature(&Helper {
                    name: s.name.clone(),
                    summary: String::new(),
                    parameters: s.parameters.clone(),
                })
            })
            .collect();
        if let Some(spec) = specs.iter_mut().find(|s| s.name == execute_code::NAME) {
            let listed = if signatures.is_empty() {
                "none (only json_parse, shell_quote, retry)".to_string()
            } else {
                signatures.join(", ")
            };
            spec.description = format!(
                "{}\n{} {listed}",
                spec.description,
                execute_code::HELPERS_LINE
            );
        }
        view.state.turn.put(HelperSnapshot { names: Some(names) });
        out.specs = Some(specs);
    }
}

/// A cell's authority over its helper calls: bound to the `execute_code` call that runs the
/// cell (its actor, session, turn and cancellation), retired with it.
pub struct HostRpc {
    ctx: ToolContext,
}

impl HostRpc {
    pub fn new(ctx: ToolContext) -> Self {
        Self { ctx }
    }

    fn refused(code: &str, message: &str) -> RpcOutcome {
        RpcOutcome {
            outcome: "failed".into(),
            text: serde_json::json!({"success": false, "error": code, "message": message})
                .to_string(),
            error: Some(code.into()),
        }
    }
}

#[async_trait]
impl RpcHandler for HostRpc {
    async fn call(&self, tool: &str, args: Value) -> RpcOutcome {
        let ctx = &self.ctx;
        // Re-checked on every call: the cell's call still runs, and its caller may still run it.
        if ctx.cancel.is_cancelled() {
            return Self::refused("cell_ended", "the cell's tool call has ended");
        }
        if !ctx.actor.is_admin || !available(ctx.agent.origin(), &ctx.channel) {
            return Self::refused(
                "kernel_unavailable",
                "this caller may not use the Python kernel's helpers",
            );
        }
        match ctx.agent.call_tool(ctx, Origin::Kernel, tool, args).await {
            Ok(done) => RpcOutcome {
                outcome: done.output.outcome.as_str().to_string(),
                text: done.full_content.unwrap_or(done.output.content),
                error: done.output.error.map(String::from),
            },
            Err(e) => Self::refused("host_unavailable", &e.to_string()),
        }
    }
}
