//! Input validation: one test per refusal kind, each with the exact error a model reads;
//! pagination defaults, URL-encoding, GET-body merging and canonical arguments.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_gateway::{
    Catalogue, InputError, Location, Operation, PreparedRequest, canonical_json, catalogue,
};
use serde_json::{Value, json};
use std::sync::LazyLock;

fn op(id: &str) -> &'static Operation {
    catalogue().get(id).unwrap()
}

fn prepare(
    id: &str,
    path: Value,
    query: Value,
    body: Value,
) -> Result<PreparedRequest, InputError> {
    op(id).prepare(&path, &query, &body)
}

fn refusal(id: &str, path: Value, query: Value, body: Value) -> (InputError, String) {
    let e = prepare(id, path, query, body).unwrap_err();
    let text = e.to_string();
    assert_eq!(e.operation_id(), id);
    (e, text)
}

fn pairs(r: &PreparedRequest) -> Vec<(&str, &str)> {
    r.query_pairs()
        .iter()
        .map(|(k, v)| (k.as_ref(), v.as_str()))
        .collect()
}

#[test]
fn unknown_query_fields_are_refused_by_name() {
    let (e, text) = refusal(
        "subscription.list",
        Value::Null,
        json!({"foo": 1, "bar": 2, "page": 1}),
        Value::Null,
    );
    assert_eq!(
        e,
        InputError::UnknownFields {
            operation_id: "subscription.list",
            location: Location::Query,
            names: vec!["bar".into(), "foo".into()],
            allowed: vec!["page", "count"],
        }
    );
    assert_eq!(
        text,
        "subscription.list: unknown query fields `bar`, `foo`; allowed query fields: `page`, `count`"
    );
    let (_, text) = refusal(
        "subscription.get",
        json!({"subscribe_id": 1}),
        json!({"page": 1}),
        Value::Null,
    );
    assert_eq!(
        text,
        "subscription.get: unknown query field `page`; this operation takes no query fields"
    );
}

#[test]
fn a_missing_path_param_is_named_with_the_route() {
    let (e, text) = refusal("subscription.get", json!({}), Value::Null, Value::Null);
    assert_eq!(
        e,
        InputError::MissingPathParam {
            operation_id: "subscription.get",
            name: "subscribe_id",
            path: "/api/v1/subscribe/{subscribe_id}",
        }
    );
    assert_eq!(
        text,
        "subscription.get: missing path parameter `subscribe_id` (route /api/v1/subscribe/{subscribe_id}); give it in path_params"
    );
    // Null counts as missing, like MoviePilot's executor; an empty value is not a segment.
    let (e, _) = refusal(
        "config.public.get",
        json!({"key": null}),
        Value::Null,
        Value::Null,
    );
    assert!(matches!(
        e,
        InputError::MissingPathParam { name: "key", .. }
    ));
    for v in [json!(""), json!("  ")] {
        let (e, text) = refusal(
            "config.public.get",
            json!({"key": v}),
            Value::Null,
            Value::Null,
        );
        assert_eq!(
            e,
            InputError::InvalidPathParameter {
                operation_id: "config.public.get",
                name: "key",
                reason: "is empty",
            }
        );
        assert_eq!(e.code(), "invalid_path_parameter");
        assert!(
            text.starts_with("config.public.get: path parameter `key` is empty;"),
            "{text}"
        );
    }
}

#[test]
fn extra_path_params_are_refused() {
    let (e, text) = refusal(
        "subscription.get",
        json!({"subscribe_id": 1, "id": 2}),
        Value::Null,
        Value::Null,
    );
    assert_eq!(
        e,
        InputError::UnknownFields {
            operation_id: "subscription.get",
            location: Location::PathParam,
            names: vec!["id".into()],
            allowed: vec!["subscribe_id"],
        }
    );
    assert_eq!(
        text,
        "subscription.get: unknown path parameter `id`; allowed path parameters: `subscribe_id`"
    );
    let (_, text) = refusal(
        "subscription.list",
        json!({"id": 2}),
        Value::Null,
        Value::Null,
    );
    assert_eq!(
        text,
        "subscription.list: unknown path parameter `id`; this operation takes no path parameters"
    );
}

#[test]
fn source_must_be_an_allowed_provider() {
    let (e, text) = refusal(
        "media.person.credits",
        json!({"source": "imdb", "person_id": 3}),
        Value::Null,
        Value::Null,
    );
    assert_eq!(
        e,
        InputError::NotAllowed {
            operation_id: "media.person.credits",
            location: Location::PathParam,
            name: "source",
            allowed: vec!["douban", "tmdb", "bangumi", "anilist"],
            got: "imdb".into(),
        }
    );
    assert_eq!(
        text,
        "media.person.credits: path parameter `source` must be one of douban, tmdb, bangumi, anilist; got \"imdb\""
    );
    // A route traversal attempt is not a source either.
    assert!(
        refusal(
            "media.person.credits",
            json!({"source": "../system", "person_id": 3}),
            Value::Null,
            Value::Null
        )
        .1
        .contains("must be one of")
    );
    let ok = prepare(
        "media.person.credits",
        json!({"source": "douban", "person_id": "3"}),
        Value::Null,
        Value::Null,
    )
    .unwrap();
    assert_eq!(ok.path(), "/api/v1/douban/person/credits/3");
}

/// No catalogue operation has an `{action}` placeholder today; MoviePilot's executor checks one
/// whenever a route has it, and so does the gateway, whatever the field's declared type.
static ACTION_CATALOGUE: LazyLock<Catalogue> = LazyLock::new(|| {
    Catalogue::parse(concat!(
        "operation_id\tcategory\thttp_method\tpath_template\teffect\trequired_role\tconfirmation\trecovery\tresult_sensitivity\tcollection_shape\tpath_params\tquery\tbody\tnotes\n",
        "download.control\tdownload\tPUT\t/api/v1/download/{hash}/{action}\texternal_side_effect\tuser\trequired\treconcile\tnormal\t-\thash*:str; action*:str\t-\t-\t-\n",
        "media.any_source\tmedia\tGET\t/api/v1/{source}/x\tsafe_read\tuser\tnone\tnone\tnormal\t-\tsource*:str\t-\t-\t-\n",
    ))
    .unwrap()
});

#[test]
fn action_must_be_start_or_stop() {
    let control = ACTION_CATALOGUE.get("download.control").unwrap();
    let e = control
        .prepare(
            &json!({"hash": "ab", "action": "delete"}),
            &Value::Null,
            &Value::Null,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "download.control: path parameter `action` must be one of start, stop; got \"delete\""
    );
    let ok = control
        .prepare(
            &json!({"hash": "ab", "action": "Start"}),
            &Value::Null,
            &Value::Null,
        )
        .unwrap();
    assert_eq!(ok.path(), "/api/v1/download/ab/start");
    let any = ACTION_CATALOGUE.get("media.any_source").unwrap();
    assert!(
        any.prepare(&json!({"source": "imdb"}), &Value::Null, &Value::Null)
            .is_err()
    );
}

#[test]
fn a_body_where_none_is_declared_is_refused() {
    let (e, text) = refusal(
        "subscription.delete",
        json!({"subscribe_id": 4}),
        Value::Null,
        json!({"id": 4}),
    );
    assert_eq!(
        e,
        InputError::BodyNotAllowed {
            operation_id: "subscription.delete"
        }
    );
    assert_eq!(
        text,
        "subscription.delete takes no body; leave body out or null"
    );
    // `null` is no body.
    assert!(
        prepare(
            "subscription.delete",
            json!({"subscribe_id": 4}),
            Value::Null,
            Value::Null
        )
        .is_ok()
    );
}

#[test]
fn a_required_body_must_be_given() {
    let (e, text) = refusal("subscription.add", Value::Null, Value::Null, Value::Null);
    assert_eq!(
        e,
        InputError::BodyRequired {
            operation_id: "subscription.add",
            expected: "a JSON object ($Subscribe)".into(),
        }
    );
    assert_eq!(
        text,
        "subscription.add requires a body: a JSON object ($Subscribe)"
    );
    // Optional bodies may be left out.
    assert!(
        prepare(
            "system.update.download",
            Value::Null,
            Value::Null,
            Value::Null
        )
        .is_ok()
    );
    assert_eq!(
        refusal("system.upgrade.dev", Value::Null, Value::Null, Value::Null).1,
        "system.upgrade.dev requires a body: the JSON string \"dev\""
    );
    assert_eq!(
        refusal(
            "system.upgrade.dev",
            Value::Null,
            Value::Null,
            json!("prod")
        )
        .1,
        "system.upgrade.dev: body must be the JSON string \"dev\", got a string"
    );
    assert!(prepare("system.upgrade.dev", Value::Null, Value::Null, json!("dev")).is_ok());
}

#[test]
fn arrays_and_objects_are_not_interchangeable() {
    let (e, text) = refusal(
        "subscription.add",
        Value::Null,
        Value::Null,
        json!([{"name": "三体"}]),
    );
    assert_eq!(
        e,
        InputError::BodyWrongShape {
            operation_id: "subscription.add",
            expected: "a JSON object ($Subscribe)".into(),
            got: "an array",
        }
    );
    assert_eq!(
        text,
        "subscription.add: body must be a JSON object ($Subscribe), got an array"
    );
    let (_, text) = refusal(
        "site.priorities.update",
        Value::Null,
        Value::Null,
        json!({"id": 1}),
    );
    assert_eq!(
        text,
        "site.priorities.update: body must be a JSON array of $SitePriorityUpdate, got an object"
    );
    // Either is fine where both are declared.
    for body in [json!(["a"]), json!({"plugins": ["a"]})] {
        assert!(
            prepare(
                "plugin.folder.plugins.update",
                json!({"folder_name": "f"}),
                Value::Null,
                body
            )
            .is_ok()
        );
    }
    // Known required body fields are checked; free-form objects need their minimum.
    assert_eq!(
        refusal("slash.run", Value::Null, Value::Null, json!({})).1,
        "slash.run: body is missing required field `command`"
    );
    assert_eq!(
        refusal(
            "slash.run",
            Value::Null,
            Value::Null,
            json!({"command": ["/x"]})
        )
        .1,
        "slash.run: body field `command` must be a string, got an array"
    );
    let r = prepare(
        "transfer.history.redo_batch",
        Value::Null,
        Value::Null,
        json!({"history_ids": ["3", 4], "x": 1}),
    )
    .unwrap();
    assert_eq!(r.body(), Some(&json!({"history_ids": [3, 4], "x": 1})));
    assert_eq!(
        refusal(
            "plugin.config.update",
            json!({"plugin_id": "p"}),
            Value::Null,
            json!({})
        )
        .1,
        "plugin.config.update: body must have at least 1 field"
    );
}

#[test]
fn page_zero_is_refused() {
    let (e, text) = refusal(
        "subscription.list",
        Value::Null,
        json!({"page": 0}),
        Value::Null,
    );
    assert_eq!(
        e,
        InputError::OutOfRange {
            operation_id: "subscription.list",
            location: Location::Query,
            name: "page",
            minimum: Some(1),
            maximum: None,
            got: "0".into(),
        }
    );
    assert_eq!(
        text,
        "subscription.list: query field `page` must be at least 1, got 0"
    );
    // Endpoints whose pages start at 0 keep 0.
    assert!(prepare("search.title", Value::Null, json!({"page": 0}), Value::Null).is_ok());
}

#[test]
fn count_above_200_is_refused() {
    let (e, text) = refusal(
        "subscription.list",
        Value::Null,
        json!({"count": 201}),
        Value::Null,
    );
    assert!(matches!(
        e,
        InputError::OutOfRange {
            name: "count",
            minimum: Some(1),
            maximum: Some(200),
            ..
        }
    ));
    assert_eq!(
        text,
        "subscription.list: query field `count` must be between 1 and 200, got 201"
    );
    assert_eq!(
        refusal(
            "download.history.list",
            Value::Null,
            json!({"count": 500}),
            Value::Null
        )
        .1,
        "download.history.list: query field `count` must be between 1 and 200, got 500"
    );
    assert_eq!(
        refusal(
            "music.explore",
            Value::Null,
            json!({"count": 101}),
            Value::Null
        )
        .1,
        "music.explore: query field `count` must be between 1 and 100, got 101"
    );
}

#[test]
fn enum_values_are_checked() {
    let (e, text) = refusal(
        "site.list",
        Value::Null,
        json!({"status": "enabled"}),
        Value::Null,
    );
    assert_eq!(
        e,
        InputError::NotAllowed {
            operation_id: "site.list",
            location: Location::Query,
            name: "status",
            allowed: vec!["active", "inactive", "all"],
            got: "enabled".into(),
        }
    );
    assert_eq!(
        text,
        "site.list: query field `status` must be one of active, inactive, all; got \"enabled\""
    );
    assert_eq!(
        refusal(
            "plugin.installed",
            Value::Null,
            json!({"state": "market"}),
            Value::Null
        )
        .1,
        "plugin.installed: query field `state` must be \"installed\", got \"market\""
    );
}

#[test]
fn wrong_types_are_refused() {
    let (e, text) = refusal(
        "subscription.list",
        Value::Null,
        json!({"page": "two"}),
        Value::Null,
    );
    assert_eq!(
        e,
        InputError::WrongType {
            operation_id: "subscription.list",
            location: Location::Query,
            name: "page",
            expected: "an integer".into(),
            got: "a string",
        }
    );
    assert_eq!(
        text,
        "subscription.list: query field `page` must be an integer, got a string"
    );
    assert_eq!(
        refusal(
            "config.system.get",
            Value::Null,
            json!({"show_secrets": "yes"}),
            Value::Null
        )
        .1,
        "config.system.get: query field `show_secrets` must be a boolean (true or false), got a string"
    );
    assert_eq!(
        refusal(
            "subscription.get",
            json!({"subscribe_id": true}),
            Value::Null,
            Value::Null
        )
        .1,
        "subscription.get: path parameter `subscribe_id` must be an integer, got a boolean"
    );
    assert_eq!(
        refusal(
            "media.search",
            Value::Null,
            json!({"title": {"zh": "三体"}}),
            Value::Null
        )
        .1,
        "media.search: query field `title` must be a string, got an object"
    );
    assert_eq!(
        refusal("subscription.list", json!([1]), Value::Null, Value::Null).1,
        "subscription.list: `path_params` must be a JSON object of named values, got an array"
    );
    // Lenient where the meaning is plain: digit strings for integers, integers for strings,
    // "true"/"false" for booleans, a single value for an array field.
    let r = prepare(
        "subscription.get",
        json!({"subscribe_id": "12"}),
        Value::Null,
        Value::Null,
    )
    .unwrap();
    assert_eq!(r.path(), "/api/v1/subscribe/12");
    let r = prepare(
        "subscription.find",
        json!({"media_id": 12345}),
        json!({"media_source": "tmdb", "season": "2"}),
        Value::Null,
    )
    .unwrap();
    assert_eq!(
        r.path_and_query(),
        "/api/v1/subscribe/media/12345?media_source=tmdb&season=2"
    );
    let r = prepare(
        "config.system.get",
        Value::Null,
        json!({"show_secrets": "FALSE"}),
        Value::Null,
    )
    .unwrap();
    assert_eq!(pairs(&r), [("show_secrets", "false")]);
    let r = prepare(
        "filter.builtin",
        Value::Null,
        json!({"rule_ids": "a"}),
        Value::Null,
    )
    .unwrap();
    assert_eq!(r.path_and_query(), "/api/v1/rule/builtin?rule_ids=a");
}

#[test]
fn missing_required_query_fields_are_named_and_constants_are_filled_in() {
    assert_eq!(
        refusal(
            "media.search",
            Value::Null,
            json!({"type": "media"}),
            Value::Null
        )
        .1,
        "media.search: missing required query field `title`"
    );
    let r = prepare("plugin.installed", Value::Null, Value::Null, Value::Null).unwrap();
    assert_eq!(r.path_and_query(), "/api/v1/plugin/?state=installed");
    let r = prepare(
        "plugin.market",
        Value::Null,
        json!({"page": 2}),
        Value::Null,
    )
    .unwrap();
    assert_eq!(
        r.path_and_query(),
        "/api/v1/plugin/?state=market&page=2&count=50"
    );
    let r = prepare(
        "media.person.search",
        Value::Null,
        json!({"title": "刘慈欣"}),
        Value::Null,
    )
    .unwrap();
    assert_eq!(pairs(&r), [("title", "刘慈欣"), ("type", "person")]);
}

#[test]
fn legacy_pagination_defaults_the_other_half() {
    let r = prepare("subscription.list", Value::Null, Value::Null, Value::Null).unwrap();
    assert_eq!(r.path_and_query(), "/api/v1/subscribe/");
    let r = prepare(
        "subscription.list",
        Value::Null,
        json!({"page": 2}),
        Value::Null,
    )
    .unwrap();
    assert_eq!(pairs(&r), [("page", "2"), ("count", "50")]);
    let r = prepare(
        "subscription.list",
        Value::Null,
        json!({"count": 10}),
        Value::Null,
    )
    .unwrap();
    assert_eq!(pairs(&r), [("page", "1"), ("count", "10")]);
    let r = prepare(
        "subscription.list",
        Value::Null,
        json!({"count": 10, "page": null}),
        Value::Null,
    )
    .unwrap();
    assert_eq!(pairs(&r), [("page", "1"), ("count", "10")]);
    // Endpoint-defined paging is left to the endpoint (its defaults are not sent).
    let r = prepare(
        "download.history.list",
        Value::Null,
        json!({"page": 3}),
        Value::Null,
    )
    .unwrap();
    assert_eq!(pairs(&r), [("page", "3")]);
    assert_eq!(
        r.canonical_arguments(),
        r#"{"body":null,"operation_id":"download.history.list","path_params":{},"query":{"count":30,"page":3}}"#
    );
}

#[test]
fn placeholders_are_percent_encoded() {
    // One segment each: the URL library's path-segment encoding (`?`, `#`, `%`, space, `\`,
    // non-ASCII encoded; `:`, `&`, `=` kept, as a path allows them).
    let r = prepare(
        "config.public.get",
        json!({"key": "a:b c中文?x=1&y#z%"}),
        Value::Null,
        Value::Null,
    )
    .unwrap();
    assert_eq!(
        r.path(),
        "/api/v1/system/setting/public/a:b%20c%E4%B8%AD%E6%96%87%3Fx=1&y%23z%25"
    );
    assert_eq!(r.path_values(), ["a:b c中文?x=1&y#z%"]);
    assert_eq!(r.route(), "/api/v1/system/setting/public/{key}");
    let r = prepare(
        "media.search",
        Value::Null,
        json!({"title": "三体 S01&x=1"}),
        Value::Null,
    )
    .unwrap();
    assert_eq!(
        r.path_and_query(),
        "/api/v1/media/search?title=%E4%B8%89%E4%BD%93%20S01%26x%3D1"
    );
    let r = prepare(
        "media.search",
        Value::Null,
        json!({"title": "x", "media_source": ["tmdb", "douban"]}),
        Value::Null,
    )
    .unwrap();
    assert_eq!(
        r.path_and_query(),
        "/api/v1/media/search?title=x&media_source=tmdb&media_source=douban"
    );
}

#[test]
fn a_get_body_is_merged_into_the_query() {
    let r = prepare(
        "subscription.list",
        Value::Null,
        json!({"page": 1}),
        json!({"count": 5}),
    )
    .unwrap();
    assert_eq!(pairs(&r), [("page", "1"), ("count", "5")]);
    assert_eq!(r.body(), None);
    // The merged keys are validated like query keys.
    assert_eq!(
        refusal(
            "subscription.list",
            Value::Null,
            Value::Null,
            json!({"limit": 5})
        )
        .1,
        "subscription.list: unknown query field `limit`; allowed query fields: `page`, `count`"
    );
    assert_eq!(
        refusal(
            "subscription.list",
            Value::Null,
            json!({"page": 1}),
            json!({"page": 2})
        )
        .1,
        "subscription.list: `page` is given in both query and body with different values; give it once, in query"
    );
    assert!(
        prepare(
            "subscription.list",
            Value::Null,
            json!({"page": 1}),
            json!({"page": 1})
        )
        .is_ok()
    );
    assert_eq!(
        refusal("subscription.list", Value::Null, Value::Null, json!([1])).1,
        "subscription.list is a GET operation: its body, if given, must be a JSON object whose keys are used as query fields, got an array"
    );
}

#[test]
fn canonical_arguments_apply_defaults_and_identify_the_call() {
    let plain = prepare("config.system.get", Value::Null, json!({}), Value::Null).unwrap();
    let explicit = prepare(
        "config.system.get",
        Value::Null,
        json!({"group": "all", "show_secrets": "false"}),
        Value::Null,
    )
    .unwrap();
    assert_eq!(
        plain.canonical_arguments(),
        r#"{"body":null,"operation_id":"config.system.get","path_params":{},"query":{"group":"all","show_secrets":false}}"#
    );
    assert_eq!(plain.canonical_arguments(), explicit.canonical_arguments());
    assert_eq!(plain.arguments_digest(), explicit.arguments_digest());
    assert_eq!(plain.arguments_digest().len(), 64);
    // What is sent stays what was asked.
    assert!(plain.query_pairs().is_empty());

    let other = prepare(
        "config.system.get",
        Value::Null,
        json!({"show_secrets": true}),
        Value::Null,
    )
    .unwrap();
    assert_ne!(plain.arguments_digest(), other.arguments_digest());

    // Body keys are sorted, non-ASCII kept; a digit string and a number are the same id.
    let a = prepare(
        "subscription.add",
        Value::Null,
        Value::Null,
        json!({"name": "三体", "media_source": "tmdb", "media_id": "204541", "season": 1}),
    )
    .unwrap();
    assert_eq!(
        a.canonical_arguments(),
        r#"{"body":{"media_id":"204541","media_source":"tmdb","name":"三体","season":1},"operation_id":"subscription.add","path_params":{},"query":{}}"#
    );
    let g1 = prepare(
        "subscription.get",
        json!({"subscribe_id": 3}),
        Value::Null,
        Value::Null,
    )
    .unwrap();
    let g2 = prepare(
        "subscription.get",
        json!({"subscribe_id": "3"}),
        Value::Null,
        Value::Null,
    )
    .unwrap();
    assert_eq!(g1.arguments_digest(), g2.arguments_digest());
    assert_eq!(
        canonical_json(&json!({"b": 1.5, "a": [true, null]})),
        r#"{"a":[true,null],"b":1.5}"#
    );
}
