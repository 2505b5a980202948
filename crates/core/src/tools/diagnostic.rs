//! Diagnostic tools for end-to-end tests and troubleshooting. They are registered only when the
//! host is started with `MPA_ENABLE_TEST_TOOLS=1` and never change anything outside the process.

use super::{ToolContext, ToolMeta, ToolOutput, TypedTool};
use async_trait::async_trait;
use mpa_protocol::Outcome;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
pub struct EchoArgs {
    /// Text to echo back.
    pub text: String,
}

pub struct TestEcho;

#[async_trait]
impl TypedTool for TestEcho {
    type Args = EchoArgs;
    const NAME: &'static str = "test_echo";
    fn description(&self) -> String {
        "Diagnostic: echoes the text back.".into()
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn run(&self, _ctx: ToolContext, args: EchoArgs) -> ToolOutput {
        ToolOutput::json(
            &serde_json::json!({"success": true, "echo": args.text}),
            Outcome::Succeeded,
        )
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct SleepArgs {
    /// Milliseconds to wait before answering.
    pub ms: u64,
}

pub struct TestSleep;

#[async_trait]
impl TypedTool for TestSleep {
    type Args = SleepArgs;
    const NAME: &'static str = "test_sleep";
    fn description(&self) -> String {
        "Diagnostic: waits the given milliseconds, then answers.".into()
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn run(&self, ctx: ToolContext, args: SleepArgs) -> ToolOutput {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(args.ms)) => {
                ToolOutput::json(
                    &serde_json::json!({"success": true, "slept_ms": args.ms}),
                    Outcome::Succeeded,
                )
            }
            _ = ctx.cancel.cancelled() => ToolOutput::failure("cancelled", "sleep cancelled"),
        }
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct ResultArgs {
    /// Returned verbatim as the tool result (a string as-is, anything else as JSON).
    pub content: serde_json::Value,
    /// Report an error status.
    #[serde(default)]
    pub is_error: bool,
}

pub struct TestResult;

#[async_trait]
impl TypedTool for TestResult {
    type Args = ResultArgs;
    const NAME: &'static str = "test_result";
    fn description(&self) -> String {
        "Diagnostic: returns the given content as the tool result.".into()
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn run(&self, _ctx: ToolContext, args: ResultArgs) -> ToolOutput {
        let content = match args.content {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        };
        // Stands in for an external tool whose result is text: classified by the host rules.
        ToolOutput::classified(content, args.is_error)
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct PanicArgs {
    /// Text put into the panic message (it must never reach the model).
    #[serde(default)]
    pub secret: String,
}

pub struct TestPanic;

#[async_trait]
impl TypedTool for TestPanic {
    type Args = PanicArgs;
    const NAME: &'static str = "test_panic";
    fn description(&self) -> String {
        "Diagnostic: panics (to test failure isolation).".into()
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    #[expect(clippy::panic, reason = "this diagnostic tool exists to panic")]
    async fn run(&self, _ctx: ToolContext, args: PanicArgs) -> ToolOutput {
        panic!("diagnostic panic {}", args.secret)
    }
}
