//! The operation catalogue: every row parses into the documented policy and contract, the
//! counts match moviepilot-api.md "Counts", and every one of the 229 operations reaches a real
//! HTTP server with the catalogue's method and filled route.

use crate::common;

use common::{encode, encode_segment, serve};
use mpa_gateway::{
    BodyKind, Catalogue, CollectionShape, Confirmation, FieldKind, GatewayError, HttpMethod,
    InputError, Location, Operation, Paging, Recovery, Role, Sensitivity, catalogue,
    embedded_catalogue_error, placeholders,
};
use mpa_protocol::{EffectClass, Outcome};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

fn count_by<K: Ord>(key: impl Fn(&Operation) -> K) -> BTreeMap<K, usize> {
    let mut m = BTreeMap::new();
    for op in catalogue().operations() {
        *m.entry(key(op)).or_insert(0) += 1;
    }
    m
}

fn known(op: &Operation) -> bool {
    op.policy_known
}

#[test]
fn every_row_parses_into_229_unique_operations() {
    assert_eq!(embedded_catalogue_error(), None);
    let cat = catalogue();
    assert_eq!(cat.len(), 229);
    let ids: HashSet<&str> = cat.operations().iter().map(|o| o.id).collect();
    assert_eq!(ids.len(), 229, "ids are unique");
    // The shipped file is the shared data file, byte for byte.
    let data = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../catalog/moviepilot-operations.tsv"
    ))
    .unwrap();
    assert_eq!(data.lines().count(), 230);
    for op in cat.operations() {
        assert_eq!(cat.get(op.id), Some(op));
        let names: Vec<&str> = op.path_params.iter().map(|f| f.name).collect();
        assert_eq!(
            placeholders(op.path),
            names,
            "{}: placeholders = path_params",
            op.id
        );
        assert!(op.id.starts_with(&format!("{}.", op.category)), "{}", op.id);
        let c = op.input_contract();
        assert_eq!(c.operation_id, op.id);
        assert!(serde_json::to_value(&c).unwrap().is_object());
    }
}

#[test]
fn counts_match_the_documentation() {
    let effects = count_by(|o| o.effect.as_str());
    assert_eq!(
        effects,
        BTreeMap::from([
            ("destructive_write", 24),
            ("external_side_effect", 46),
            ("reversible_write", 40),
            ("safe_read", 119),
        ])
    );
    let methods = count_by(|o| o.method.as_str());
    assert_eq!(
        methods,
        BTreeMap::from([
            ("DELETE", 26),
            ("GET", 121),
            ("PATCH", 1),
            ("POST", 68),
            ("PUT", 13)
        ])
    );
    let categories = count_by(|o| o.category);
    assert_eq!(
        categories,
        BTreeMap::from([
            ("config", 6),
            ("dashboard", 9),
            ("database", 4),
            ("download", 7),
            ("filter", 10),
            ("library", 2),
            ("media", 23),
            ("music", 10),
            ("plugin", 38),
            ("recommendation", 1),
            ("scheduler", 3),
            ("search", 4),
            ("site", 23),
            ("slash", 2),
            ("storage", 6),
            ("subscription", 29),
            ("subtitle", 2),
            ("system", 14),
            ("torrent", 5),
            ("transfer", 15),
            ("workflow", 16),
        ])
    );
    assert_eq!(
        catalogue().categories(),
        categories.keys().copied().collect::<Vec<_>>().as_slice()
    );
    assert_eq!(catalogue().in_category("subscription").count(), 29);

    // Policy columns, over the 221 rows MoviePilot publishes a policy for.
    let known_ops: Vec<&Operation> = catalogue()
        .operations()
        .iter()
        .filter(|o| known(o))
        .collect();
    assert_eq!(known_ops.len(), 221);
    let tally = |f: &dyn Fn(&Operation) -> &'static str| {
        let mut m = BTreeMap::new();
        for op in &known_ops {
            *m.entry(f(op)).or_insert(0) += 1;
        }
        m
    };
    assert_eq!(
        tally(&|o| o.role.as_str()),
        BTreeMap::from([("system_admin", 134), ("user", 87)])
    );
    assert_eq!(
        tally(&|o| o.confirmation.as_str()),
        BTreeMap::from([("none", 126), ("required", 95)])
    );
    assert_eq!(
        tally(&|o| o.recovery.as_str()),
        BTreeMap::from([
            ("idempotent", 28),
            ("manual_only", 4),
            ("none", 124),
            ("reconcile", 35),
            ("recoverable_delete", 9),
            ("transaction", 21),
        ])
    );
    assert_eq!(
        tally(&|o| o.sensitivity.as_str()),
        BTreeMap::from([("normal", 172), ("private", 49)])
    );
    let manual: Vec<&str> = known_ops
        .iter()
        .filter(|o| o.recovery == Recovery::ManualOnly)
        .map(|o| o.id)
        .collect();
    assert_eq!(
        manual,
        [
            "database.backups.delete",
            "plugin.reset",
            "storage.delete",
            "transfer.history.clear"
        ]
    );
    for op in &known_ops {
        if matches!(
            op.effect,
            EffectClass::DestructiveWrite | EffectClass::ReversibleWrite
        ) {
            assert_eq!(op.confirmation, Confirmation::Required, "{}", op.id);
        }
    }
    let mut unconfirmed_effects: Vec<&str> = known_ops
        .iter()
        .filter(|o| {
            o.effect == EffectClass::ExternalSideEffect && o.confirmation == Confirmation::None
        })
        .map(|o| o.id)
        .collect();
    unconfirmed_effects.sort_unstable();
    assert_eq!(
        unconfirmed_effects,
        [
            "filter.test",
            "search.recommend",
            "search.title",
            "site.resource",
            "subtitle.search.media",
            "subtitle.search.title",
            "system.module.test",
            "system.network.test",
            "system.update.check",
        ]
    );

    // Routes: 227 distinct, two shared.
    let routes: HashSet<(HttpMethod, &str)> = catalogue()
        .operations()
        .iter()
        .map(|o| (o.method, o.path))
        .collect();
    assert_eq!(routes.len(), 227);

    // Inputs.
    let ops = catalogue().operations();
    assert_eq!(ops.iter().filter(|o| !o.path_params.is_empty()).count(), 91);
    assert_eq!(ops.iter().filter(|o| !o.query.is_empty()).count(), 98);
    assert_eq!(
        ops.iter()
            .filter(|o| !matches!(o.body.kind, BodyKind::None))
            .count(),
        60
    );
    assert_eq!(
        ops.iter()
            .filter(|o| o.path_params.is_empty()
                && o.query.is_empty()
                && matches!(o.body.kind, BodyKind::None))
            .count(),
        33
    );

    // Collections.
    let shapes = count_by(|o| o.collection.to_string());
    assert_eq!(shapes["list/unpaginated/total"], 39);
    assert_eq!(shapes["list/endpoint-defined/no-total"], 16);
    assert_eq!(shapes["list/endpoint-defined/total"], 2);
    assert_eq!(
        ops.iter()
            .filter(|o| matches!(o.collection, CollectionShape::PageObject { .. }))
            .count(),
        2
    );
    assert_eq!(
        catalogue().get("transfer.history").unwrap().collection,
        CollectionShape::PageObject {
            items: "data.list",
            total: "data.total"
        }
    );
    // Legacy full-list pagination goes with the unpaginated list shape.
    for op in ops.iter().filter(|o| o.legacy_pagination) {
        assert_eq!(
            op.collection,
            CollectionShape::List {
                paging: Paging::Unpaginated,
                total: true
            },
            "{}",
            op.id
        );
    }
    assert_eq!(ops.iter().filter(|o| o.legacy_pagination).count(), 39);
}

#[test]
fn unknown_policy_rows_get_the_documented_defaults() {
    let unknown: Vec<&Operation> = catalogue()
        .operations()
        .iter()
        .filter(|o| !known(o))
        .collect();
    let ids: Vec<&str> = unknown.iter().map(|o| o.id).collect();
    assert_eq!(
        ids,
        [
            "plugin.clone.restorable",
            "plugin.default_target.clear",
            "plugin.default_target.set",
            "plugin.instance.purge",
            "plugin.instance.set_enabled",
            "plugin.loglevel.clear",
            "plugin.loglevel.get",
            "plugin.loglevel.set",
        ]
    );
    for op in unknown {
        assert_eq!(
            (op.role, op.confirmation, op.recovery, op.sensitivity),
            (
                Role::SystemAdmin,
                Confirmation::Required,
                Recovery::None,
                Sensitivity::Unknown
            ),
            "{}",
            op.id
        );
        assert!(op.role.requires_admin());
    }
}

#[test]
fn representative_rows_are_typed() {
    let cat = catalogue();
    let list = cat.get("subscription.list").unwrap();
    assert_eq!(
        (list.method, list.path, list.effect, list.role),
        (
            HttpMethod::Get,
            "/api/v1/subscribe/",
            EffectClass::SafeRead,
            Role::User
        )
    );
    assert!(list.legacy_pagination && !list.role.requires_admin());
    let add = cat.get("download.add").unwrap();
    assert_eq!(
        (add.effect, add.confirmation, add.recovery),
        (
            EffectClass::ExternalSideEffect,
            Confirmation::Required,
            Recovery::Idempotent
        )
    );
    assert!(matches!(
        add.body.kind,
        BodyKind::Object {
            model: Some("Body_add_api_v1_download_add_post"),
            ..
        }
    ));
    assert!(add.body.required);
    let credits = cat.get("media.person.credits").unwrap();
    assert_eq!(
        credits.path_param("source").unwrap().kind,
        FieldKind::Enum(vec!["douban", "tmdb", "bangumi", "anilist"])
    );
    // The versions' extra `subscription.find` query fields are accepted.
    let find = cat.get("subscription.find").unwrap();
    let names: Vec<&str> = find.query.iter().map(|f| f.name).collect();
    assert_eq!(
        names,
        [
            "media_source",
            "music_type",
            "season",
            "title",
            "mtype",
            "year"
        ]
    );
    assert_eq!(
        cat.get("system.upgrade.dev").unwrap().body.kind,
        BodyKind::Literal("dev")
    );
    assert!(cat.get("search.torrents").unwrap().is_long_running());
    assert!(!list.is_long_running());
    assert_eq!(
        cat.get("scheduler.run").unwrap().success_outcome(),
        Outcome::Pending
    );
    assert_eq!(list.success_outcome(), Outcome::Succeeded);
    // Endpoint-defined paging gets the convention's ranges unless it declares its own.
    let history = cat.get("download.history.list").unwrap();
    let count = history.query_field("count").unwrap();
    assert_eq!(
        (count.minimum, count.maximum, count.default.clone()),
        (Some(1), Some(200), Some(json!(30)))
    );
    let title_search = cat
        .get("search.title")
        .unwrap()
        .query_field("page")
        .unwrap();
    assert_eq!(
        (title_search.minimum, title_search.default.clone()),
        (Some(0), Some(json!(0)))
    );
}

#[test]
fn the_input_contract_reads_like_a_schema() {
    let c = serde_json::to_value(catalogue().get("site.list").unwrap().input_contract()).unwrap();
    assert_eq!(
        c,
        json!({
            "operation_id": "site.list",
            "method": "GET",
            "path": "/api/v1/site/agent",
            "allowed_arguments": ["query"],
            "required_arguments": [],
            "query": {
                "type": "object",
                "fields": {
                    "page": {"type": "integer", "minimum": 1},
                    "count": {"type": "integer", "minimum": 1, "maximum": 200},
                    "name": {"type": "string"},
                    "status": {"type": "string", "enum": ["active", "inactive", "all"], "default": "all"},
                },
                "additional_properties": false,
                "description": "page (>= 1) and count (1..200) are optional: omit both for the full list; give either to page, the other then defaults (page 1, count 50)",
            },
            "body": {"type": "null"},
        })
    );
    let c = serde_json::to_value(catalogue().get("slash.run").unwrap().input_contract()).unwrap();
    assert_eq!(
        c,
        json!({
            "operation_id": "slash.run",
            "method": "POST",
            "path": "/api/v1/message/agent/commands/run",
            "allowed_arguments": ["body"],
            "required_arguments": ["body"],
            "body": {
                "type": "object",
                "model": "$AgentCommandRunRequest",
                "required": ["command"],
                "fields": {"command": {"type": "string"}},
                "body_required": true,
            },
        })
    );
    let c = serde_json::to_value(
        catalogue()
            .get("subscription.get")
            .unwrap()
            .input_contract(),
    )
    .unwrap();
    assert_eq!(
        c["path_params"],
        json!({
            "type": "object",
            "required": ["subscribe_id"],
            "fields": {"subscribe_id": {"type": "integer"}},
            "additional_properties": false,
        })
    );
}

#[test]
fn unknown_ids_get_close_matches() {
    let cat = catalogue();
    assert_eq!(cat.suggest("subscribe.list")[0], "subscription.list");
    assert_eq!(cat.suggest("downloads.add")[0], "download.add");
    assert_eq!(cat.suggest("subscription.lst")[0], "subscription.list");
    assert!(cat.suggest("subscribe.list").len() <= 5);
    assert!(cat.suggest("weather.forecast.tomorrow").is_empty());
    let err = cat.lookup("subscribe.add").unwrap_err();
    let GatewayError::UnknownOperation { id, suggestions } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(id, "subscribe.add");
    assert_eq!(suggestions[0], "subscription.add");
    assert!(err.to_string().starts_with(
        "unknown MoviePilot operation `subscribe.add`; did you mean subscription.add"
    ));
    assert_eq!(err.outcome(), Outcome::Failed);
}

#[test]
fn malformed_catalogues_are_refused_with_the_line() {
    let err = Catalogue::parse(concat!(
        "operation_id\tcategory\thttp_method\tpath_template\teffect\trequired_role\tconfirmation\trecovery\tresult_sensitivity\tcollection_shape\tpath_params\tquery\tbody\tnotes\n",
        "a.get\ta\tGET\t/api/v1/a/{id}\tsafe_read\tuser\tnone\tnone\tnormal\t-\tother*:str\t-\t-\t-\n"
    ))
    .unwrap_err();
    assert_eq!((err.line, err.column), (2, "path_params"));
    let err = Catalogue::parse(concat!(
        "operation_id\tcategory\thttp_method\tpath_template\teffect\trequired_role\tconfirmation\trecovery\tresult_sensitivity\tcollection_shape\tpath_params\tquery\tbody\tnotes\n",
        "a.get\ta\tGET\t/api/v1/a\tsafe_read\tuser\tnone\tnone\tnormal\t-\t-\t-\t-\t-\n",
        "a.get\ta\tGET\t/api/v1/b\tsafe_read\tuser\tnone\tnone\tnormal\t-\t-\t-\t-\t-\n"
    ))
    .unwrap_err();
    assert_eq!((err.line, err.column), (3, "operation_id"));
    assert!(err.to_string().contains("duplicate operation id `a.get`"));
    assert!(Catalogue::parse("not a header\n").is_err());
}

/// A value that exercises encoding for string placeholders; valid values for the rest.
fn sample(kind: &FieldKind, name: &str) -> Value {
    match kind {
        FieldKind::Integer => json!(7),
        FieldKind::Number => json!(1.5),
        FieldKind::Boolean => json!(true),
        FieldKind::Enum(values) => json!(values[0]),
        FieldKind::Const(c) => json!(c),
        FieldKind::Array(_) => json!(["x"]),
        FieldKind::String | FieldKind::Named(_) if name == "source" => json!("tmdb"),
        FieldKind::String | FieldKind::Named(_) => json!("v 1:二?"),
    }
}

fn wire(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The smallest valid call an operation's contract allows, and the request target the server
/// should see for it (computed here from the template, independently of the crate).
fn minimal_call(op: &Operation) -> (Value, Value, Value, String) {
    let mut path_params = serde_json::Map::new();
    let mut target = op.path.to_owned();
    for f in &op.path_params {
        let v = sample(&f.kind, f.name);
        target = target.replace(&format!("{{{}}}", f.name), &encode_segment(&wire(&v)));
        path_params.insert(f.name.into(), v);
    }
    let mut query = serde_json::Map::new();
    let mut pairs = Vec::new();
    for f in &op.query {
        if let FieldKind::Const(c) = f.kind {
            // Left out on purpose: a constant is filled in.
            pairs.push(format!("{}={}", f.name, encode(c)));
        } else if f.required {
            let mut v = sample(&f.kind, f.name);
            if let (Some(min), Value::Number(_)) = (f.minimum, &v) {
                v = json!(min.max(1));
            }
            pairs.push(format!("{}={}", f.name, encode(&wire(&v))));
            query.insert(f.name.into(), v);
        }
    }
    if !pairs.is_empty() {
        target.push('?');
        target.push_str(&pairs.join("&"));
    }
    let body = if !op.body.required {
        Value::Null
    } else {
        match &op.body.kind {
            BodyKind::None => Value::Null,
            BodyKind::Object {
                fields,
                min_properties,
                ..
            } => {
                let mut m = serde_json::Map::new();
                for f in fields.iter().filter(|f| f.required) {
                    m.insert(f.name.into(), sample(&f.kind, f.name));
                }
                if m.len() < *min_properties {
                    m.insert("enabled".into(), json!(true));
                }
                Value::Object(m)
            }
            BodyKind::Array { .. } | BodyKind::ArrayOrObject { .. } => json!([]),
            BodyKind::Literal(s) => json!(s),
        }
    };
    (
        Value::Object(path_params),
        Value::Object(query),
        body,
        target,
    )
}

/// The catalogue acceptance test: all 229 operations, prepared from their contracts and sent
/// over real HTTP, arrive with the catalogue's method, the filled route and the body sent.
/// An invalid variant of each is refused before anything is sent.
#[tokio::test]
async fn every_operation_reaches_the_server_with_its_method_and_route() {
    let server = serve(Arc::new(|seen: &common::Seen| {
        common::status_response(
            501,
            json!({"success": false, "message": format!("not served: {}", seen.target)}),
        )
    }))
    .await;
    let client = common::client(&server.base_url());
    let ctx = common::ctx();
    let mut reached = 0;
    for op in catalogue().operations() {
        let (path_params, query, body, target) = minimal_call(op);

        let mut bad_query = query.as_object().unwrap().clone();
        bad_query.insert("zz_not_declared".into(), json!(1));
        let refused = op
            .prepare(&path_params, &Value::Object(bad_query), &body)
            .unwrap_err();
        assert!(
            matches!(&refused, InputError::UnknownFields { location: Location::Query, names, .. } if names == &["zz_not_declared"]),
            "{}: {refused}",
            op.id
        );
        assert!(
            server.seen().is_empty(),
            "{}: a refused call sent nothing",
            op.id
        );

        let prepared = op
            .prepare(&path_params, &query, &body)
            .unwrap_or_else(|e| panic!("{}: minimal call refused: {e}", op.id));
        assert_eq!(prepared.path_and_query(), target, "{}", op.id);
        let err = client.send(&prepared, &ctx).await.unwrap_err();
        let GatewayError::Api(api) = &err else {
            panic!("{}: {err:?}", op.id)
        };
        assert_eq!(api.status, 501);
        let seen = server.take();
        assert_eq!(seen.len(), 1, "{}", op.id);
        assert_eq!(
            seen[0].request_line(),
            format!("{} {}", op.method, target),
            "{}",
            op.id
        );
        if body.is_null() {
            assert!(seen[0].body.is_empty(), "{}", op.id);
        } else {
            let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
            assert_eq!(sent, body, "{}", op.id);
            assert_eq!(seen[0].header("content-type"), Some("application/json"));
        }
        reached += 1;
    }
    assert_eq!(reached, 229);
}
