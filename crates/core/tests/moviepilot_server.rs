//! The gateway against the user's own server (issue 25 item 1): the fake MoviePilot serving the
//! recorded real v2 OpenAPI (and routing and answering like that server), the catalogue's own
//! document, and none. Calls go through `moviepilot_api` exactly as the agent makes them; the
//! fake's request log is the proof of what was sent.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::demo_world;
use crate::tool_moviepilot_api::{Env, SECRET, env_at, minimal_args};
use mpa_eval::{FakeConfig, FakeMoviePilot, Fault, OpenApiServing};
use mpa_gateway::{Reconciliation, ServerApi, catalogue};
use mpa_protocol::Outcome;
use serde_json::{Map, Value, json};

fn recorded_openapi() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../catalog/openapi/moviepilot-v2-2025-06.json"
    ))
    .unwrap()
}

/// A host whose gateway points at a fake started with `config` (users as in
/// `tool_moviepilot_api`: admin is MoviePilot's superuser 1, alice user 2, carol a host admin
/// linked to user 2).
async fn env_with(config: FakeConfig) -> Env {
    let fake = FakeMoviePilot::start(config, demo_world()).await.unwrap();
    let url = fake.url();
    env_at(fake, url).await
}

async fn recorded_env() -> Env {
    env_with(FakeConfig::recorded_v2(SECRET, recorded_openapi()).unwrap()).await
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
        let (v, outcome) = e.call(&e.admin, minimal_args(op).0).await;
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
    let entries = mpa_core::tools::search_tools::catalogue_for(&services.tools.view(), &e.admin);
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

// ---------------------------------------------------------------------------------------------
// Answers as the recorded server writes them (issue 25 item 2).

fn fault(op: &str, status: u16, body: Value) -> Fault {
    serde_json::from_value(json!({
        "operation": op,
        "action": {"kind": "respond", "status": status, "body": body}
    }))
    .unwrap()
}

/// Reads answer bare lists, objects and numbers; the result carries them as `data` of a
/// success, so the model reads every answer the same way.
#[tokio::test(flavor = "multi_thread")]
async fn bare_values_are_read_as_data() {
    let e = recorded_env().await;
    let (v, outcome) = e
        .call(&e.alice, json!({"operation_id": "subscription.list"}))
        .await;
    assert_eq!(outcome, Outcome::Succeeded);
    assert_eq!(v["success"], true, "{v}");
    assert_eq!(v["data"][0]["media_id"], "35465232", "{v}");
    assert!(
        v.get("collection").is_none(),
        "the v2 server sends no collection headers"
    );
    e.fake.add_fault(fault("dashboard.cpu", 200, json!(0)));
    let (v, outcome) = e
        .call(&e.admin, json!({"operation_id": "dashboard.cpu"}))
        .await;
    assert_eq!(outcome, Outcome::Succeeded);
    assert_eq!(v, json!({"success": true, "data": 0}));
    let (v, _) = e
        .call(
            &e.alice,
            json!({"operation_id": "media.detail", "path_params": {"media_id": "204541"},
                "query": {"media_source": "themoviedb", "type_name": "电视剧"}}),
        )
        .await;
    assert_eq!(v["success"], true);
    assert_eq!(v["data"]["title"], "三体", "{v}");
}

/// A lookup that found nothing answers a record whose every field is null; that is said, not
/// passed on as a subscription.
#[tokio::test(flavor = "multi_thread")]
async fn an_all_null_record_is_reported_as_an_empty_record() {
    let e = recorded_env().await;
    let (v, outcome) = e
        .call(
            &e.alice,
            json!({"operation_id": "subscription.find", "path_params": {"media_id": "999"},
                "query": {"media_source": "themoviedb"}}),
        )
        .await;
    assert_eq!(outcome, Outcome::Succeeded);
    assert_eq!(v["data"], Value::Null, "{v}");
    assert_eq!(v["empty_record"], true);
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("MoviePilot returned an empty record for subscription.find"),
        "{v}"
    );
    assert_eq!(e.fake.ledger().len(), 1);
}

/// The envelope of a write stays as MoviePilot sent it, and a `success: false` is a failure.
#[tokio::test(flavor = "multi_thread")]
async fn the_envelope_is_kept_and_success_false_fails() {
    let e = recorded_env().await;
    e.fake.add_fault(fault(
        "subscription.delete",
        200,
        json!({"success": false, "message": "订阅不存在", "data": null}),
    ));
    let (v, outcome) = e
        .call(
            &e.admin,
            json!({"operation_id": "subscription.delete", "path_params": {"subscribe_id": 42}}),
        )
        .await;
    assert_eq!(outcome, Outcome::Failed);
    let mut v = v;
    assert_eq!(
        v["_tool_execution"]["outcome"], "failed",
        "the write's receipt"
    );
    v.as_object_mut().unwrap().remove("_tool_execution");
    assert_eq!(
        v,
        json!({"success": false, "message": "订阅不存在", "data": null})
    );
}

/// FastAPI's 422 carries field errors: the model gets them as field errors, with the contract.
#[tokio::test(flavor = "multi_thread")]
async fn fastapi_422_field_errors_are_shown_as_field_errors() {
    let e = recorded_env().await;
    e.fake.add_fault(fault(
        "subscription.list",
        422,
        json!({"detail": [{"type": "int_parsing", "loc": ["query", "page"],
            "msg": "Input should be a valid integer, unable to parse string as an integer", "input": "x"}]}),
    ));
    let (v, outcome) = e
        .call(&e.alice, json!({"operation_id": "subscription.list"}))
        .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(v["error"], "api_error");
    assert_eq!(v["status_code"], 422);
    assert_eq!(
        v["field_errors"],
        json!([{"field": "query.page", "type": "int_parsing",
            "message": "Input should be a valid integer, unable to parse string as an integer"}])
    );
    assert_eq!(v["input_contract"]["operation_id"], "subscription.list");
}

/// A 500 in plain text is read as its text, not as broken JSON.
#[tokio::test(flavor = "multi_thread")]
async fn a_plain_text_500_is_read_as_its_message() {
    let e = recorded_env().await;
    e.fake.add_fault(fault(
        "subscription.list",
        500,
        json!("Internal Server Error"),
    ));
    let (v, outcome) = e
        .call(&e.alice, json!({"operation_id": "subscription.list"}))
        .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(
        v,
        json!({"success": false, "error": "api_error", "operation_id": "subscription.list",
            "status_code": 500, "message": "Internal Server Error"})
    );
}

/// Issue 25: a non-superuser on a superuser route gets HTTP 400 `用户权限不足` from MoviePilot,
/// which the agent turned into "correct your input against the contract". It is a permission
/// refusal naming the operation and the role.
#[tokio::test(flavor = "multi_thread")]
async fn not_superuser_400_is_permission_denied_not_bad_input() {
    let e = recorded_env().await;
    let (v, outcome) = e
        .call(&e.carol, json!({"operation_id": "scheduler.list"}))
        .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(v["error"], "moviepilot_permission_denied", "{v}");
    assert_eq!(v["operation_id"], "scheduler.list");
    assert_eq!(v["status_code"], 400);
    assert_eq!(v["required_role"], "system_admin");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("MoviePilot refused scheduler.list with HTTP 400 (用户权限不足)")
            && message.contains("requires the role `system_admin` (a MoviePilot superuser)"),
        "{message}"
    );
    assert!(v.get("guidance").is_none() && v.get("input_contract").is_none());
    assert_eq!(e.fake.ledger()[0].status, Some(400));
}

/// A server that hides its OpenAPI: the catalogue alone is used, and a catalogued route it
/// does not have (404 Not Found, 405) is `operation_unavailable`, nothing happened.
#[tokio::test(flavor = "multi_thread")]
async fn a_404_or_405_from_a_catalogued_route_is_operation_unavailable() {
    let mut config = FakeConfig::recorded_v2(SECRET, recorded_openapi()).unwrap();
    config.openapi = OpenApiServing::undocumented(recorded_openapi()).unwrap();
    let e = env_with(config).await;
    for (id, status) in [("filter.builtin", 404), ("subscription.refresh", 405)] {
        let (v, outcome) = e.call(&e.admin, json!({"operation_id": id})).await;
        assert_eq!(outcome, Outcome::Failed, "{id}: {v}");
        assert_eq!(v["error"], "operation_unavailable", "{id}: {v}");
        let message = v["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("answered HTTP {status}"))
                && message.ends_with("nothing happened in MoviePilot"),
            "{message}"
        );
    }
    assert_eq!(e.fake.ledger().len(), 2);
    assert_eq!(
        mpa_core::moviepilot::live::agent_health(e.host.agent())
            .unwrap()
            .routes,
        "catalogue_only"
    );
}
