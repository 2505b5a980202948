//! `execute_code` (spec runtime.md §10): a persistent Python kernel for administrators, whose
//! helpers call back into the host's own tools, read-only. The arguments become an
//! `mpa-kernel` cell; its typed report is the reply, serialised once (it sizes itself: 50,000
//! bytes of stdout inline, the rest spilled). The kernel is the conversation's (its session id),
//! for the acting user and the helper set of the request that asked for the cell.

use super::guardrails::LoopClass;
use super::{ToolContext, ToolMeta, ToolOutput, TypedTool};
use crate::code::{HelperSnapshot, HostRpc, helpers_for};
use async_trait::async_trait;
use mpa_kernel::{CellRequest, KernelOwner, Kernels};
use mpa_protocol::{EffectClass, Outcome};
use schemars::JsonSchema;
use serde::Deserialize;
use std::sync::Arc;

pub const NAME: &str = "execute_code";

/// The longest cell accepted, in characters.
pub const MAX_CODE_CHARS: usize = 200_000;

/// The line the request's helpers are listed on (appended to the description per request).
pub const HELPERS_LINE: &str = "Current Python helpers:";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteCodeArgs {
    /// Python source to run in this conversation's persistent kernel (1–200,000 characters).
    /// Print what you need: only stdout and stderr come back.
    pub code: String,
    /// Discard the kernel and its variables first and start a fresh one.
    #[serde(default)]
    pub reset: bool,
}

pub struct ExecuteCode {
    pub kernels: Kernels,
}

#[async_trait]
impl TypedTool for ExecuteCode {
    type Args = ExecuteCodeArgs;
    const NAME: &'static str = NAME;

    fn description(&self) -> String {
        "Run Python in a persistent kernel on the MoviePilot host (admin only; not a sandbox). \
         Use it for three or more reads with paging, filtering or aggregation; a single read, or \
         results you must judge item by item, belong to the ordinary tools. Variables, imports \
         and data persist between calls; an exception keeps them; reset=true, sys.exit, the \
         300 s timeout or a cancelled turn discard them (the result's kernel.state_reset / \
         kernel.state_lost say so — never assume earlier variables exist). The helpers below are \
         already imported; each returns the tool's parsed JSON, and a refused or failed call \
         returns {success: false, error} and is listed in tool_errors (the cell then reports \
         success=false). Helpers only read: moviepilot_api accepts safe_read operations without \
         show_secrets; at most 50 helper calls per cell, results over 16 MiB are refused (use \
         paging or filters). Load the moviepilot-api skill for the operation's contract first \
         and check success and paging fields before aggregating. Also available: json_parse, \
         shell_quote, retry(fn, max_attempts=3, delay=2). stdout is shown up to 50,000 bytes \
         (head and tail); the rest is saved, redacted, at stdout_spill_path (kept 7 days)."
            .into()
    }

    fn meta(&self) -> ToolMeta {
        // Not ledgered (arbitrary execution is not a receipt-shaped write); sizes its own
        // results; the kernel owns its timeout; failures are diagnosis, as in a terminal.
        ToolMeta::new(EffectClass::ArbitraryExecution)
            .admin()
            .internal()
            .self_capped()
            .own_timeout()
            .loop_class(LoopClass::TERMINAL)
    }

    async fn run(&self, ctx: ToolContext, args: ExecuteCodeArgs) -> ToolOutput {
        let chars = args.code.chars().count();
        if args.code.trim().is_empty() || chars > MAX_CODE_CHARS {
            return ToolOutput::failure(
                "invalid_arguments",
                format!(
                    "code must hold 1 to {MAX_CODE_CHARS} characters (got {chars}); nothing ran"
                ),
            );
        }
        let names = ctx
            .turn
            .with(|s: &mut HelperSnapshot| s.names.clone())
            .unwrap_or_else(|| crate::code::enabled_helpers(&ctx));
        let helpers = helpers_for(&ctx, &names);
        let req = CellRequest {
            owner: KernelOwner {
                scope: ctx.session_id.clone(),
                user_key: mpa_redact::UserKey::for_user(&ctx.actor.user_id),
            },
            code: args.code,
            reset: args.reset,
            helpers,
            handler: Arc::new(HostRpc::new(ctx.clone())),
            cancel: ctx.cancel.clone(),
        };
        match self.kernels.execute(req).await {
            Ok(report) => {
                let outcome = if report.success {
                    Outcome::Succeeded
                } else {
                    Outcome::Failed
                };
                ToolOutput::json(&report, outcome)
            }
            Err(e) => ToolOutput::failure(e.code(), e.to_string()),
        }
    }
}
