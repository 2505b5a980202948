//! The gateway against the user's own server (issue 25 item 1): the fake MoviePilot serving the
//! recorded real v2 OpenAPI (and routing and answering like that server), the catalogue's own
//! document, and none. Calls go through `moviepilot_api` exactly as the agent makes them; the
//! fake's request log is the proof of what was sent.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_core::moviepilot::identity::{MintingResolver, MoviePilotUser};
use mpa_core::moviepilot::{AuthMode, MoviePilotConfig};
use mpa_core::{AgentConfig, Host, HostConfig, MoviePilotHostConfig};
use mpa_eval::{FakeConfig, FakeHandle, FakeMoviePilot, OpenApiServing, WorldState};
use mpa_gateway::{BodyKind, FieldKind, Operation, Reconciliation, ServerApi, catalogue};
use mpa_protocol::{Actor, Outcome};
use serde_json::{Map, Value, json};
use std::sync::Arc;

const SECRET: &str = "test-secret";

pub fn recorded_openapi() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../catalog/openapi/moviepilot-v2-2025-06.json"
    ))
    .unwrap()
}

fn world() -> WorldState {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../eval/worlds/demo.json"
    ))
    .unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    WorldState::from_value(v["state"].clone()).unwrap()
}

pub struct Env {
    _dir: tempfile::TempDir,
    pub host: Host,
    pub fake: FakeHandle,
    pub admin: Actor,
    pub alice: Actor,
}

/// A host whose gateway points at a fake started with `config`; host users admin and alice are
/// MoviePilot users 1 (superuser) and 2.
pub async fn env_with(config: FakeConfig) -> Env {
    let fake = FakeMoviePilot::start(config, world()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let resolver = MintingResolver::new(SECRET, |a: &Actor| match a.user_name.as_str() {
        "admin" => Some(MoviePilotUser {
            id: "1".into(),
            name: "admin".into(),
        }),
        "alice" => Some(MoviePilotUser {
            id: "2".into(),
            name: "alice".into(),
        }),
        _ => None,
    });
    let mut cfg = HostConfig::new(
        dir.path().join("data"),
        AgentConfig::new(mpa_model::ModelConfig::default()),
    );
    cfg.moviepilot = Some(MoviePilotHostConfig {
        config: MoviePilotConfig {
            url: fake.url(),
            secret_key: Some(SECRET.into()),
            auth: AuthMode::Local,
        },
        identity: Some(Arc::new(resolver)),
    });
    let host = Host::open(cfg).await.unwrap();
    let admin = host.local_actor("admin", true).await.unwrap();
    let alice = host.local_actor("alice", false).await.unwrap();
    Env {
        _dir: dir,
        host,
        fake,
        admin,
        alice,
    }
}

pub async fn recorded_env() -> Env {
    env_with(FakeConfig::recorded_v2(SECRET, recorded_openapi()).unwrap()).await
}

impl Env {
    pub async fn call(&self, actor: &Actor, args: Value) -> (Value, Outcome) {
        let (out, outcome) = self
            .host
            .agent()
            .run_tool(actor, "s1", "moviepilot_api", args)
            .await
            .unwrap();
        (serde_json::from_str(&out.content).unwrap(), outcome)
    }
}

fn sample(kind: &FieldKind, name: &str) -> Value {
    match kind {
        FieldKind::Integer | FieldKind::Number => json!(1),
        FieldKind::Boolean => json!(true),
        FieldKind::Enum(values) => json!(values[0]),
        FieldKind::Const(c) => json!(c),
        FieldKind::Array(_) => json!(["x"]),
        FieldKind::String | FieldKind::Named(_) if name == "source" => json!("tmdb"),
        FieldKind::String | FieldKind::Named(_) if name == "media_source" => json!("themoviedb"),
        FieldKind::String | FieldKind::Named(_) => json!("x1"),
    }
}

/// The smallest call the operation's contract accepts.
fn minimal_call(op: &Operation) -> Value {
    let path: Map<String, Value> = op
        .path_params
        .iter()
        .map(|f| (f.name.to_string(), sample(&f.kind, f.name)))
        .collect();
    let query: Map<String, Value> = op
        .query
        .iter()
        .filter(|f| f.required && !matches!(f.kind, FieldKind::Const(_)))
        .map(|f| {
            let mut v = sample(&f.kind, f.name);
            if let (Some(min), Value::Number(_)) = (f.minimum, &v) {
                v = json!(min.max(1));
            }
            (f.name.to_string(), v)
        })
        .collect();
    let mut call = json!({"operation_id": op.id});
    if !path.is_empty() {
        call["path_params"] = Value::Object(path);
    }
    if !query.is_empty() {
        call["query"] = Value::Object(query);
    }
    if op.body.required {
        call["body"] = match &op.body.kind {
            BodyKind::None => Value::Null,
            BodyKind::Object {
                fields,
                min_properties,
                ..
            } => {
                let mut m: Map<String, Value> = fields
                    .iter()
                    .filter(|f| f.required)
                    .map(|f| (f.name.to_string(), sample(&f.kind, f.name)))
                    .collect();
                if m.len() < *min_properties {
                    m.insert("enabled".into(), json!(true));
                }
                Value::Object(m)
            }
            BodyKind::Array { .. } | BodyKind::ArrayOrObject { .. } => json!([]),
            BodyKind::Literal(s) => json!(s),
        };
    }
    call
}

/// The acceptance test: on the recorded v2 server, every operation the reconciliation finds
/// absent, other-method, shadowed or missing parameters is answered `operation_unavailable`
/// with the server and the reason, and the fake's request log stays empty — nothing was sent to
/// a route that would 404, 405 or answer for another operation.
#[tokio::test(flavor = "multi_thread")]
async fn on_the_recorded_v2_server_no_unavailable_operation_is_ever_sent() {
    let e = recorded_env().await;
    let table = Reconciliation::new(catalogue(), ServerApi::parse(&recorded_openapi()).unwrap());
    let counts = table.counts();
    assert_eq!(
        (
            counts.available,
            counts.absent,
            counts.other_method,
            counts.shadowed,
            counts.other_parameters
        ),
        (107, 96, 16, 9, 1),
        "{counts}"
    );
    let mut refused = 0;
    for live in table.operations() {
        if live.availability.is_available() {
            continue;
        }
        let op = catalogue().get(live.id).unwrap();
        let (v, outcome) = e.call(&e.admin, minimal_call(op)).await;
        assert_eq!(outcome, Outcome::Failed, "{}: {v}", op.id);
        assert_eq!(v["error"], "operation_unavailable", "{}: {v}", op.id);
        assert_eq!(v["availability"], live.availability.status(), "{}", op.id);
        let message = v["message"].as_str().unwrap();
        assert!(
            message.contains(table.label()) && message.ends_with("nothing was sent"),
            "{}: {message}",
            op.id
        );
        refused += 1;
    }
    assert_eq!(refused, 122);
    assert_eq!(
        e.fake.ledger(),
        vec![],
        "no request reached the recorded server"
    );
    assert!(e.fake.openapi_reads() >= 1);
}

/// A shadowed operation names the route that would have answered for it.
#[tokio::test(flavor = "multi_thread")]
async fn a_shadowed_operation_names_the_route_that_would_answer() {
    let e = recorded_env().await;
    let (v, _) = e
        .call(
            &e.alice,
            json!({"operation_id": "plugin.ratings", "query": {"plugin_ids": "a"}}),
        )
        .await;
    assert_eq!(v["error"], "operation_unavailable", "{v}");
    assert_eq!(v["availability"], "shadowed");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("would be answered by GET /api/v1/plugin/{plugin_id}"),
        "{v}"
    );
    let (v, _) = e.call(&e.alice, json!({"operation_id": "site.list"})).await;
    assert_eq!(v["availability"], "shadowed", "{v}");
    assert_eq!(e.fake.ledger().len(), 0);
}

/// `subscription.list` with `page`/`count` on a server whose route has no paging is refused with
/// a note, not sent to be silently widened to the whole list; without them it is sent.
#[tokio::test(flavor = "multi_thread")]
async fn subscription_list_paging_on_a_server_without_paging_is_refused_with_a_note() {
    let e = recorded_env().await;
    let (v, outcome) = e
        .call(
            &e.alice,
            json!({"operation_id": "subscription.list", "query": {"page": 2, "count": 50}}),
        )
        .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(v["error"], "invalid_input", "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("does not page GET /api/v1/subscribe/")
            && message.contains("`page`, `count`")
            && message.contains("whole list"),
        "{message}"
    );
    assert_eq!(e.fake.ledger().len(), 0, "nothing was sent");
    let (v, outcome) = e
        .call(&e.alice, json!({"operation_id": "subscription.list"}))
        .await;
    assert_eq!(outcome, Outcome::Succeeded, "{v}");
    let ledger = e.fake.ledger();
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0].path, "/api/v1/subscribe/");
}

/// A field the live route does not accept is refused by name instead of being sent and ignored.
#[tokio::test(flavor = "multi_thread")]
async fn a_query_field_the_live_route_does_not_accept_is_refused_by_name() {
    let e = recorded_env().await;
    let (v, _) = e
        .call(
            &e.alice,
            json!({"operation_id": "subscription.find", "path_params": {"media_id": "35465232"},
                "query": {"media_source": "douban", "music_type": "album"}}),
        )
        .await;
    assert_eq!(v["error"], "invalid_input", "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("does not accept the query field `music_type`")
            && message.contains("`season`, `title`"),
        "{message}"
    );
    assert_eq!(e.fake.ledger().len(), 0);
}

/// The v2 server names media as `mediaid = "<source>:<id>"`: the contract's `media_id` +
/// `media_source` are translated for `subscription.find` and `media.detail`.
#[tokio::test(flavor = "multi_thread")]
async fn media_id_and_source_are_sent_as_mediaid_to_the_v2_server() {
    let e = recorded_env().await;
    let (v, outcome) = e
        .call(
            &e.alice,
            json!({"operation_id": "subscription.find", "path_params": {"media_id": "35465232"},
                "query": {"media_source": "douban", "season": 1}}),
        )
        .await;
    assert_eq!(outcome, Outcome::Succeeded, "{v}");
    let (v, outcome) = e
        .call(
            &e.alice,
            json!({"operation_id": "media.detail", "path_params": {"media_id": "204541"},
                "query": {"media_source": "themoviedb", "type_name": "电视剧"}}),
        )
        .await;
    assert_eq!(outcome, Outcome::Succeeded, "{v}");
    let ledger = e.fake.ledger();
    let sent: Vec<(&str, &Map<String, Value>)> =
        ledger.iter().map(|a| (a.path.as_str(), &a.query)).collect();
    assert_eq!(sent[0].0, "/api/v1/subscribe/media/douban:35465232");
    assert_eq!(sent[0].1, json!({"season": "1"}).as_object().unwrap());
    assert_eq!(sent[1].0, "/api/v1/media/tmdb:204541");
    assert_eq!(
        sent[1].1,
        json!({"type_name": "电视剧"}).as_object().unwrap()
    );
    assert!(ledger.iter().all(|a| a.refusal.is_none()), "{ledger:?}");
}

/// Against the catalogue's own document every operation is available, and a call goes out as
/// before; without any document the catalogue alone is used.
#[tokio::test(flavor = "multi_thread")]
async fn the_catalogue_document_offers_everything_and_no_document_falls_back_to_the_catalogue() {
    for serving in [OpenApiServing::Catalogue, OpenApiServing::NotServed] {
        let mut config = FakeConfig::new(SECRET);
        config.openapi = serving.clone();
        let e = env_with(config).await;
        let (v, outcome) = e
            .call(
                &e.alice,
                json!({"operation_id": "subscription.list", "query": {"page": 1, "count": 10}}),
            )
            .await;
        assert_eq!(outcome, Outcome::Succeeded, "{serving:?}: {v}");
        let (v, _) = e
            .call(
                &e.admin,
                json!({"operation_id": "plugin.ratings", "query": {"plugin_ids": "a"}}),
            )
            .await;
        assert_ne!(v["error"], "operation_unavailable", "{serving:?}: {v}");
        assert!(e.fake.openapi_reads() >= 1, "{serving:?}");
    }
}

/// Only what the server serves is offered: the category guides list the available operations
/// and name the others with their reason, tool search finds only available ids, and the tool's
/// description says how many are offered and why the rest are not.
#[tokio::test(flavor = "multi_thread")]
async fn on_the_recorded_server_only_available_operations_are_offered() {
    let e = recorded_env().await;
    let guide = std::fs::read_to_string(
        e.host
            .data_dir()
            .join("agent/skills/moviepilot-api/moviepilot-api-site/SKILL.md"),
    )
    .unwrap();
    assert!(guide.contains("## On this MoviePilot"), "{guide}");
    assert!(!guide.contains("### `site.list`"), "{guide}");
    assert!(
        guide.contains(
            "- `site.list` — shadowed: this MoviePilot has no route GET /api/v1/site/agent"
        ),
        "{guide}"
    );
    assert!(
        guide.contains("### `site.delete`"),
        "available ones stay: {guide}"
    );

    let services = e.host.agent().services();
    let entries = mpa_core::tools::search_tools::catalogue_for(&services.tools, &e.admin);
    let gateway = entries.iter().find(|x| x.name == "moviepilot_api").unwrap();
    assert_eq!(gateway.operations.len(), 107);
    assert!(!gateway.operations.iter().any(|(id, _)| *id == "site.list"));
    assert!(
        gateway
            .operations
            .iter()
            .any(|(id, _)| *id == "subscription.list")
    );

    let spec = services
        .tools
        .specs_for(&e.alice)
        .into_iter()
        .find(|s| s.name == "moviepilot_api")
        .unwrap();
    assert!(
        spec.description
            .contains("107 of 229 operations available (96 absent, 16 other method, 9 shadowed, 1 other parameters)"),
        "{}",
        spec.description
    );
}

/// The catalogue's own server changes nothing the model reads: the shipped guides and the
/// registered description.
#[tokio::test(flavor = "multi_thread")]
async fn on_the_catalogues_own_server_guides_and_description_are_the_shipped_ones() {
    let e = env_with(FakeConfig::new(SECRET)).await;
    let dir = e.host.data_dir().join("agent/skills/moviepilot-api");
    assert!(
        mpa_core::moviepilot::guides::is_pristine(&dir, mpa_core::moviepilot::guides::shipped())
            .unwrap()
    );
    let services = e.host.agent().services();
    let spec = services
        .tools
        .specs_for(&e.alice)
        .into_iter()
        .find(|s| s.name == "moviepilot_api")
        .unwrap();
    let registered = services.tools.get("moviepilot_api").unwrap();
    assert_eq!(spec.description, registered.spec.description);
}
