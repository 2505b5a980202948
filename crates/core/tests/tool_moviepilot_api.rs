//! `moviepilot_api` against the fake MoviePilot over real HTTP: every error code with its whole
//! JSON result (and, for refused calls, an empty request log at the fake), per-call effect and
//! admin decisions, the lost receipt, pending `scheduler.run`, redaction, and every catalogue
//! operation reaching its route.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::{Gateway, demo_world, linked, open_host};
use mpa_core::Host;
use mpa_eval::{FakeConfig, FakeHandle, FakeMoviePilot, Fault};
use mpa_protocol::{Actor, EffectClass, Outcome};
use serde_json::{Value, json};

pub(crate) const SECRET: &str = "test-secret";

pub(crate) struct Env {
    _dir: tempfile::TempDir,
    pub(crate) host: Host,
    pub(crate) fake: FakeHandle,
    pub(crate) admin: Actor,
    pub(crate) alice: Actor,
    pub(crate) bob: Actor,
    /// A host administrator linked to alice's MoviePilot account, which is no superuser.
    pub(crate) carol: Actor,
}

async fn env() -> Env {
    let fake = FakeMoviePilot::start(FakeConfig::new(SECRET), demo_world())
        .await
        .unwrap();
    let url = fake.url();
    env_at(fake, url).await
}

/// A host whose gateway points at `url` (the fake's, or a closed port).
pub(crate) async fn env_at(fake: FakeHandle, url: String) -> Env {
    let dir = tempfile::tempdir().unwrap();
    // Host users admin and alice are linked to the fake's users 1 and 2, carol (a host admin)
    // to user 2 as well; bob to nobody.
    let gateway = Gateway {
        url,
        secret: SECRET.into(),
        identity: Some(linked(
            SECRET,
            &[
                ("admin", ("1", "admin")),
                ("alice", ("2", "alice")),
                ("carol", ("2", "alice")),
            ],
        )),
    };
    let host = open_host(dir.path(), mpa_model::ModelConfig::default(), Some(gateway)).await;
    let admin = host.local_actor("admin", true).await.unwrap();
    let alice = host.local_actor("alice", false).await.unwrap();
    let bob = host.local_actor("bob", false).await.unwrap();
    let carol = host.local_actor("carol", true).await.unwrap();
    Env {
        _dir: dir,
        host,
        fake,
        admin,
        alice,
        bob,
        carol,
    }
}

impl Env {
    pub(crate) async fn call(&self, actor: &Actor, args: Value) -> (Value, Outcome) {
        let (out, outcome) = self
            .host
            .agent()
            .run_tool(actor, "s1", "moviepilot_api", args)
            .await
            .unwrap();
        assert_eq!(out.outcome, outcome);
        let v: Value = serde_json::from_str(&out.content).unwrap();
        // A refusal's code travels beside the result, so no caller parses the result for it.
        if v["success"] == false {
            assert_eq!(out.error.as_deref(), v["error"].as_str(), "{v}");
        }
        (v, outcome)
    }

    fn requests(&self) -> usize {
        self.fake.ledger().len()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_goes_out_with_the_users_token_and_the_agent_headers() {
    let e = env().await;
    let (v, outcome) = e
        .call(
            &e.alice,
            json!({"operation_id": "media.search", "query": {"title": "三体"}}),
        )
        .await;
    assert_eq!(outcome, Outcome::Succeeded);
    assert_eq!(v["success"], true);
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["media_id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"204541") && ids.contains(&"108545"), "{v}");
    let ledger = e.fake.ledger();
    assert_eq!(ledger.len(), 1);
    let a = &ledger[0];
    assert_eq!(a.method, "GET");
    assert_eq!(a.operation_id.as_deref(), Some("media.search"));
    assert_eq!(a.user.as_ref().unwrap().name, "alice", "alice's own token");
    assert!(!a.user.as_ref().unwrap().super_user);
    assert_eq!(a.agent.session.as_deref(), Some("s1"));
    assert_eq!(a.agent.source.as_deref(), Some("agent"));
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_operation_lists_close_matches_and_sends_nothing() {
    let e = env().await;
    let (v, outcome) = e
        .call(&e.admin, json!({"operation_id": "subscription.lst"}))
        .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(v["success"], false);
    assert_eq!(v["error"], "unknown_operation");
    assert_eq!(v["operation_id"], "subscription.lst");
    assert_eq!(v["did_you_mean"][0], "subscription.list", "{v}");
    assert_eq!(e.requests(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_input_carries_the_contract_and_sends_nothing() {
    let e = env().await;
    let (v, outcome) = e
        .call(
            &e.admin,
            json!({"operation_id": "subscription.list", "query": {"page": 0}}),
        )
        .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(v["error"], "invalid_input");
    assert_eq!(v["operation_id"], "subscription.list");
    assert!(
        v["message"].as_str().unwrap().ends_with("nothing was sent"),
        "{v}"
    );
    assert_eq!(v["input_contract"]["operation_id"], "subscription.list");
    assert_eq!(v["input_contract"]["method"], "GET");
    let (v, _) = e
        .call(
            &e.admin,
            json!({"operation_id": "subscription.list", "query": {"bogus": 1}}),
        )
        .await;
    assert_eq!(v["error"], "invalid_input");
    assert!(v["message"].as_str().unwrap().contains("bogus"), "{v}");
    assert_eq!(e.requests(), 0);
}

/// Issue 24, finding 1: `subscription.find {"media_id": ".."}` as a non-admin sent
/// `GET /api/v1/subscribe/` and returned every subscription as succeeded. Now refused by name
/// before anything is sent, and so is the delete by media.
#[tokio::test(flavor = "multi_thread")]
async fn dot_dot_media_id_never_reaches_get_subscribe_list() {
    let e = env().await;
    for (id, v) in [
        ("subscription.find", ".."),
        ("subscription.find", "."),
        ("subscription.find", ""),
        ("subscription.delete_by_media", ".."),
        ("subscription.find", "../x"),
    ] {
        let (r, outcome) = e
            .call(
                &e.alice,
                json!({"operation_id": id, "path_params": {"media_id": v},
                    "query": {"media_source": "themoviedb"}}),
            )
            .await;
        assert_eq!(outcome, Outcome::Failed, "{id} {v:?}: {r}");
        assert_eq!(r["error"], "invalid_path_parameter", "{id} {v:?}: {r}");
        assert!(r["message"].as_str().unwrap().contains("`media_id`"), "{r}");
    }
    assert_eq!(e.requests(), 0, "nothing reached MoviePilot");
}

#[tokio::test(flavor = "multi_thread")]
async fn extra_top_level_keys_are_refused() {
    let e = env().await;
    let (v, outcome) = e
        .call(
            &e.admin,
            json!({"operation_id": "subscription.list", "url": "http://evil.invalid/"}),
        )
        .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(v["error"], "invalid_arguments");
    assert!(v["message"].as_str().unwrap().contains("url"), "{v}");
    assert_eq!(e.requests(), 0);
}

/// Issue 25: the refusal said "moviepilot_api is available to administrators only" for one
/// admin-only operation, although the tool serves non-admins for the others. It names the
/// operation now.
#[tokio::test(flavor = "multi_thread")]
async fn an_admin_operation_is_refused_to_a_non_admin_before_any_request() {
    let e = env().await;
    let (v, outcome) = e
        .call(&e.alice, json!({"operation_id": "scheduler.list"}))
        .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(
        v,
        json!({"success": false, "error": "permission_denied",
            "message": "the MoviePilot operation scheduler.list (role system_admin) is available to \
administrators only; moviepilot_api itself stays available for the operations your role allows — ask an \
administrator for this one"})
    );
    assert_eq!(e.requests(), 0);
    let (v, outcome) = e
        .call(&e.admin, json!({"operation_id": "scheduler.list"}))
        .await;
    assert_eq!(outcome, Outcome::Succeeded, "{v}");
    assert!(e.fake.ledger()[0].user.as_ref().unwrap().super_user);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unlinked_account_gets_moviepilot_not_linked() {
    let e = env().await;
    let (v, outcome) = e
        .call(&e.bob, json!({"operation_id": "subscription.list"}))
        .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(v["error"], "moviepilot_not_linked");
    assert_eq!(v["operation_id"], "subscription.list");
    assert!(v["message"].as_str().unwrap().contains("mpagent user link"));
    assert_eq!(e.requests(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn http_errors_become_api_error_with_guidance_on_422() {
    let e = env().await;
    e.fake.add_fault(
        serde_json::from_value::<Fault>(json!({
            "operation": "subscription.list",
            "action": {"kind": "respond", "status": 503, "body": {"detail": "maintenance"}}
        }))
        .unwrap(),
    );
    let (v, outcome) = e
        .call(&e.admin, json!({"operation_id": "subscription.list"}))
        .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(
        v,
        json!({"success": false, "error": "api_error", "operation_id": "subscription.list",
            "status_code": 503, "message": "maintenance"})
    );
    e.fake.set_faults(vec![
        serde_json::from_value::<Fault>(json!({
            "operation": "subscription.list",
            "action": {"kind": "respond", "status": 422, "body": {"detail": [{"msg": "bad page"}]}}
        }))
        .unwrap(),
    ]);
    let (v, _) = e
        .call(&e.admin, json!({"operation_id": "subscription.list"}))
        .await;
    assert_eq!(v["error"], "api_error");
    assert_eq!(v["status_code"], 422);
    assert!(v["guidance"].as_str().unwrap().contains("input contract"));
    assert_eq!(v["input_contract"]["operation_id"], "subscription.list");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_receipt_is_unknown_with_the_verify_note_and_the_write_landed_once() {
    let e = env().await;
    let before = e.fake.snapshot().downloads.len();
    e.fake.add_fault(
        serde_json::from_value::<Fault>(json!({
            "operation": "download.add", "action": {"kind": "drop"}
        }))
        .unwrap(),
    );
    let magnet = "magnet:?xt=urn:btih:0123456789abcdef0123456789abcdef01234567&dn=Three.Body";
    let (v, outcome) = e
        .call(
            &e.alice,
            json!({"operation_id": "download.add", "body": {
                "torrent_in": {"title": "Three Body S01", "enclosure": magnet},
                "media_source": "themoviedb", "media_id": "204541"}}),
        )
        .await;
    assert_eq!(outcome, Outcome::Unknown);
    assert_eq!(v["success"], false);
    assert_eq!(v["execution_outcome"], "unknown");
    assert_eq!(v["error"], "operation_unavailable");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("may already have taken effect; verify read-only"),
        "{v}"
    );
    assert_eq!(
        e.fake.snapshot().downloads.len(),
        before + 1,
        "the write landed once"
    );
    let posts = e
        .fake
        .ledger()
        .iter()
        .filter(|a| a.operation_id.as_deref() == Some("download.add"))
        .count();
    assert_eq!(posts, 1, "the gateway never resends a write");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_that_never_left_is_failed_not_unknown() {
    let fake = FakeMoviePilot::start(FakeConfig::new(SECRET), demo_world())
        .await
        .unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let e = env_at(fake, url.clone()).await;
    let (v, outcome) = e
        .call(&e.admin, json!({"operation_id": "subscription.list"}))
        .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(v["error"], "operation_unavailable");
    assert!(v.get("execution_outcome").is_none());
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("nothing happened"), "{msg}");
    assert!(!msg.contains(&url), "no address in the message: {msg}");
}

#[tokio::test(flavor = "multi_thread")]
async fn scheduler_run_success_is_pending() {
    let e = env().await;
    let (jobs, _) = e
        .call(&e.admin, json!({"operation_id": "scheduler.list"}))
        .await;
    let id = jobs["data"][0]["id"].as_str().unwrap().to_string();
    let (v, outcome) = e
        .call(
            &e.admin,
            json!({"operation_id": "scheduler.run", "query": {"jobid": id}}),
        )
        .await;
    assert_eq!(outcome, Outcome::Pending, "{v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_in_results_are_redacted() {
    let e = env().await;
    let (v, outcome) = e
        .call(
            &e.admin,
            json!({"operation_id": "config.system.get", "query": {"include_values": true, "show_secrets": true}}),
        )
        .await;
    assert_eq!(outcome, Outcome::Succeeded, "{v}");
    let text = v.to_string();
    assert!(text.contains(mpa_gateway::REDACTED), "{text}");
    // The fake's demo secrets never reach the tool result.
    for secret in ["demo-password", "demo-emby-key", "demo-tmdb-key"] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
}

/// Issue 24, finding 7: a MoviePilot setting `PROXY_HOST=http://user:pass@…` reached the model
/// provider with its password, because results were redacted by key name only. Credentials
/// inside values — a password in a URL, an `Authorization:` string, a known token shape — are
/// redacted now, and the rows of credential settings as before; ordinary values stay.
#[tokio::test(flavor = "multi_thread")]
async fn proxy_host_password_never_reaches_the_model() {
    let e = env().await;
    e.fake.add_fault(
        serde_json::from_value::<Fault>(json!({
            "operation": "config.system.get",
            "action": {"kind": "respond", "status": 200, "body": {"success": true, "data": [
                {"key": "PROXY_HOST", "value": "http://bob:s3cretpw@proxy.lan:7890"},
                {"key": "GITHUB_PROXY", "value": "Authorization: Bearer ghp_abcdefghijklmnopqrstuvwx1234"},
                {"key": "TMDB_API_KEY", "value": "0123456789abcdef"},
                {"key": "UserSiteAuthParams", "value": {"site": "hhclub", "params": {"uid": "7", "passkey": "0a1b2c3d4e"}}},
                {"key": "DOWNLOAD_PATH", "value": "/media/downloads"},
                {"key": "RSS_URL", "value": "https://pt.example/rss?passkey=9f8e7d6c5b4a&cat=401"}
            ]}}
        }))
        .unwrap(),
    );
    let (v, outcome) = e
        .call(
            &e.admin,
            json!({"operation_id": "config.system.get", "query": {"include_values": true}}),
        )
        .await;
    assert_eq!(outcome, Outcome::Succeeded, "{v}");
    let text = v.to_string();
    for secret in [
        "s3cretpw",
        "ghp_abcdefghijklmnopqrstuvwx1234",
        "0123456789abcdef",
        "0a1b2c3d4e",
        "9f8e7d6c5b4a",
    ] {
        assert!(!text.contains(secret), "{secret} reached the model: {text}");
    }
    assert_eq!(
        v["data"][0]["value"],
        "http://bob:[REDACTED:password]@proxy.lan:7890"
    );
    assert_eq!(v["data"][2]["value"], mpa_gateway::REDACTED);
    assert_eq!(v["data"][3]["value"]["params"]["uid"], "7");
    assert_eq!(
        v["data"][3]["value"]["params"]["passkey"],
        mpa_gateway::REDACTED
    );
    assert_eq!(v["data"][4]["value"], "/media/downloads");
}

/// Issue 25, item 4: `site.auth.options` answers the sign-in forms of the sites MoviePilot can
/// authenticate with — descriptors like `{"name": "密钥", "type": "password"}` — which were
/// redacted as if they were secrets. They reach the model whole.
#[tokio::test(flavor = "multi_thread")]
async fn site_auth_options_keep_their_form_descriptors() {
    let e = env().await;
    let options = json!({
        "hhclub": {"name": "HHCLUB", "params": {
            "uid": {"name": "UID", "type": "str", "tooltip": "用户ID"},
            "passkey": {"name": "密钥", "type": "password"},
        }},
        "iyuu": {"name": "IYUU", "params": {
            "token": {"name": "令牌", "type": "password", "placeholder": "IYUU token"},
            "password": {"label": "密码", "type": "password", "placeholder": "站点密码"},
        }},
    });
    e.fake.add_fault(
        serde_json::from_value::<Fault>(json!({
            "operation": "site.auth.options",
            "action": {"kind": "respond", "status": 200, "body": options}
        }))
        .unwrap(),
    );
    let (v, outcome) = e
        .call(&e.alice, json!({"operation_id": "site.auth.options"}))
        .await;
    assert_eq!(outcome, Outcome::Succeeded, "{v}");
    assert_eq!(v, json!({"success": true, "data": options}));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_effect_class_is_decided_per_call() {
    let e = env().await;
    let reg = e.host.agent().services().tools.clone();
    let tool = reg.get("moviepilot_api").unwrap();
    assert_eq!(tool.meta.effect, EffectClass::Unknown);
    let effect = |args: Value| tool.tool.prepare(args).ok().unwrap().effect();
    assert_eq!(
        effect(json!({"operation_id": "subscription.list"})),
        EffectClass::SafeRead
    );
    assert_eq!(
        effect(json!({"operation_id": "download.add"})),
        EffectClass::ExternalSideEffect
    );
    assert_eq!(
        effect(json!({"operation_id": "subscription.delete"})),
        EffectClass::DestructiveWrite
    );
    assert_eq!(
        effect(json!({"operation_id": "no.such"})),
        EffectClass::Unknown
    );
}

fn sample(kind: &mpa_gateway::FieldKind, f: &mpa_gateway::Field) -> Value {
    use mpa_gateway::FieldKind as K;
    match kind {
        K::String | K::Named(_) => match f.name {
            "source" => json!("tmdb"),
            "action" => json!("start"),
            _ => json!("x1"),
        },
        K::Integer | K::Number => json!(f.minimum.unwrap_or(1).max(1)),
        K::Boolean => json!(true),
        K::Enum(v) => json!(v[0]),
        K::Const(c) => json!(c),
        K::Array(inner) => json!([sample(inner, f)]),
    }
}

/// The smallest call the operation's contract accepts, and the path it reaches on the
/// catalogue's own server.
pub(crate) fn minimal_args(op: &mpa_gateway::Operation) -> (Value, String) {
    let mut path = op.path.to_string();
    let mut params = serde_json::Map::new();
    for f in &op.path_params {
        let v = sample(&f.kind, f);
        let text = match &v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        path = path.replace(&format!("{{{}}}", f.name), &text);
        params.insert(f.name.into(), v);
    }
    let mut query = serde_json::Map::new();
    for f in op.query.iter().filter(|f| f.required) {
        query.insert(f.name.into(), sample(&f.kind, f));
    }
    let mut args = json!({"operation_id": op.id});
    if !params.is_empty() {
        args["path_params"] = Value::Object(params);
    }
    if !query.is_empty() {
        args["query"] = Value::Object(query);
    }
    if op.body.required {
        use mpa_gateway::BodyKind as B;
        args["body"] = match &op.body.kind {
            B::None => Value::Null,
            B::Object { fields, .. } => {
                let mut m = serde_json::Map::new();
                for f in fields.iter().filter(|f| f.required) {
                    m.insert(f.name.into(), sample(&f.kind, f));
                }
                if m.is_empty() {
                    m.insert("name".into(), json!("x1"));
                }
                Value::Object(m)
            }
            B::Array { .. } => json!([]),
            B::ArrayOrObject { .. } => json!({}),
            B::Literal(s) => json!(s),
        };
    }
    (args, path)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_catalogue_operation_reaches_its_route_and_an_invalid_call_is_refused_with_its_contract()
 {
    let e = env().await;
    let cat = mpa_gateway::catalogue();
    assert_eq!(cat.len(), 229);
    for op in cat.operations() {
        let (args, path) = minimal_args(op);
        let before = e.requests();
        let (v, _) = e.call(&e.admin, args.clone()).await;
        let ledger = e.fake.ledger();
        assert_eq!(ledger.len(), before + 1, "{}: {v}", op.id);
        let a = ledger.last().unwrap();
        assert_eq!(a.method, op.method.to_string(), "{}", op.id);
        assert_eq!(a.path, path, "{}", op.id);
        // An extra query key is refused with the operation's contract, and sends nothing.
        let mut bad = args;
        bad["query"]["no_such_field"] = json!(1);
        let (v, outcome) = e.call(&e.admin, bad).await;
        assert_eq!(outcome, Outcome::Failed);
        assert_eq!(v["error"], "invalid_input", "{}: {v}", op.id);
        assert_eq!(v["input_contract"]["operation_id"], op.id);
        assert_eq!(e.requests(), before + 1, "{}", op.id);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn moviepilot_api_spec_and_outputs_snapshot() {
    let e = env().await;
    let tools = e.host.agent().services().tools.clone();
    insta::assert_json_snapshot!(
        "moviepilot_api_spec",
        tools.get("moviepilot_api").unwrap().spec
    );
    let (list, _) = e
        .call(
            &e.alice,
            json!({"operation_id": "subscription.list", "query": {"page": 1, "count": 2}}),
        )
        .await;
    insta::assert_json_snapshot!("subscription_list_page", list);
    let (unknown, _) = e
        .call(&e.alice, json!({"operation_id": "subscribe.add"}))
        .await;
    insta::assert_json_snapshot!("unknown_operation", unknown);
    let (invalid, _) = e
        .call(
            &e.admin,
            json!({"operation_id": "subscription.get", "path_params": {}}),
        )
        .await;
    insta::assert_json_snapshot!("invalid_input", invalid);
}
