//! `moviepilot_api` (spec runtime.md §11): one tool over the whole MoviePilot operation catalogue.
//! The call names an operation and gives only its declared inputs; the host builds the request
//! (route, method, headers, the acting user's own token), so no argument can choose a URL, a
//! header, a token or an HTTP method. The effect class is the operation's, decided per call, so
//! policy, the write ledger and read-only scopes see `subscription.list` as a read and
//! `download.add` as an external side effect.

use super::guardrails::LoopClass;
use super::ledger::{ReadBack, ReadBackCheck};
use super::{ToolContext, ToolMeta, ToolOutput, TypedTool};
use crate::moviepilot::MoviePilotAccess;
use async_trait::async_trait;
use mpa_gateway::{CallContext, GatewayError, Operation, catalogue};
use mpa_protocol::{EffectClass, Outcome};
use serde_json::{Map, Value, json};

pub const NAME: &str = "moviepilot_api";

/// The tool's arguments: one gateway call (the type the evaluation harness scripts too).
pub type MoviePilotApiArgs = mpa_protocol::MoviePilotCall;

pub struct MoviePilotApi {
    pub access: MoviePilotAccess,
}

fn op_of(args: &MoviePilotApiArgs) -> Option<&'static Operation> {
    catalogue().get(&args.operation_id)
}

/// `{success:false, [execution_outcome:"unknown",] …}`.
fn failure(v: Map<String, Value>, outcome: Outcome) -> ToolOutput {
    let mut ordered = Map::new();
    ordered.insert("success".into(), Value::Bool(false));
    if outcome == Outcome::Unknown {
        ordered.insert("execution_outcome".into(), json!("unknown"));
    }
    ordered.extend(v);
    ToolOutput::json(&Value::Object(ordered), outcome)
}

/// Validates the call against its operation's contract (`None`: no such operation).
fn prepare(
    args: &MoviePilotApiArgs,
) -> Option<Result<mpa_gateway::PreparedRequest, mpa_gateway::InputError>> {
    let none = Value::Null;
    let op = op_of(args)?;
    let path_params = args.path_params.clone().map(Value::Object);
    let query = args.query.clone().map(Value::Object);
    Some(op.prepare(
        path_params.as_ref().unwrap_or(&none),
        query.as_ref().unwrap_or(&none),
        args.body.as_ref().unwrap_or(&none),
    ))
}

/// A `config.system.update` that replaces one non-secret setting: the only write a read can
/// verify (spec runtime.md §6.6). Merges and list edits stay `unknown`.
fn setting_replace(args: &MoviePilotApiArgs) -> Option<(String, Value)> {
    if args.operation_id != "config.system.update" {
        return None;
    }
    let body = args.body.as_ref()?.as_object()?;
    let op = body
        .get("operation")
        .and_then(Value::as_str)
        .unwrap_or("replace");
    let key = body.get("setting_key")?.as_str()?;
    let value = body.get("value")?;
    let sensitive = mpa_gateway::is_secret_key(key) || {
        let mut v = value.clone();
        mpa_gateway::redact_secrets(&mut v)
    };
    (op == "replace" && !key.is_empty() && !sensitive).then(|| (key.to_string(), value.clone()))
}

struct SettingReadBack {
    access: MoviePilotAccess,
    key: String,
    value: Value,
}

#[async_trait]
impl ReadBackCheck for SettingReadBack {
    /// Reads the setting back; only exactly one unredacted setting with the same key and the same
    /// value digest confirms the write.
    async fn check(&self, ctx: &ToolContext) -> ReadBack {
        let Some(op) = catalogue().get("config.system.get") else {
            return ReadBack::NotConfirmed;
        };
        let query = json!({"setting_key": self.key, "include_values": true, "show_secrets": false});
        let Ok(prepared) = op.prepare(&Value::Null, &query, &Value::Null) else {
            return ReadBack::NotConfirmed;
        };
        let Ok(token) = self.access.identity.bearer(&ctx.actor).await else {
            return ReadBack::NotConfirmed;
        };
        let mut call = CallContext::new(token);
        call.session_id = Some(ctx.session_id.clone());
        call.channel = Some(ctx.channel.clone());
        call.source = Some("agent".into());
        let Ok(resp) = self.access.client.send(&prepared, &call).await else {
            return ReadBack::NotConfirmed;
        };
        if resp.payload.get("success") != Some(&Value::Bool(true)) {
            return ReadBack::NotConfirmed;
        }
        let items = match &resp.payload["data"] {
            Value::Array(a) => a.clone(),
            Value::Object(o) => match o.get("settings").or_else(|| o.get("items")) {
                Some(Value::Array(a)) => a.clone(),
                _ => vec![Value::Object(o.clone())],
            },
            _ => return ReadBack::NotConfirmed,
        };
        let [item] = items.as_slice() else {
            return ReadBack::NotConfirmed;
        };
        let key = item
            .get("key")
            .or_else(|| item.get("setting_key"))
            .and_then(Value::as_str);
        let redacted = item.get("redacted") == Some(&Value::Bool(true))
            || item.get("secret") == Some(&Value::Bool(true));
        let digest = |v: &Value| crate::tools::ledger::canonical(v);
        match (key, item.get("value")) {
            (Some(k), Some(v))
                if k == self.key && !redacted && digest(v) == digest(&self.value) =>
            {
                ReadBack::Confirmed
            }
            _ => ReadBack::NotConfirmed,
        }
    }
}

fn obj(pairs: Value) -> Map<String, Value> {
    match pairs {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn contract(op: &Operation) -> Value {
    serde_json::to_value(op.input_contract()).unwrap_or(Value::Null)
}

/// The description names the categories, not 229 operations.
fn description() -> String {
    let cats = catalogue().categories().join(", ");
    format!(
        "Call MoviePilot's REST API: search and look up media, subscribe, search torrents and add downloads, \
         read the download and transfer queues and the library, manage sites, settings, plugins, workflows and \
         scheduled jobs. Give `operation_id` and only the inputs its contract declares: `path_params` (route \
         placeholders), `query` (declared query fields, as an object) and `body`. Operation categories: {cats}. \
         Each category's operations and input contracts are in the skill `moviepilot-api-<category>` — read it \
         with skill_view before using an operation you do not know. Administrator operations need an \
         administrator. A result's outcome is what MoviePilot answered: pending (accepted, not finished) and \
         unknown (may or may not have happened; verify read-only before any retry) are not success."
    )
}

#[async_trait]
impl TypedTool for MoviePilotApi {
    type Args = MoviePilotApiArgs;
    const NAME: &'static str = NAME;

    fn description(&self) -> String {
        description()
    }

    fn meta(&self) -> ToolMeta {
        // Decided per call from the operation; an unknown operation is treated as a write.
        // Failures of different operations are different tools to the loop guardrails.
        ToolMeta::new(EffectClass::Unknown).loop_class(LoopClass::keyed_by("operation_id"))
    }

    fn effect(&self, args: &MoviePilotApiArgs) -> EffectClass {
        op_of(args).map_or(EffectClass::Unknown, |op| op.effect)
    }

    fn requires_admin(&self, args: &MoviePilotApiArgs) -> bool {
        op_of(args).is_some_and(|op| op.role.requires_admin())
    }

    fn canonical_digest(&self, args: &MoviePilotApiArgs) -> Option<String> {
        prepare(args)?.ok().map(|p| p.arguments_digest())
    }

    fn shares_identity(&self) -> bool {
        true
    }

    fn read_back_check(&self, args: &MoviePilotApiArgs) -> Option<Box<dyn ReadBackCheck>> {
        setting_replace(args).map(|(key, value)| {
            Box::new(SettingReadBack {
                access: self.access.clone(),
                key,
                value,
            }) as Box<dyn ReadBackCheck>
        })
    }

    async fn run(&self, ctx: ToolContext, args: MoviePilotApiArgs) -> ToolOutput {
        let op = match catalogue().lookup(&args.operation_id) {
            Ok(op) => op,
            Err(GatewayError::UnknownOperation { id, suggestions }) => {
                return failure(
                    obj(json!({
                        "error": "unknown_operation",
                        "operation_id": id,
                        "message": format!(
                            "there is no MoviePilot operation {id:?}; check the moviepilot-api-<category> skills"
                        ),
                        "did_you_mean": suggestions,
                    })),
                    Outcome::Failed,
                );
            }
            Err(e) => {
                return failure(
                    obj(json!({"error": "unknown_operation", "message": e.to_string()})),
                    Outcome::Failed,
                );
            }
        };
        let prepared = match prepare(&args)
            .unwrap_or_else(|| op.prepare(&Value::Null, &Value::Null, &Value::Null))
        {
            Ok(p) => p,
            Err(e) => {
                return failure(
                    obj(json!({
                        "error": "invalid_input",
                        "operation_id": op.id,
                        "message": format!("{e}; nothing was sent"),
                        "input_contract": contract(op),
                    })),
                    Outcome::Failed,
                );
            }
        };
        let token = match self.access.identity.bearer(&ctx.actor).await {
            Ok(t) => t,
            Err(e) => {
                return failure(
                    obj(json!({
                        "error": e.code(),
                        "operation_id": op.id,
                        "message": format!("{e}; nothing was sent"),
                    })),
                    Outcome::Failed,
                );
            }
        };
        let show_secrets = args.query.as_ref().is_some_and(|q| {
            crate::moviepilot::secret_read::shows_secrets(&Value::Object(q.clone()))
        });
        let confirmed_secret_read = crate::moviepilot::secret_read::take_confirmed(&ctx.session);
        let call = CallContext {
            token,
            session_id: Some(ctx.session_id.clone()),
            channel: Some(ctx.channel.clone()),
            source: Some(
                if ctx.review.is_some() {
                    "background"
                } else {
                    "agent"
                }
                .to_string(),
            ),
        };
        match self.access.client.send(&prepared, &call).await {
            Ok(resp) => {
                let mut result = resp.result_json();
                // Secrets never reach the model: only a read the user confirmed keeps them, and
                // its result goes to the user alone (see `moviepilot::secret_read`).
                if !(confirmed_secret_read && show_secrets) {
                    mpa_gateway::redact_secrets(&mut result);
                }
                let rejected = result.get("success") == Some(&Value::Bool(false));
                let outcome = if rejected {
                    Outcome::Failed
                } else {
                    op.success_outcome()
                };
                ToolOutput::json(&result, outcome)
            }
            Err(GatewayError::Api(api)) => {
                let mut v = obj(json!({
                    "error": "api_error",
                    "operation_id": op.id,
                    "status_code": api.status,
                    "data": api.data,
                }));
                if matches!(api.status, 400 | 422) {
                    v.insert(
                        "guidance".into(),
                        json!("MoviePilot refused the input: correct it against the input contract; do not repeat the same call"),
                    );
                    v.insert("input_contract".into(), contract(op));
                }
                failure(v, Outcome::Failed)
            }
            Err(e @ GatewayError::MaybeSent { .. }) => failure(
                obj(json!({
                    "error": "operation_unavailable",
                    "operation_id": op.id,
                    "message": format!(
                        "{e}. It may already have taken effect; verify read-only before retrying"
                    ),
                })),
                Outcome::Unknown,
            ),
            Err(e) => failure(
                obj(json!({
                    "error": "operation_unavailable",
                    "operation_id": op.id,
                    "message": format!("{e}; nothing happened in MoviePilot"),
                })),
                Outcome::Failed,
            ),
        }
    }
}
