//! Requests that cannot change route (issue 24 item 1): every path parameter is one segment,
//! `.`/`..`/empty values and values with `/` are refused before anything is sent, the URL is the
//! parsed base plus segments, and redirects are never followed — not to another path, and never
//! with the bearer to another origin.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use common::{Seen, TestServer, client, ctx, serve};
use mpa_gateway::{GatewayError, InputError, Operation, PreparedRequest, catalogue};
use mpa_protocol::Outcome;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::sync::Arc;

fn op(id: &str) -> &'static Operation {
    catalogue().get(id).unwrap()
}

fn prepare(id: &str, path: Value) -> Result<PreparedRequest, InputError> {
    op(id).prepare(&path, &Value::Null, &Value::Null)
}

/// Decodes `%XX` escapes, independently of the crate.
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Whether a request target's path is exactly `template` filled with `values`, segment by
/// segment (checked here without the crate's route code).
fn target_matches(target: &str, template: &str, values: &[String]) -> bool {
    let path = target.split('?').next().unwrap();
    let sent: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let want: Vec<&str> = template.trim_start_matches('/').split('/').collect();
    if sent.len() != want.len() {
        return false;
    }
    let mut values = values.iter();
    sent.iter().zip(&want).all(|(s, w)| {
        if w.starts_with('{') {
            let v = values.next().unwrap();
            !s.is_empty() && *s != "." && *s != ".." && decode(s).as_deref() == Some(v.as_str())
        } else {
            s == w
        }
    })
}

/// A stand-in that answers every request with `status` and a `Location` pointing at the same
/// path with a trailing slash (what FastAPI does for a route registered without one), or at
/// `location` when given.
async fn redirecting(status: u16, location: Option<String>) -> TestServer {
    serve(Arc::new(move |seen: &Seen| -> Response {
        let to = location
            .clone()
            .unwrap_or_else(|| format!("{}/", seen.target.split('?').next().unwrap()));
        let mut r = (StatusCode::from_u16(status).unwrap(), "").into_response();
        r.headers_mut()
            .insert(header::LOCATION, HeaderValue::from_str(&to).unwrap());
        r
    }))
    .await
}

fn strings_of(parts: Vec<String>) -> String {
    parts.concat()
}

/// Parameter text built from the pieces that have changed routes elsewhere: dots, slashes,
/// percent forms of both, backslashes, CRLF, query and fragment marks, Unicode (full-width dots
/// too), and any character at all.
fn nasty() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just(".".to_string()),
        Just("..".to_string()),
        Just("/".to_string()),
        Just("%2e".to_string()),
        Just("%2E%2E".to_string()),
        Just("%2F".to_string()),
        Just("%252F".to_string()),
        Just("%".to_string()),
        Just("\\".to_string()),
        Just("\r\n".to_string()),
        Just("?".to_string()),
        Just("#".to_string()),
        Just(" ".to_string()),
        Just(";".to_string()),
        Just("．．".to_string()),
        Just("三体".to_string()),
        Just("tmdb:1".to_string()),
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..6).prop_map(strings_of)
}

/// Operations with string path parameters and no required body (integers are refused as wrong
/// types before any route is built, which the catalogue tests cover).
fn string_routes() -> Vec<&'static Operation> {
    catalogue()
        .operations()
        .iter()
        .filter(|o| {
            !o.body.required
                && !o.path_params.is_empty()
                && o.path_params
                    .iter()
                    .all(|f| matches!(f.kind, mpa_gateway::FieldKind::String))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Whatever the values, a call is either refused before anything is built, or its URL's
    /// path is exactly its template with each value as one segment.
    #[test]
    fn the_outgoing_path_always_matches_its_template(
        pick in any::<prop::sample::Index>(),
        values in prop::collection::vec(nasty(), 3),
    ) {
        let routes = string_routes();
        let op = routes[pick.index(routes.len())];
        let mut params = Map::new();
        for (f, v) in op.path_params.iter().zip(&values) {
            params.insert(f.name.into(), json!(v));
        }
        let client = client("http://127.0.0.1:9/prefix");
        match op.prepare(&Value::Object(params), &required_query(op), &Value::Null) {
            Err(InputError::InvalidPathParameter { .. }) => {
                let refused = values.iter().take(op.path_params.len()).any(|v| {
                    v.trim().is_empty()
                        || v == "."
                        || v == ".."
                        || v.contains(['/', '\\'])
                        || v.chars().any(char::is_control)
                });
                prop_assert!(refused, "{} refused {:?}", op.id, values);
            }
            Err(other) => prop_assert!(false, "{}: {other}", op.id),
            Ok(prepared) => {
                let url = client.request_url(&prepared).unwrap();
                let target = url.path().strip_prefix("/prefix").unwrap();
                prop_assert!(
                    target_matches(target, op.path, prepared.path_values()),
                    "{}: {} for {:?}", op.id, url, values
                );
            }
        }
    }
}

/// A value for each required query field, so only the path decides.
fn required_query(op: &Operation) -> Value {
    use mpa_gateway::FieldKind;
    let q: Map<String, Value> = op
        .query
        .iter()
        .filter(|f| f.required)
        .map(|f| {
            let v = match &f.kind {
                FieldKind::Integer | FieldKind::Number => json!(f.minimum.unwrap_or(1).max(1)),
                FieldKind::Boolean => json!(true),
                FieldKind::Enum(values) => json!(values[0]),
                FieldKind::Const(c) => json!(c),
                FieldKind::Array(_) => json!(["x"]),
                FieldKind::String | FieldKind::Named(_) => json!("tmdb"),
            };
            (f.name.to_string(), v)
        })
        .collect();
    Value::Object(q)
}

/// The same property over real HTTP: what the server reads in the request line.
#[tokio::test]
async fn real_requests_arrive_on_their_own_route() {
    let server = common::ok_server().await;
    let c = client(&server.base_url());
    let samples = [
        "tmdb:27205",
        "a b",
        "%2e%2e",
        "%2F",
        "...",
        "．．",
        "?x=1#y",
        "三体 第一季",
        ".hidden",
        "a..b",
    ];
    for value in samples {
        for id in [
            "subscription.find",
            "plugin.uninstall",
            "torrent.cache.delete",
        ] {
            let op = op(id);
            let params: Map<String, Value> = op
                .path_params
                .iter()
                .map(|f| (f.name.to_string(), json!(value)))
                .collect();
            let prepared = op
                .prepare(
                    &Value::Object(params),
                    &if id == "subscription.find" {
                        json!({"media_source": "tmdb"})
                    } else {
                        Value::Null
                    },
                    &Value::Null,
                )
                .unwrap();
            c.send(&prepared, &ctx()).await.unwrap();
            let seen = server.take();
            assert_eq!(seen.len(), 1, "{id} {value:?}");
            assert!(
                target_matches(&seen[0].target, op.path, prepared.path_values()),
                "{id} {value:?} arrived as {}",
                seen[0].target
            );
        }
    }
}

fn assert_invalid_path_parameter(e: InputError, name: &str) {
    assert_eq!(e.code(), "invalid_path_parameter", "{e}");
    assert!(
        matches!(&e, InputError::InvalidPathParameter { name: n, .. } if *n == name),
        "{e:?}"
    );
}

/// Found by the attack run: `subscription.find {"media_id": ".."}` as a non-admin sent
/// `GET /api/v1/subscribe/` and returned every subscription as succeeded.
#[tokio::test]
async fn dot_dot_media_id_never_reaches_get_subscribe_list() {
    let server = common::ok_server().await;
    let c = client(&server.base_url());
    for v in ["..", ".", "", " "] {
        let e = op("subscription.find")
            .prepare(
                &json!({"media_id": v}),
                &json!({"media_source": "tmdb"}),
                &Value::Null,
            )
            .unwrap_err();
        assert_invalid_path_parameter(e, "media_id");
    }
    // A request bent after preparing is still caught before sending.
    let ok = op("subscription.find")
        .prepare(
            &json!({"media_id": "27205"}),
            &json!({"media_source": "tmdb"}),
            &Value::Null,
        )
        .unwrap();
    c.send(&ok, &ctx()).await.unwrap();
    assert_eq!(
        server.take()[0].target,
        "/api/v1/subscribe/media/27205?media_source=tmdb"
    );
    assert!(server.seen().is_empty());
}

/// Found by the attack run: `plugin.folder.plugin.remove {"plugin_id": ".."}` resolved to
/// `DELETE /api/v1/plugin/folders/<name>/`, FastAPI redirected it (307) to the folder itself,
/// the client followed with the bearer, and a folder delete was reported as a plugin removal.
#[tokio::test]
async fn dot_dot_plugin_id_never_becomes_a_folder_delete() {
    let server = redirecting(307, None).await;
    let c = client(&server.base_url());
    let e = op("plugin.folder.plugin.remove")
        .prepare(
            &json!({"folder_name": "影视", "plugin_id": ".."}),
            &Value::Null,
            &Value::Null,
        )
        .unwrap_err();
    assert_invalid_path_parameter(e, "plugin_id");
    assert!(server.seen().is_empty(), "nothing was sent");

    // A proper removal that the server redirects is reported as failed, not followed.
    let p = op("plugin.folder.plugin.remove")
        .prepare(
            &json!({"folder_name": "影视", "plugin_id": "Demo"}),
            &Value::Null,
            &Value::Null,
        )
        .unwrap();
    let e = c.send(&p, &ctx()).await.unwrap_err();
    assert!(
        matches!(
            &e,
            GatewayError::Redirected {
                status: 307,
                may_have_acted: false,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.outcome(), Outcome::Failed);
    let seen = server.take();
    assert_eq!(seen.len(), 1, "no second request follows a 3xx");
    assert_eq!(
        seen[0].request_line(),
        "DELETE /api/v1/plugin/folders/%E5%BD%B1%E8%A7%86/plugins/Demo"
    );
}

/// Found by the attack run: `torrent.cache.delete {"torrent_hash": ".."}` became
/// `DELETE /api/v1/torrent/cache/<domain>/` → 307 → `DELETE /api/v1/torrent/cache`, which
/// clears the whole cache.
#[tokio::test]
async fn dot_dot_torrent_hash_never_clears_the_torrent_cache() {
    let server = redirecting(307, None).await;
    for params in [
        json!({"domain": "example.org", "torrent_hash": ".."}),
        json!({"domain": "..", "torrent_hash": ".."}),
        json!({"domain": "example.org", "torrent_hash": "../.."}),
    ] {
        let e = prepare("torrent.cache.delete", params).unwrap_err();
        assert_eq!(e.code(), "invalid_path_parameter", "{e}");
    }
    assert!(server.seen().is_empty(), "nothing was sent");
}

/// The redirecting stand-in: a 307 to the trailing-slash path, a 303 after a write, a 302 to
/// another origin. Exactly one request each time, no second request, and the other origin never
/// sees the bearer (or anything at all).
#[tokio::test]
async fn no_request_follows_a_redirect() {
    let elsewhere = common::ok_server().await;
    let cases = [
        (307, None, "subscription.list", Outcome::Failed),
        (308, None, "subscription.delete", Outcome::Failed),
        (303, None, "subscription.delete", Outcome::Unknown),
        (
            302,
            Some(format!("http://user:pw@{}/steal?token=x", elsewhere.addr)),
            "subscription.list",
            Outcome::Failed,
        ),
        (
            301,
            Some(format!("{}/api/v1/subscribe/9", elsewhere.base_url())),
            "subscription.delete",
            Outcome::Unknown,
        ),
    ];
    for (status, location, id, outcome) in cases {
        let server = redirecting(status, location.clone()).await;
        let c = client(&server.base_url());
        let params = if id == "subscription.delete" {
            json!({"subscribe_id": 9})
        } else {
            Value::Null
        };
        let p = prepare(id, params).unwrap();
        let e = c.send(&p, &ctx()).await.unwrap_err();
        let GatewayError::Redirected {
            status: got,
            location: shown,
            ..
        } = &e
        else {
            panic!("{status}: {e:?}")
        };
        assert_eq!(*got, status);
        assert_eq!(e.outcome(), outcome, "{status} {id}");
        let shown = shown.clone().unwrap();
        assert!(
            !shown.contains("pw") && !shown.contains("token=x"),
            "credentials in the shown location: {shown}"
        );
        if location.is_none() {
            assert!(shown.starts_with("/api/v1/subscribe/"), "{shown}");
        }
        let seen = server.take();
        assert_eq!(seen.len(), 1, "{status}: exactly one request");
        assert_eq!(seen[0].target, p.path_and_query());
        assert!(e.to_string().contains("redirects are not followed"), "{e}");
    }
    assert!(
        elsewhere.seen().is_empty(),
        "the other origin saw a request: {:?}",
        elsewhere.seen()
    );
}
