//! Replay trajectories: what a scripted model answers, response by response. Each response's
//! tool calls go through the real host (policy, write ledger, outcome) against the world.
//!
//! Two forms: ours, `{"steps": [{"text": "...", "calls": [{"tool": "...", "arguments": {...}}]}],
//! "final": {...}}` (several calls in one response, any tool), and MoviePilot's,
//! `{"calls": [{"operation_id", "path_params", "query", "body"}], "final": {...}}` (one
//! `moviepilot_api` call per response). A string argument `"{{name}}"` is replaced by the value
//! of field `name` in the most recent tool result that has one (e.g. a terminal's session id).
//!
//! The scripted model is a model like any other to the host: `context_window_tokens` is its
//! window (what a catalogue entry or `LLM_MAX_CONTEXT_TOKENS` gives a real one), so a trajectory
//! whose results outgrow it drives the host into compaction. The host's summariser requests are
//! answered with `summary` and consume no step.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::path::Path;

/// Trajectory files larger than this are invalid input.
pub const MAX_TRAJECTORY_BYTES: u64 = 256 * 1024;
/// At most this many tool calls in one trajectory.
pub const MAX_CALLS: usize = 32;
/// The smallest window a trajectory may give the scripted model (the host's result cap and
/// summary bounds assume at least this much).
pub const MIN_CONTEXT_WINDOW_TOKENS: u64 = 4000;
/// What the scripted model answers a summariser request when the trajectory gives no `summary`.
pub const DEFAULT_SUMMARY: &str =
    "Scripted replay: the earlier messages are summarised here; nothing else was kept.";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Trajectory {
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// For people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    /// MoviePilot's form: one `moviepilot_api` call per response.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<ApiCall>,
    /// The final answer object (sent as its JSON text).
    #[serde(default, rename = "final", skip_serializing_if = "Option::is_none")]
    pub final_answer: Option<Value>,
    /// The final answer as raw text (to test answers that are not one JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    /// The scripted model's context window in tokens (a multiple of 1000, at least 4000): the
    /// host budgets every request against it and compacts at 85 % of it. Without it the host's
    /// configuration applies (`LLM_MAX_CONTEXT_TOKENS`, default 128 K).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window_tokens: Option<u64>,
    /// What the scripted model answers every summariser request of the host's compaction (a
    /// request whose system message is the summariser's instructions); such a request consumes
    /// no step. Default: a fixed one-line summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// What the host's subagents answer: a subagent request (its system message is the host's
    /// subagent prompt) is answered from the first entry whose `task_contains` is in the
    /// child's task, at the step its own transcript has reached — so parallel children replay
    /// the same way in any order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subagents: Vec<SubagentScript>,
    /// What the replay suite expects of this trajectory (ignored by `eval run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<TrajectoryExpect>,
}

/// One subagent's replies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubagentScript {
    /// Text the child's task contains.
    pub task_contains: String,
    /// Its responses, in order (each with at least one call).
    #[serde(default)]
    pub steps: Vec<Step>,
    /// Its final answer.
    pub final_text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrajectoryExpect {
    pub passed: bool,
    #[serde(default)]
    pub failure_codes: Vec<String>,
    /// Host calls the write ledger must answer from an identical earlier call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_collapsed_writes: Option<usize>,
    /// World attempts of `download.add` (and other operations) that must be recorded.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub world_attempts: Map<String, Value>,
    /// Compactions the host must have reported (`context.compactions` of the report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compactions: Option<usize>,
    /// The host's stop state the run must end with (`turn_status` of the report): a write whose
    /// outcome stayed unknown leaves the turn `unknown`, whatever the final answer claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_status: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    #[serde(default)]
    pub calls: Vec<StepCall>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepCall {
    pub tool: String,
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// One `moviepilot_api` call in MoviePilot's form: exactly the tool's arguments.
pub type ApiCall = mpa_protocol::MoviePilotCall;

/// The scripted model's answers: responses in order, then the final text; `summary` for every
/// summariser request.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    pub responses: Vec<Step>,
    pub final_text: String,
    pub summary: String,
    pub subagents: Vec<SubagentScript>,
}

impl Trajectory {
    pub fn from_json(text: &str, origin: &str) -> Result<Trajectory, String> {
        if text.len() as u64 > MAX_TRAJECTORY_BYTES {
            return Err(format!(
                "{origin}: trajectories are limited to {MAX_TRAJECTORY_BYTES} bytes"
            ));
        }
        let t: Trajectory =
            serde_json::from_str(text).map_err(|e| format!("{origin}: invalid trajectory: {e}"))?;
        t.script().map_err(|e| format!("{origin}: {e}"))?;
        Ok(t)
    }

    pub fn load(path: &Path) -> Result<Trajectory, String> {
        let meta = std::fs::metadata(path)
            .map_err(|e| format!("cannot read trajectory {}: {e}", path.display()))?;
        if meta.len() > MAX_TRAJECTORY_BYTES {
            return Err(format!(
                "{}: trajectories are limited to {MAX_TRAJECTORY_BYTES} bytes",
                path.display()
            ));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read trajectory {}: {e}", path.display()))?;
        Trajectory::from_json(&text, &path.display().to_string())
    }

    /// The responses the scripted model gives.
    pub fn script(&self) -> Result<Script, String> {
        if !self.steps.is_empty() && !self.calls.is_empty() {
            return Err("give either steps or calls, not both".into());
        }
        let mut responses = self.steps.clone();
        for c in &self.calls {
            let mut args = Map::new();
            args.insert("operation_id".into(), json!(c.operation_id));
            for (k, v) in [
                ("path_params", c.path_params.clone().map(Value::Object)),
                ("query", c.query.clone().map(Value::Object)),
                ("body", c.body.clone()),
            ] {
                if let Some(v) = v {
                    args.insert(k.into(), v);
                }
            }
            responses.push(Step {
                text: String::new(),
                calls: vec![StepCall {
                    tool: "moviepilot_api".into(),
                    arguments: args,
                }],
            });
        }
        let n: usize = responses.iter().map(|s| s.calls.len()).sum();
        if n > MAX_CALLS {
            return Err(format!("{n} tool calls; at most {MAX_CALLS} are allowed"));
        }
        let child_calls: usize = self
            .subagents
            .iter()
            .flat_map(|c| &c.steps)
            .map(|s| s.calls.len())
            .sum();
        if child_calls > MAX_CALLS {
            return Err(format!(
                "{child_calls} subagent tool calls; at most {MAX_CALLS} are allowed"
            ));
        }
        if self.subagents.iter().any(|c| {
            c.task_contains.trim().is_empty() || c.steps.iter().any(|s| s.calls.is_empty())
        }) {
            return Err(
                "every subagent script needs task_contains, and each of its steps a call".into(),
            );
        }
        if responses.iter().any(|s| s.calls.is_empty()) {
            return Err(
                "every step needs at least one call (the final answer ends the run)".into(),
            );
        }
        if let Some(w) = self.context_window_tokens
            && (w < MIN_CONTEXT_WINDOW_TOKENS || w % 1000 != 0)
        {
            return Err(format!(
                "context_window_tokens {w} must be a multiple of 1000, at least {MIN_CONTEXT_WINDOW_TOKENS}"
            ));
        }
        let summary = match &self.summary {
            Some(s) if s.trim().is_empty() => return Err("summary must not be empty".into()),
            Some(s) => s.clone(),
            None => DEFAULT_SUMMARY.to_string(),
        };
        let final_text = match (&self.final_answer, &self.final_text) {
            (Some(_), Some(_)) => return Err("give either final or final_text".into()),
            (Some(v), None) => v.to_string(),
            (None, Some(t)) => t.clone(),
            (None, None) => return Err("a trajectory needs final or final_text".into()),
        };
        Ok(Script {
            responses,
            final_text,
            summary,
            subagents: self.subagents.clone(),
        })
    }
}

/// The JSON Schema of trajectory files (what `eval/trajectory.schema.json` holds).
pub fn json_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(Trajectory)).unwrap_or(Value::Null)
}

/// The value of `key` in `v`, searched depth-first.
pub fn find_key<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    match v {
        Value::Object(m) => m
            .get(key)
            .or_else(|| m.values().find_map(|c| find_key(c, key))),
        Value::Array(a) => a.iter().find_map(|c| find_key(c, key)),
        _ => None,
    }
}

/// Replaces every `"{{name}}"` string in `args` from the tool results (most recent first).
pub fn resolve(args: &Value, results: &[Value]) -> Value {
    match args {
        Value::String(s) if s.starts_with("{{") && s.ends_with("}}") && s.len() > 4 => {
            let key = s[2..s.len() - 2].trim();
            results
                .iter()
                .rev()
                .find_map(|r| find_key(r, key))
                .cloned()
                .unwrap_or_else(|| args.clone())
        }
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), resolve(v, results)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| resolve(v, results)).collect()),
        other => other.clone(),
    }
}
