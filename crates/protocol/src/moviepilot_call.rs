//! One call of MoviePilot's API through the gateway: the arguments of the `moviepilot_api` tool,
//! and what an evaluation trajectory scripts in MoviePilot's own form. One type, so the tool and
//! the harness can never disagree about the call's shape.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoviePilotCall {
    /// The operation id, exactly as the catalogue names it (e.g. `media.search`,
    /// `subscription.add`); the `moviepilot-api-<category>` skills list them with their inputs.
    pub operation_id: String,
    /// Values for the route's placeholders only (e.g. `{"subscribe_id": 3}`).
    #[serde(default)]
    pub path_params: Option<Map<String, Value>>,
    /// The operation's declared query fields only, as an object (never flattened into the URL).
    #[serde(default)]
    pub query: Option<Map<String, Value>>,
    /// The request body when the operation declares one: a JSON object or array (or the literal
    /// "dev" for `system.upgrade.dev`).
    #[serde(default)]
    pub body: Option<Value>,
}
