//! Fault injection per operation: answer with a status of our choosing, hold the call, or close
//! the connection without a response — before serving the call, or after its effect landed (the
//! lost receipt). Selectors (`when`, `nth`, `times`) decide which calls a fault hits.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// One fault. JSON: `{"operation": "download.add" | [...], "action": {...}, "when": {...},
/// "nth": 1, "times": 1}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// The operation ids it applies to: one id or a list.
    #[serde(deserialize_with = "one_or_many")]
    #[schemars(with = "OneOrMany")]
    pub operation: Vec<String>,
    pub action: FaultAction,
    #[serde(default)]
    pub when: FaultWhen,
    /// Hit only the Nth eligible call (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nth: Option<u64>,
    /// Hit at most this many calls (default: all eligible calls; with `nth`: one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u64>,
}

/// What a fault does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum FaultAction {
    /// Answer `status` with `body` (default: a MoviePilot-style failure envelope). With
    /// `after_effect`, the call is served first and its reply replaced.
    Respond {
        status: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<Value>,
        #[serde(default)]
        after_effect: bool,
    },
    /// Hold the call `ms` milliseconds, then serve it; without `ms`, hold it until shutdown.
    Stall {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
    },
    /// Close the TCP connection without a response. With `after_effect` (the default) the
    /// call is served first: the write lands and its receipt is lost.
    Drop {
        #[serde(default = "yes")]
        after_effect: bool,
    },
}

fn yes() -> bool {
    true
}

/// Conditions on a call, all of which must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultWhen {
    /// Only after some earlier reply was lost (a `drop` fault fired): "reads of X fail for the
    /// rest of the run after the first unknown".
    #[serde(default)]
    pub after_unknown: bool,
    /// Only for requests carrying these header values (names case-insensitive), e.g.
    /// `{"x-moviepilot-agent-source": "subagent"}`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// One operation id or a list of them.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

impl FaultAction {
    /// Whether the action runs after the call was served.
    pub fn after_effect(&self) -> bool {
        match self {
            FaultAction::Respond { after_effect, .. } | FaultAction::Drop { after_effect } => {
                *after_effect
            }
            FaultAction::Stall { .. } => false,
        }
    }
}

/// What a call looks like to the selectors.
pub struct CallView<'a> {
    pub operation_id: &'a str,
    /// Lower-case header names.
    pub headers: &'a BTreeMap<String, String>,
    pub unknown_returned: bool,
}

#[derive(Debug, Clone)]
struct Armed {
    fault: Fault,
    eligible: u64,
    fired: u64,
}

/// The configured faults with their counters.
#[derive(Debug, Clone, Default)]
pub struct FaultBook {
    armed: Vec<Armed>,
}

impl FaultBook {
    pub fn new(faults: Vec<Fault>) -> FaultBook {
        FaultBook {
            armed: faults
                .into_iter()
                .map(|fault| Armed {
                    fault,
                    eligible: 0,
                    fired: 0,
                })
                .collect(),
        }
    }

    pub fn faults(&self) -> Vec<Fault> {
        self.armed.iter().map(|a| a.fault.clone()).collect()
    }

    pub fn push(&mut self, fault: Fault) {
        self.armed.push(Armed {
            fault,
            eligible: 0,
            fired: 0,
        });
    }

    /// The actions that fire for this call in this phase (`after_effect` false: before the
    /// call is served; true: after it landed), counting it as eligible for every fault whose
    /// conditions hold. A post-phase call is eligible only when it landed (an effect was
    /// applied, or a read succeeded), so "the first creating `download.add`" skips refused and
    /// duplicate adds.
    pub fn fire(&mut self, call: &CallView<'_>, after_effect: bool) -> Vec<FaultAction> {
        let mut fired = Vec::new();
        for armed in &mut self.armed {
            let f = &armed.fault;
            if f.action.after_effect() != after_effect
                || !f.operation.iter().any(|op| op == call.operation_id)
                || (f.when.after_unknown && !call.unknown_returned)
                || !f.when.headers.iter().all(|(k, v)| {
                    call.headers
                        .get(&k.to_ascii_lowercase())
                        .map(String::as_str)
                        == Some(v)
                })
            {
                continue;
            }
            armed.eligible += 1;
            if f.nth.is_some_and(|n| n != armed.eligible) {
                continue;
            }
            let limit = f.times.or(f.nth.map(|_| 1));
            if limit.is_some_and(|t| armed.fired >= t) {
                continue;
            }
            armed.fired += 1;
            fired.push(f.action.clone());
        }
        fired
    }
}
