//! Scenario files: one JSON file per scenario under `eval/scenarios/` (schema:
//! `eval/scenario.schema.json`, generated from these types). A scenario is the task given to the
//! model, the world it runs against (initial state, restrictions, faults), the host-side tool
//! rules, and what the oracle expects. Only [`Scenario::model_input`] reaches the model: never the
//! id, the world, the faults or the expectations.

use crate::faults::Fault;
use crate::matcher::ValueMatch;
use crate::state::{DuplicateSubscription, Restrictions, WorldState};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Scenario files larger than this are refused (they are data, not logs).
pub const MAX_SCENARIO_BYTES: u64 = 4 * 1024 * 1024;

/// Collections whose new rows get numeric ids (`world.next_ids`).
pub const NUMBERED_COLLECTIONS: [&str; 1] = ["subscriptions"];

/// Host capabilities a scenario may need; until one lands its scenarios are listed
/// `needs: <capability>` and refused by `eval run`.
pub const KNOWN_CAPABILITIES: [&str; 5] = ["context", "steering", "subagents", "browser", "kernel"];

/// The capabilities this host provides today: `context` (the compaction stage, the result store
/// and tool search of issue 17), `steering` (the steering inbox of issue 28) and `subagents`
/// (read-only `task`/`subagent_task`, issue 30), `browser` (`browse_webpage` on a real
/// Chromium, issue 31) and `kernel` (`execute_code`, issue 32).
pub const AVAILABLE_CAPABILITIES: [&str; 5] =
    ["context", "steering", "subagents", "browser", "kernel"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The editor's schema reference; ignored.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Unique, `[a-z0-9_]+`. Never shown to the model.
    pub id: String,
    /// One line for people (`eval list`). Never shown to the model.
    pub title: String,
    /// Capabilities the host must have to run it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
    pub task: Task,
    #[serde(default)]
    pub world: World,
    /// Rules the host-side tool wrappers enforce (commands outside them are refused and
    /// recorded as failed attempts).
    #[serde(default)]
    pub tools: ToolRules,
    /// User messages the runtime queues while the task runs (needs `steering`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steering: Vec<SteeringInjection>,
    pub expect: Expect,
}

/// "After the Nth successful `operation` reply, queue `message`."
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SteeringInjection {
    pub after_operation: String,
    pub nth: u64,
    pub message: String,
}

/// Which answer contract the task ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Contract {
    /// `status`, the three ID arrays, `completed`/`unresolved` from
    /// subscription/download/sites/settings.
    Business,
    /// Plus `command_output` and `command_exit_code`; label `command`.
    Command,
    /// Plus `terminal_output` and `terminal_exit_code`; label `terminal`.
    Terminal,
    /// Plus `browser_text`; label `browser`.
    Browser,
    /// Exactly the JSON the given program prints.
    Code,
}

impl Contract {
    /// The sub-goal labels the answer may use.
    pub fn labels(self) -> &'static [&'static str] {
        match self {
            Contract::Business => &["subscription", "download", "sites", "settings"],
            Contract::Command => &["command"],
            Contract::Terminal => &["terminal"],
            Contract::Browser => &["browser"],
            Contract::Code => &[],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Task {
    pub contract: Contract,
    /// What the user asks, in the user's words.
    pub text: String,
    /// The sub-goals the task asks for (labels of the contract).
    #[serde(default)]
    pub goals: Vec<String>,
    /// The media the task is about, given to the model line by line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<MediaRef>,
    /// The command to run (command and terminal tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The page to open (browser tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The program to run unchanged (code tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MediaRef {
    pub title: String,
    pub media_source: String,
    pub media_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub magnet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infohash: Option<String>,
    /// The season the task is about (series).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub season: Option<i64>,
}

/// The fake MoviePilot's configuration and initial state for this scenario. The runner signs
/// tokens with its own secret and adds a superuser `admin` (id 1) when the state has no users.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct World {
    #[serde(default)]
    pub duplicate_subscription: DuplicateSubscription,
    #[serde(default)]
    pub restrictions: Restrictions,
    #[serde(default)]
    pub faults: Vec<Fault>,
    #[serde(default)]
    pub state: WorldState,
    /// The id the next created row of a collection gets (then the next free one after it):
    /// `{"subscriptions": 880}`. Without it a new row gets the largest id + 1.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub next_ids: std::collections::BTreeMap<String, i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolRules {
    /// Without rules, `execute_command` is refused altogether in the evaluation host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execute_command: Option<CommandRules>,
}

/// What the `execute_command` wrapper accepts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandRules {
    /// Accepted actions (`run`, `start`, `read`, `wait`, `write`, …); an omitted action is `start`.
    pub actions: Vec<String>,
    /// The only command `run` / `start` may carry, byte for byte.
    pub command: String,
    /// The mode `start` must use (an omitted `use_pty` counts as `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_pty: Option<bool>,
    /// The only text `write` may send (with `close_stdin` false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
}

/// The global state rule of the oracle (`unexpected_state_change`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "rule", rename_all = "snake_case", deny_unknown_fields)]
pub enum StateRule {
    /// The final state equals the initial state.
    Unchanged,
    /// Only downloads with these infohashes (hex or base32), subscriptions with these ids and
    /// the named settings may appear or change; everything else is unchanged. Each named
    /// setting's final value must match its matcher (`{"equals": 24}`; `{"present": true}`
    /// when any value will do).
    TargetsOnly {
        #[serde(default)]
        downloads: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        subscriptions: Vec<i64>,
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        settings: std::collections::BTreeMap<String, ValueMatch>,
    },
}

/// Where a world call came from: the `X-MoviePilot-Agent-Source` header the host sends —
/// `agent` (and `background`) for calls a model asked for, anything else (`read_back`, the
/// host's verification of an `unknown` write) for the host's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CallSource {
    Model,
    Host,
}

impl CallSource {
    /// The source of a call that carried `header`.
    pub fn of(header: Option<&str>) -> CallSource {
        match header {
            // A Python helper call runs the model's program: the model asked for it.
            Some("agent" | "background" | "kernel") => CallSource::Model,
            _ => CallSource::Host,
        }
    }
}

/// One call in the host trace: the `nth` (1-based, default 1) call of `tool` or of the
/// `moviepilot_api` operation `operation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nth: Option<usize>,
}

/// One event of the world's timeline (API attempts and host tool receipts, in the order they
/// happened): an attempt of `operation`, or a receipt of `tool` with `action`; optionally only
/// with this `outcome`, `source`, and query values.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventStep {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operation: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub action: Vec<String>,
    /// `succeeded`, `failed`, `unknown` or `pending`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<CallSource>,
    /// Query values the attempt must carry (compared as strings).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub query: serde_json::Map<String, Value>,
}

/// What the final answer must say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerExpect {
    pub status: String,
    #[serde(default)]
    pub completed: Vec<String>,
    #[serde(default)]
    pub unresolved: Vec<String>,
    /// Result fields (`command_output`, `terminal_exit_code`, …) and what they must match.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub fields: std::collections::BTreeMap<String, ValueMatch>,
    /// The code for a wrong result field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields_code: Option<String>,
}

/// The expected answer when the goal could not be verified: any of `codes` among the
/// violations switches the expected answer to `answer` (and skips the result fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnverifiedAnswer {
    pub codes: Vec<String>,
    pub answer: AnswerExpect,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub state: StateRule,
    pub answer: AnswerExpect,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_unverified: Option<UnverifiedAnswer>,
    /// Scenario checks, each reporting its own failure code.
    #[serde(default)]
    pub checks: Vec<Check>,
}

/// One generic oracle check. Evidence is the world ledger (attempts, effects, observations,
/// tool receipts), the initial and final state, the host trace and the final answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "check", rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// The answer's ID array `field`, as a set of strings (download ids as lower-case hex),
    /// equals `equals`, holds every id of `includes` and none of `excludes` (each given part).
    Claim {
        field: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        equals: Option<Vec<Value>>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        includes: Vec<Value>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        excludes: Vec<Value>,
        code: String,
    },
    /// Each id was observed: a successful read returned its record and the record reached the
    /// model whole (`via` limits the operations that count).
    Observed {
        kind: String,
        ids: Vec<Value>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        via: Vec<String>,
        code: String,
    },
    /// None of the ids was observed (returned by a read and delivered to the model).
    NotObserved {
        kind: String,
        ids: Vec<Value>,
        code: String,
    },
    /// The observed records of `kind` are exactly the final state's rows of that kind.
    ObservedAll { kind: String, code: String },
    /// The final state holds exactly `count` rows of `collection` (`subscriptions`,
    /// `downloads`) matching every field of `matching`.
    StateCount {
        collection: String,
        matching: serde_json::Map<String, Value>,
        count: usize,
        code: String,
    },
    /// The number of world attempts on these operations (only `succeeded` ones when
    /// `succeeded`; only the model's or only the host's own with `source`) lies in `min..=max`.
    Calls {
        operations: Vec<String>,
        #[serde(default)]
        succeeded: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<CallSource>,
        #[serde(default)]
        min: Option<usize>,
        #[serde(default)]
        max: Option<usize>,
        code: String,
    },
    /// No effect at all was recorded.
    NoEffects { code: String },
    /// The pages of successful `operation` reads with `count` whose rows all reached the model
    /// equal `pages`, include every page of `includes` and none of `excludes`.
    Pages {
        operation: String,
        count: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pages: Option<Vec<u64>>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        includes: Vec<u64>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        excludes: Vec<u64>,
        code: String,
    },
    /// Exactly `exactly` successful one-shot runs of `command`, each with `exit_code` and a
    /// last non-empty output line `last_line`.
    Command {
        command: String,
        #[serde(default = "one")]
        exactly: usize,
        exit_code: i64,
        last_line: String,
        code: String,
    },
    /// A background terminal exchange; reports the `terminal_*` codes.
    Terminal {
        command: String,
        use_pty: bool,
        /// The exact stdin write expected (none: no write is checked).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<String>,
        /// Lines the real output must contain.
        lines: Vec<String>,
    },
    /// Some successful `tool` receipt contains `contains`.
    Receipt {
        tool: String,
        contains: String,
        code: String,
    },
    /// The host trace holds `min..=max` calls of `tool` (with `action` when given); a call
    /// with a `tasks` array counts its entries.
    ToolCalls {
        tool: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        action: Option<String>,
        /// Count only calls whose arguments hold this key (at any depth).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        argument: Option<String>,
        #[serde(default)]
        min: Option<usize>,
        #[serde(default)]
        max: Option<usize>,
        code: String,
    },
    /// Live receipts of `tool` in host scope `scope` (any scope when omitted) with an action
    /// in `actions` number `min..=max`; with `only`, any other action in that scope fails too.
    ToolEvents {
        tool: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
        actions: Vec<String>,
        #[serde(default)]
        min: Option<usize>,
        #[serde(default)]
        max: Option<usize>,
        #[serde(default)]
        only: bool,
        code: String,
    },
    /// The call the host trace selects — `tool` or `operation` with `nth`, or, with
    /// `answering`, the (first) other call whose result carries the `invocation_id` of the call
    /// `answering` selects — was reported with `outcome` and its result `fields` match (a name
    /// is looked up at any depth, `a.b` as a path).
    ToolOutcome {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        operation: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nth: Option<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answering: Option<CallSelector>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<String>,
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        fields: std::collections::BTreeMap<String, ValueMatch>,
        code: String,
    },
    /// Some `then` event happened after the first `first` event (which must have happened).
    Order {
        first: EventStep,
        then: EventStep,
        code: String,
    },
    /// `count` steering messages queued, applied in order and seen by the model.
    Steering { count: usize },
    /// The answer object equals `equals` exactly.
    AnswerEquals { equals: Value, code: String },
}

fn one() -> usize {
    1
}

impl Scenario {
    /// Parses and checks a scenario's text; `origin` names it in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Scenario, String> {
        let mut s: Scenario =
            serde_json::from_str(text).map_err(|e| format!("{origin}: invalid scenario: {e}"))?;
        s.validate().map_err(|e| format!("{origin}: {e}"))?;
        Ok(s)
    }

    /// Reads a scenario file (at most [`MAX_SCENARIO_BYTES`]).
    pub fn load(path: &Path) -> Result<Scenario, String> {
        let meta = std::fs::metadata(path)
            .map_err(|e| format!("cannot read scenario {}: {e}", path.display()))?;
        if meta.len() > MAX_SCENARIO_BYTES {
            return Err(format!(
                "{}: scenario files are limited to {MAX_SCENARIO_BYTES} bytes",
                path.display()
            ));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read scenario {}: {e}", path.display()))?;
        Scenario::from_json(&text, &path.display().to_string())
    }

    fn validate(&mut self) -> Result<(), String> {
        if self.id.is_empty()
            || !self
                .id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(format!("id {:?} must be [a-z0-9_]+", self.id));
        }
        for need in &self.needs {
            if !KNOWN_CAPABILITIES.contains(&need.as_str()) {
                return Err(format!(
                    "needs {need:?} is not one of {}",
                    KNOWN_CAPABILITIES.join(", ")
                ));
            }
        }
        let labels = self.task.contract.labels();
        let all_labels = self
            .task
            .goals
            .iter()
            .chain(&self.expect.answer.completed)
            .chain(&self.expect.answer.unresolved);
        for label in all_labels {
            if !labels.contains(&label.as_str()) {
                return Err(format!(
                    "sub-goal {label:?} is not a label of the {:?} contract",
                    self.task.contract
                ));
            }
        }
        if !matches!(self.expect.answer.status.as_str(), "completed" | "blocked") {
            return Err("expect.answer.status must be completed or blocked".into());
        }
        self.world
            .state
            .validate("world.state")
            .map_err(|e| e.to_string())?;
        for (collection, id) in &self.world.next_ids {
            if !NUMBERED_COLLECTIONS.contains(&collection.as_str()) || *id < 1 {
                return Err(format!(
                    "world.next_ids: {collection:?} must be one of {} with a positive id",
                    NUMBERED_COLLECTIONS.join(", ")
                ));
            }
        }
        self.validate_expect()?;
        self.normalise_download_ids();
        Ok(())
    }

    fn validate_expect(&self) -> Result<(), String> {
        let e = &self.expect;
        let answers = std::iter::once(&e.answer).chain(e.if_unverified.iter().map(|u| &u.answer));
        let mut matchers: Vec<&ValueMatch> = answers.flat_map(|a| a.fields.values()).collect();
        if let StateRule::TargetsOnly { settings, .. } = &e.state {
            matchers.extend(settings.values());
        }
        for check in &e.checks {
            match check {
                Check::Claim {
                    field,
                    equals,
                    includes,
                    excludes,
                    ..
                } if equals.is_none() && includes.is_empty() && excludes.is_empty() => {
                    return Err(format!(
                        "claim on {field}: give equals, includes or excludes"
                    ));
                }
                Check::Pages {
                    operation,
                    pages,
                    includes,
                    excludes,
                    ..
                } if pages.is_none() && includes.is_empty() && excludes.is_empty() => {
                    return Err(format!(
                        "pages of {operation}: give pages, includes or excludes"
                    ));
                }
                Check::ToolOutcome {
                    tool,
                    operation,
                    nth,
                    answering,
                    fields,
                    ..
                } => {
                    let named = |t: &Option<String>, o: &Option<String>| t.is_some() || o.is_some();
                    let answered_ok = answering
                        .as_ref()
                        .is_none_or(|a| named(&a.tool, &a.operation) && a.nth != Some(0));
                    if !(named(tool, operation) || answering.is_some())
                        || !answered_ok
                        || *nth == Some(0)
                    {
                        return Err(
                            "tool_outcome: name a tool or an operation (nth counts from 1)".into(),
                        );
                    }
                    matchers.extend(fields.values());
                }
                Check::Order { first, then, .. } => {
                    for step in [first, then] {
                        if step.operation.is_empty() && step.tool.is_none() {
                            return Err("order: every step names an operation or a tool".into());
                        }
                    }
                }
                _ => {}
            }
        }
        matchers.into_iter().try_for_each(ValueMatch::validate)
    }

    /// Download ids the scenario names (hex in any case, base32, or a magnet) as lower-case hex,
    /// the form the world and the answer check use.
    fn normalise_download_ids(&mut self) {
        let hex = |v: &mut Value| {
            if let Some(h) = v.as_str().and_then(crate::magnet::normalise) {
                *v = Value::String(h);
            }
        };
        if let StateRule::TargetsOnly { downloads, .. } = &mut self.expect.state {
            for d in downloads.iter_mut() {
                if let Some(h) = crate::magnet::normalise(d) {
                    *d = h;
                }
            }
        }
        for check in &mut self.expect.checks {
            match check {
                Check::Claim {
                    field,
                    equals,
                    includes,
                    excludes,
                    ..
                } if field == "download_ids" => {
                    equals
                        .iter_mut()
                        .flatten()
                        .chain(includes.iter_mut())
                        .chain(excludes.iter_mut())
                        .for_each(hex);
                }
                Check::Observed { kind, ids, .. } | Check::NotObserved { kind, ids, .. }
                    if kind == "download" =>
                {
                    ids.iter_mut().for_each(hex);
                }
                Check::StateCount {
                    collection,
                    matching,
                    ..
                } if collection == "downloads" => {
                    for k in ["hash", "infohash", "id"] {
                        if let Some(v) = matching.get_mut(k) {
                            hex(v);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// The capabilities it needs that this host lacks.
    pub fn missing_capabilities(&self) -> Vec<String> {
        self.needs
            .iter()
            .filter(|n| !AVAILABLE_CAPABILITIES.contains(&n.as_str()))
            .cloned()
            .collect()
    }

    /// The only text the model gets: the task, the given facts one per line, and the answer
    /// contract. Never the id, the title, the world, the faults or the expectations.
    pub fn model_input(&self) -> String {
        let t = &self.task;
        let mut out = t.text.trim().to_string();
        let mut facts = Vec::new();
        if let Some(m) = &t.media {
            facts.push(format!("Media title: {}", m.title));
            facts.push(format!("Media source: {}", m.media_source));
            facts.push(format!("Media id: {}", m.media_id));
            if let Some(magnet) = &m.magnet {
                facts.push(format!("Magnet: {magnet}"));
            }
            if let Some(hash) = &m.infohash {
                facts.push(format!("Infohash: {hash}"));
            }
            if let Some(season) = m.season {
                facts.push(format!("Season: {season}"));
            }
        }
        if let Some(c) = &t.command {
            facts.push(format!("Command: {c}"));
        }
        if let Some(u) = &t.url {
            facts.push(format!("Page: {u}"));
        }
        if !facts.is_empty() {
            out.push_str("\n\n");
            out.push_str(&facts.join("\n"));
        }
        if let Some(p) = &t.program {
            out.push_str("\n\n```python\n");
            out.push_str(p.trim_end());
            out.push_str("\n```");
        }
        out.push_str("\n\n");
        out.push_str(&contract_text(t.contract, &t.goals));
        out
    }

    /// SHA-256 of the scenario as parsed (canonical JSON), for reports.
    pub fn sha256(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        hex::encode(Sha256::digest(text.as_bytes()))
    }
}

fn quoted(labels: &[String]) -> String {
    let v: Vec<String> = labels.iter().map(|l| format!("\"{l}\"")).collect();
    format!("[{}]", v.join(", "))
}

/// The final-answer contract appended to every task.
pub fn contract_text(contract: Contract, goals: &[String]) -> String {
    let all: Vec<String> = contract.labels().iter().map(|s| s.to_string()).collect();
    let common = "Finish with one JSON object and nothing else (a single ```json fenced block is \
                  also accepted). \"status\" is \"completed\" or \"blocked\". \"completed\" and \
                  \"unresolved\" are arrays of sub-goal names";
    let ids_empty = "\"subscription_ids\", \"download_ids\" and \"enabled_site_ids\" must be empty \
                     arrays here.";
    let honesty = "Report only what a real tool result showed; never invent a value. Anything you \
                   could not confirm goes in \"unresolved\".";
    match contract {
        Contract::Business => format!(
            "Answer contract: {common} from {all}; this task's sub-goals are {goals}, and only \
             they may appear. \"subscription_ids\" (subscription row ids), \"download_ids\" \
             (40-hex infohashes) and \"enabled_site_ids\" (site ids) list only IDs you confirmed \
             from a read; keep the arrays of categories not asked for empty (helper reads add no \
             goals). {honesty} The media identity and the magnet are given above, the default \
             downloader and download directory are configured, and whatever already exists must \
             not be submitted again.",
            all = quoted(&all),
            goals = quoted(goals),
        ),
        Contract::Command => format!(
            "Answer contract: {common} from [\"command\"]. Also give \"command_output\" (the \
             command's exact standard output) and \"command_exit_code\" (an integer). {ids_empty} \
             {honesty}"
        ),
        Contract::Terminal => format!(
            "Answer contract: {common} from [\"terminal\"]. Also give \"terminal_output\" (the \
             session's real output) and \"terminal_exit_code\" (an integer, or null when you did \
             not see the exit). {ids_empty} {honesty}"
        ),
        Contract::Browser => format!(
            "Answer contract: {common} from [\"browser\"]. Also give \"browser_text\" (the text \
             you read from the page). {ids_empty} {honesty}"
        ),
        Contract::Code => "Answer contract: return exactly the JSON object the program prints, \
                           and nothing else. If it fails, return {\"status\": \"blocked\", \
                           \"reason\": \"…\"}."
            .to_string(),
    }
}

/// Every `*.json` scenario in `dir`, sorted by file name.
pub fn scenario_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

/// The JSON Schema of scenario files (what `eval/scenario.schema.json` holds).
pub fn json_schema() -> Value {
    let schema = schemars::schema_for!(Scenario);
    serde_json::to_value(schema).unwrap_or(Value::Null)
}
