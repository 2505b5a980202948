//! A tool that waits until the test opens it (one permit per call) or the turn is stopped, so
//! "while a tool runs" is a fact, not a timing. Shared by the steering tests and the steering
//! benchmark (`benches/steering.rs` includes this file).

use async_trait::async_trait;
use mpa_core::tools::{JsonTool, ToolContext, ToolMeta, ToolOutput};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// The tool's name, as the scripted model calls it.
pub const GATE_TOOL: &str = "wait_gate";

pub struct Gate(pub Arc<Semaphore>);

#[async_trait]
impl JsonTool for Gate {
    fn spec(&self) -> mpa_protocol::ToolSpec {
        mpa_protocol::ToolSpec {
            name: GATE_TOOL.into(),
            description: "Waits until the gate opens.".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn call(&self, ctx: ToolContext, _args: Value) -> ToolOutput {
        tokio::select! {
            permit = self.0.acquire() => {
                if let Ok(p) = permit {
                    p.forget();
                }
                ToolOutput::json(&json!({"success": true, "gate": "opened"}),
                    mpa_protocol::Outcome::Succeeded)
            }
            _ = ctx.cancel.cancelled() => ToolOutput::failure("cancelled", "the gate wait was stopped"),
        }
    }
}
