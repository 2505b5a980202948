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
use crate::moviepilot::identity::IdentityError;
use async_trait::async_trait;
use mpa_gateway::{
    Answer, CallContext, GatewayError, LiveRefusal, Operation, Refusal, ServerKnowledge, catalogue,
};
use mpa_protocol::{Actor, EffectClass, ErrorKind, Event, Outcome};
use serde_json::{Map, Value, json};

pub const NAME: &str = "moviepilot_api";

/// The `X-MoviePilot-Agent-Source` of the host's own verification read (§6.6), so MoviePilot's
/// logs and the evaluation world tell it from the calls a model asked for (`agent`).
pub const READ_BACK_SOURCE: &str = "read_back";

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
    ToolOutput::object(ordered, outcome)
}

/// Validates the call against its operation's contract (`None`: no such operation).
pub(crate) fn prepare(
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

/// Credential words: a setting whose key holds one anywhere (`TRACKER_COOKIE_2`, `AUTH_SITE`,
/// `COOKIECLOUD_KEY`) is never read back. Substrings, not whole words, so a compound
/// (`APIKEY`, `PASSKEYS`) or a numbered variant stays sensitive; a key that merely looks like one
/// (`KEYWORD`) stays `unknown` too, which costs a reconciliation, never a leak.
const CREDENTIAL_WORDS: [&str; 11] = [
    "cookie", "token", "key", "passkey", "password", "passwd", "pwd", "secret", "auth", "session",
    "sign",
];

/// Whether a setting key may name a credential (then its value is never read back).
fn credential_setting(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    CREDENTIAL_WORDS.iter().any(|w| k.contains(w))
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
    let sensitive = credential_setting(key) || mpa_gateway::is_secret_key(key) || {
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
        call.source = Some(READ_BACK_SOURCE.into());
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

/// A call this server cannot take (see `mpa_gateway::Reconciliation::adapt`): nothing was sent.
fn live_refusal(op: &Operation, refusal: &LiveRefusal) -> ToolOutput {
    let mut v = obj(json!({
        "error": refusal.code(),
        "operation_id": op.id,
        "message": format!("{refusal}; nothing was sent"),
    }));
    match refusal {
        LiveRefusal::Unavailable { server, status, .. } => {
            v.insert("server".into(), json!(server));
            v.insert("availability".into(), json!(status));
            v.insert(
                "hint".into(),
                json!(format!(
                    "the skill moviepilot-api-{} lists what this server offers",
                    op.category
                )),
            );
        }
        LiveRefusal::NotAccepted { .. }
        | LiveRefusal::NoPaging { .. }
        | LiveRefusal::Untranslatable { .. }
        | LiveRefusal::ValueReachesOtherRoute { .. } => {
            v.insert("input_contract".into(), contract(op));
        }
    }
    failure(v, Outcome::Failed)
}

/// How a failed send reads to the model. Exhaustive: a new way to fail must decide what it
/// means for the call's effect.
fn gateway_failure(op: &Operation, e: GatewayError) -> ToolOutput {
    let outcome = e.outcome();
    match e {
        GatewayError::Api(api) => {
            let refusal = api.refusal();
            if let Refusal::PermissionDenied { detail } = &refusal {
                return permission_denied(op, api.status, detail.as_deref(), outcome);
            }
            let mut v = obj(json!({
                "error": "api_error",
                "operation_id": op.id,
                "status_code": api.status,
            }));
            match refusal {
                Refusal::FieldErrors(errors) => {
                    v.insert("field_errors".into(), json!(errors));
                }
                Refusal::Message(m) | Refusal::Text(m) => {
                    v.insert("message".into(), json!(m));
                }
                Refusal::Other(data) => {
                    v.insert("data".into(), data);
                }
                Refusal::PermissionDenied { .. } => {}
            }
            if matches!(api.status, 400 | 422) {
                v.insert(
                    "guidance".into(),
                    json!("MoviePilot refused the input: correct it against the input contract; do not repeat the same call"),
                );
                v.insert("input_contract".into(), contract(op));
            }
            failure(v, outcome)
        }
        GatewayError::Unavailable(refusal) => live_refusal(op, &refusal),
        e @ GatewayError::RouteNotServed { .. } => failure(
            obj(json!({
                "error": "operation_unavailable",
                "operation_id": op.id,
                "message": format!("{e}; nothing happened in MoviePilot"),
            })),
            outcome,
        ),
        GatewayError::Redirected {
            status,
            ref location,
            may_have_acted,
            ..
        } => {
            let mut v = obj(json!({
                "error": "redirect_not_followed",
                "operation_id": op.id,
                "status_code": status,
            }));
            if let Some(l) = location {
                v.insert("location".into(), json!(l));
            }
            v.insert(
                "message".into(),
                json!(if may_have_acted {
                    format!(
                        "{e}. It may already have taken effect; verify read-only before retrying"
                    )
                } else {
                    format!("{e}; nothing further was sent")
                }),
            );
            failure(v, outcome)
        }
        e @ GatewayError::MaybeSent { .. } => failure(
            obj(json!({
                "error": "operation_unavailable",
                "operation_id": op.id,
                "message": format!(
                    "{e}. It may already have taken effect; verify read-only before retrying"
                ),
            })),
            outcome,
        ),
        e @ (GatewayError::NotSent { .. }
        | GatewayError::InvalidBaseUrl { .. }
        | GatewayError::InvalidIdentity { .. }
        | GatewayError::UnknownOperation { .. }
        | GatewayError::InvalidInput(_)
        | GatewayError::LoginRejected
        | GatewayError::AccountDisabled
        | GatewayError::LoginFailed { .. }
        | GatewayError::LoginBadResponse { .. }) => failure(
            obj(json!({
                "error": "operation_unavailable",
                "operation_id": op.id,
                "message": format!("{e}; nothing happened in MoviePilot"),
            })),
            outcome,
        ),
    }
}

/// A read whose record came back with every field null: said as such, not passed on as data.
fn empty_record(op: &Operation) -> Value {
    json!({
        "success": true,
        "data": null,
        "empty_record": true,
        "message": format!(
            "MoviePilot returned an empty record for {} (every field null): nothing matched, or \
             this MoviePilot did not understand the parameters. This is not data / MoviePilot 返回了空记录",
            op.id
        ),
    })
}

/// MoviePilot refused the call for this account (`400 用户权限不足`, 401, 403).
fn permission_denied(
    op: &Operation,
    status: u16,
    detail: Option<&str>,
    outcome: Outcome,
) -> ToolOutput {
    let said = detail.map(|d| format!(" ({d})")).unwrap_or_default();
    let why = match status {
        401 => "it did not accept this account's sign-in; sign in again".to_owned(),
        403 if detail.is_some_and(|d| d.contains("token")) => {
            "it did not accept the agent's token for this account (MOVIEPILOT_SECRET_KEY may not \
             be MoviePilot's SECRET_KEY); ask an administrator"
                .to_owned()
        }
        _ => format!(
            "it requires the role `{}`{}, which this MoviePilot account does not have; ask an \
             administrator",
            op.role,
            if op.role.requires_admin() {
                " (a MoviePilot superuser)"
            } else {
                ""
            }
        ),
    };
    failure(
        obj(json!({
            "error": "moviepilot_permission_denied",
            "operation_id": op.id,
            "status_code": status,
            "required_role": op.role.as_str(),
            "message": format!(
                "MoviePilot refused {} with HTTP {status}{said}: {why}. Nothing was changed / MoviePilot 拒绝了该操作（权限不足）",
                op.id
            ),
        })),
        outcome,
    )
}

fn obj(pairs: Value) -> Map<String, Value> {
    match pairs {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

pub(crate) fn contract(op: &Operation) -> Value {
    serde_json::to_value(op.input_contract()).unwrap_or(Value::Null)
}

/// The description names the categories, not 229 operations.
fn description() -> String {
    description_for(&ServerKnowledge::Unchecked)
}

/// The description on a server: when its routes leave operations out, it says how many are
/// offered and why the others are not.
fn description_for(knowledge: &ServerKnowledge) -> String {
    let cats = catalogue().categories().join(", ");
    let server = match knowledge.reconciliation() {
        Some(r) if r.counts().unavailable() > 0 => format!(
            " On this MoviePilot ({}) {}: the others are newer than this server, answered by \
             another route, or need other parameters, so they are not offered, and a call to one \
             is refused without sending anything.",
            r.label(),
            r.counts()
        ),
        _ => String::new(),
    };
    format!(
        "Call MoviePilot's REST API: search and look up media, subscribe, search torrents and add downloads, \
         read the download and transfer queues and the library, manage sites, settings, plugins, workflows and \
         scheduled jobs. Give `operation_id` and only the inputs its contract declares: `path_params` (route \
         placeholders), `query` (declared query fields, as an object) and `body`. Operation categories: {cats}. \
         Each category's operations and input contracts are in the skill `moviepilot-api-<category>` — read it \
         with skill_view before using an operation you do not know. Administrator operations need an \
         administrator. A result's outcome is what MoviePilot answered: pending (accepted, not finished) and \
         unknown (may or may not have happened; verify read-only before any retry) are not success.{server}"
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

    fn admin_subject(&self, args: &MoviePilotApiArgs) -> Option<String> {
        op_of(args).map(|op| format!("the MoviePilot operation {} (role {})", op.id, op.role))
    }

    fn canonical_digest(&self, args: &MoviePilotApiArgs) -> Option<String> {
        prepare(args)?.ok().map(|p| p.arguments_digest())
    }

    fn shares_identity(&self) -> bool {
        true
    }

    fn live_description(&self) -> Option<String> {
        Some(description_for(&self.access.client.server().knowledge()))
    }

    fn offered_operations(&self, actor: &Actor) -> Option<Vec<(&'static str, &'static str)>> {
        let knowledge = self.access.client.server().knowledge();
        Some(
            catalogue()
                .operations()
                .iter()
                .filter(|op| actor.is_admin || !op.role.requires_admin())
                .filter(|op| knowledge.offers(op.id))
                .map(|op| (op.id, op.category))
                .collect(),
        )
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
                        "error": e.code(),
                        "operation_id": op.id,
                        "message": format!("{e}; nothing was sent"),
                        "input_contract": contract(op),
                    })),
                    Outcome::Failed,
                );
            }
        };
        // What this server serves, read again first when due; a call it cannot take is answered
        // here, before a token is minted or anything is sent.
        let knowledge = self.access.client.server_knowledge().await;
        if let Err(refusal) = knowledge.adapt(&prepared) {
            return live_refusal(op, &refusal);
        }
        let token = match self.access.identity.bearer(&ctx.actor).await {
            Ok(t) => t,
            Err(e) => {
                if e == IdentityError::AccountDisabled {
                    // Not the model's to explain: the user's stream says it, and the turn ends.
                    ctx.agent.events().emit(Event::Error {
                        kind: ErrorKind::Session,
                        code: e.code().into(),
                        message: e.to_string(),
                    });
                }
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
            // Set by the host from who runs the loop, never from arguments: MoviePilot (and the
            // evaluation's fake) can tell a subagent's reads apart.
            source: Some(
                if ctx.review.is_some() {
                    "background"
                } else if ctx.agent.origin() == crate::tools::policy::Origin::Subagent {
                    "subagent"
                } else if ctx.agent.origin() == crate::tools::policy::Origin::Kernel {
                    "kernel"
                } else {
                    "agent"
                }
                .to_string(),
            ),
        };
        match self.access.client.send(&prepared, &call).await {
            Ok(resp) => {
                let (mut result, outcome) = match resp.answer(op.effect.is_read()) {
                    Answer::Data(v) => (v, op.success_outcome()),
                    Answer::Rejected(v) => (v, Outcome::Failed),
                    Answer::EmptyRecord => (empty_record(op), Outcome::Succeeded),
                };
                // Secrets never reach the model: only a read the user confirmed keeps them, and
                // its result goes to the user alone (see `moviepilot::secret_read`).
                if !(confirmed_secret_read && show_secrets) {
                    mpa_gateway::redact_secrets(&mut result);
                }
                ToolOutput::json(&result, outcome)
            }
            Err(e) => {
                if let GatewayError::Api(api) = &e
                    && api.status == 401
                {
                    self.access.identity.rejected(&ctx.actor).await;
                }
                gateway_failure(op, e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(key: &str, value: Value) -> MoviePilotApiArgs {
        serde_json::from_value(json!({"operation_id": "config.system.update",
            "body": {"setting_key": key, "value": value}}))
        .unwrap()
    }

    #[test]
    fn a_credential_word_anywhere_in_the_key_means_no_read_back() {
        // Before: only a credential word at the end counted, so `TRACKER_COOKIE_2` was read back.
        for key in [
            "TRACKER_COOKIE_2",
            "COOKIECLOUD_KEY",
            "SITE_AUTH_HEADER_X",
            "PASSKEY_TRACKER_A",
            "MTEAM_APIKEY_OLD",
            "LOGIN_PWD_BACKUP",
            "TOKEN_V2",
            "SESSION_ID_WEB",
            "SIGN_SECRET_ROTATE",
        ] {
            assert_eq!(setting_replace(&update(key, json!("x"))), None, "{key}");
        }
        assert_eq!(
            setting_replace(&update("SUBSCRIBE_SEARCH_INTERVAL", json!(24))),
            Some(("SUBSCRIBE_SEARCH_INTERVAL".to_string(), json!(24)))
        );
        // A value that carries a credential field stays unverified too.
        assert_eq!(
            setting_replace(&update("DOWNLOADER_CONF", json!({"password": "p"}))),
            None
        );
    }
}
