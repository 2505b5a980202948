//! The catalogue reconciled with a server's OpenAPI: the recorded real MoviePilot v2 document
//! (what it offers, why the rest is missing, how calls are adapted), small documents written
//! here for the edge cases, and the shared server view (read when due, rebuilt only for a new
//! document, stale after a sign-in or a missing route).
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::{self, Seen, ctx, serve};
use axum::response::IntoResponse;
use mpa_gateway::{
    Availability, GatewayError, LiveRefusal, NoOpenApi, Operation, PreparedRequest, Reconciliation,
    ServerApi, ServerKnowledge, catalogue,
};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub fn recorded() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../catalog/openapi/moviepilot-v2-2025-06.json"
    ))
    .unwrap()
}

fn table() -> Reconciliation {
    Reconciliation::new(catalogue(), ServerApi::parse(&recorded()).unwrap())
}

fn op(id: &str) -> &'static Operation {
    catalogue().get(id).unwrap()
}

fn prepared(id: &str, path: Value, query: Value) -> PreparedRequest {
    op(id).prepare(&path, &query, &Value::Null).unwrap()
}

fn availability(t: &Reconciliation, id: &str) -> Availability {
    t.get(id).unwrap().availability.clone()
}

#[test]
fn the_recorded_v2_server_offers_107_operations_and_says_why_not_the_rest() {
    let t = table();
    assert_eq!(
        t.counts().to_string(),
        "107 of 229 operations available (96 absent, 16 other method, 9 shadowed, 1 other parameters)"
    );
    assert_eq!(t.server_operations(), 254);
    assert_eq!(t.version(), None, "FastAPI's default 0.1.0 names nothing");
    assert!(
        t.label().starts_with("MoviePilot (OpenAPI "),
        "{}",
        t.label()
    );
    assert_eq!(
        availability(&t, "plugin.ratings"),
        Availability::Shadowed {
            method: mpa_gateway::HttpMethod::Get,
            route: "/api/v1/plugin/{plugin_id}".into()
        }
    );
    assert_eq!(
        availability(&t, "site.list"),
        Availability::Shadowed {
            method: mpa_gateway::HttpMethod::Get,
            route: "/api/v1/site/{site_id}".into()
        }
    );
    assert_eq!(
        availability(&t, "subscription.refresh"),
        Availability::OtherMethod {
            routes: vec![
                "GET /api/v1/subscribe/refresh".into(),
                "GET /api/v1/subscribe/{subscribe_id}".into(),
                "DELETE /api/v1/subscribe/{subscribe_id}".into()
            ]
        }
    );
    assert_eq!(
        availability(&t, "system.network.test"),
        Availability::OtherParameters {
            requires: vec!["query field `proxy`".into()]
        }
    );
    assert_eq!(availability(&t, "filter.builtin"), Availability::Absent);
    // A literal route that exists wins over a parameterised one registered earlier for another
    // method (the document groups methods by path).
    assert_eq!(
        availability(&t, "site.userdata.latest"),
        Availability::Available
    );
    assert_eq!(
        availability(&t, "media.person.credits"),
        Availability::Available
    );
    assert!(
        Availability::Absent
            .reason(op("filter.builtin"))
            .contains("has no route GET /api/v1/rule/builtin")
    );
}

#[test]
fn calls_are_adapted_to_the_live_route() {
    let t = table();
    // `media_id` + `media_source` become v2's `mediaid`; `media_source` is not sent.
    let p = prepared(
        "subscription.find",
        json!({"media_id": "27205"}),
        json!({"media_source": "themoviedb", "season": 1}),
    );
    let live = t.adapt(op("subscription.find"), &p).unwrap();
    assert_eq!(live.route(), "/api/v1/subscribe/media/{mediaid}");
    assert_eq!(
        live.path_and_query(),
        "/api/v1/subscribe/media/tmdb:27205?season=1"
    );
    assert_eq!(
        live.canonical_arguments(),
        p.canonical_arguments(),
        "the ledger identifies the call as the contract says"
    );
    // An id that already carries its source is left as it is.
    let p = prepared(
        "media.detail",
        json!({"media_id": "douban:35465232"}),
        json!({"media_source": "douban", "type_name": "电视剧"}),
    );
    assert_eq!(
        t.adapt(op("media.detail"), &p).unwrap().path_and_query(),
        "/api/v1/media/douban:35465232?type_name=%E7%94%B5%E8%A7%86%E5%89%A7"
    );
    // `library.exists` looks up by `tmdbid` there.
    let p = prepared(
        "library.exists",
        Value::Null,
        json!({"media_id": "27205", "media_source": "themoviedb", "season": 1}),
    );
    assert_eq!(
        t.adapt(op("library.exists"), &p).unwrap().path_and_query(),
        "/api/v1/mediaserver/exists?season=1&tmdbid=27205"
    );
    let p = prepared(
        "library.exists",
        Value::Null,
        json!({"media_id": "1", "media_source": "douban"}),
    );
    let e = t.adapt(op("library.exists"), &p).unwrap_err();
    assert!(
        e.to_string()
            .contains("by themoviedb ids only, not `douban`"),
        "{e}"
    );
    // A `{source}` route the server has for one source and not for another.
    let credits = |source: &str| {
        prepared(
            "media.person.credits",
            json!({"source": source, "person_id": 7}),
            Value::Null,
        )
    };
    assert_eq!(
        t.adapt(op("media.person.credits"), &credits("douban"))
            .unwrap()
            .path(),
        "/api/v1/douban/person/credits/7"
    );
    let e = t
        .adapt(op("media.person.credits"), &credits("anilist"))
        .unwrap_err();
    assert_eq!(e.code(), "operation_unavailable");
    assert!(
        e.to_string()
            .contains("sources this server serves for it: tmdb, douban, bangumi"),
        "{e}"
    );
}

#[test]
fn fields_the_route_would_ignore_are_refused_by_name() {
    let t = table();
    let p = prepared(
        "subscription.list",
        Value::Null,
        json!({"page": 2, "count": 50}),
    );
    let e = t.adapt(op("subscription.list"), &p).unwrap_err();
    assert!(matches!(&e, LiveRefusal::NoPaging { names, .. } if names == &["page", "count"]));
    assert_eq!(e.code(), "invalid_input");
    // Only `page` given: the other half is the gateway's, the note names both.
    let p = prepared("subscription.list", Value::Null, json!({"page": 1}));
    assert!(matches!(
        t.adapt(op("subscription.list"), &p).unwrap_err(),
        LiveRefusal::NoPaging { .. }
    ));
    let p = prepared(
        "media.search",
        Value::Null,
        json!({"title": "三体", "music_type": "album"}),
    );
    let e = t.adapt(op("media.search"), &p).unwrap_err();
    assert!(
        e.to_string()
            .contains("does not accept the query field `music_type`"),
        "{e}"
    );
    // A body field the route's model does not have (MoviePilot's Pydantic models drop them).
    let p = op("subscription.add")
        .prepare(
            &Value::Null,
            &Value::Null,
            &json!({"name": "三体", "media_source": "themoviedb", "media_id": "204541", "season": 1}),
        )
        .unwrap();
    let e = t.adapt(op("subscription.add"), &p).unwrap_err();
    assert!(
        matches!(&e, LiveRefusal::NotAccepted { location: mpa_gateway::Location::Body, names, .. }
            if names == &["media_id", "media_source"]),
        "{e:?}"
    );
    assert!(e.to_string().contains("it accepts"), "{e}");
    let p = op("subscription.add")
        .prepare(
            &Value::Null,
            &Value::Null,
            &json!({"name": "三体", "tmdbid": 204541, "season": 1}),
        )
        .unwrap();
    assert!(t.adapt(op("subscription.add"), &p).is_ok());
    // Without them, the call goes out as the contract built it.
    let p = prepared("media.search", Value::Null, json!({"title": "三体"}));
    assert_eq!(
        t.adapt(op("media.search"), &p).unwrap().path_and_query(),
        p.path_and_query()
    );
}

/// A document with a literal route and a parameterised one for the same method.
fn small_doc(extra_literal: bool) -> Vec<u8> {
    let mut paths = serde_json::Map::new();
    if extra_literal {
        paths.insert(
            "/api/v1/plugin/folders".into(),
            json!({"delete": {"parameters": []}}),
        );
    }
    paths.insert(
        "/api/v1/plugin/{plugin_id}".into(),
        json!({"delete": {"parameters": [{"name": "plugin_id", "in": "path", "required": true}]}}),
    );
    paths.insert(
        "/api/v1/subscribe/".into(),
        json!({"get": {"parameters": [
            {"name": "page", "in": "query"}, {"name": "count", "in": "query"}]}}),
    );
    serde_json::to_vec(&json!({"openapi": "3.1.0", "info": {"version": "v9.9.9"}, "paths": paths}))
        .unwrap()
}

#[test]
fn a_path_value_that_would_reach_another_route_is_refused() {
    let t = Reconciliation::new(catalogue(), ServerApi::parse(&small_doc(true)).unwrap());
    assert_eq!(t.version(), Some("v9.9.9"));
    let p = prepared(
        "plugin.uninstall",
        json!({"plugin_id": "folders"}),
        Value::Null,
    );
    let e = t.adapt(op("plugin.uninstall"), &p).unwrap_err();
    assert_eq!(e.code(), "invalid_path_parameter");
    assert!(
        e.to_string()
            .contains("would reach DELETE /api/v1/plugin/folders"),
        "{e}"
    );
    let p = prepared(
        "plugin.uninstall",
        json!({"plugin_id": "Demo"}),
        Value::Null,
    );
    assert_eq!(
        t.adapt(op("plugin.uninstall"), &p).unwrap().path(),
        "/api/v1/plugin/Demo"
    );
    // A route with paging pages.
    let p = prepared("subscription.list", Value::Null, json!({"page": 2}));
    assert_eq!(
        t.adapt(op("subscription.list"), &p)
            .unwrap()
            .path_and_query(),
        "/api/v1/subscribe/?page=2&count=50"
    );
}

/// A stand-in MoviePilot: serves `doc` (changeable) at its OpenAPI route, answers 405 to
/// `DELETE /api/v1/plugin/*` and `{}` to the rest; counts the document reads.
struct DocServer {
    server: common::TestServer,
    doc: Arc<Mutex<Option<Vec<u8>>>>,
    reads: Arc<AtomicUsize>,
}

async fn doc_server(doc: Option<Vec<u8>>) -> DocServer {
    let doc = Arc::new(Mutex::new(doc));
    let reads = Arc::new(AtomicUsize::new(0));
    let (d, r) = (doc.clone(), reads.clone());
    let server = serve(Arc::new(move |seen: &Seen| {
        if seen.target == "/api/v1/openapi.json" {
            r.fetch_add(1, Ordering::SeqCst);
            assert!(seen.header("authorization").is_none(), "no credentials");
            return match d.lock().unwrap().clone() {
                Some(bytes) => bytes.into_response(),
                None => common::status_response(404, json!({"detail": "Not Found"})),
            };
        }
        if seen.method == "DELETE" {
            return common::status_response(405, json!({"detail": "Method Not Allowed"}));
        }
        axum::Json(json!({"success": true})).into_response()
    }))
    .await;
    DocServer { server, doc, reads }
}

#[tokio::test]
async fn the_server_view_reads_when_due_and_rebuilds_only_for_a_new_document() {
    let s = doc_server(Some(small_doc(false))).await;
    let client = common::client(&s.server.base_url());
    let changes = Arc::new(AtomicUsize::new(0));
    let c = changes.clone();
    client.server().on_change(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
    });
    assert!(matches!(
        *client.server().knowledge(),
        ServerKnowledge::Unchecked
    ));
    let first = client.server_knowledge().await;
    let ServerKnowledge::Reconciled(r1) = &*first else {
        panic!("{first:?}")
    };
    assert_eq!(r1.counts().available, 2, "{}", r1.counts());
    // Not due: no read.
    client.server_knowledge().await;
    assert_eq!(s.reads.load(Ordering::SeqCst), 1);
    // The same document again: the same table, no change reported.
    client.server().mark_stale();
    let again = client.server_knowledge().await;
    assert_eq!(s.reads.load(Ordering::SeqCst), 2);
    assert!(Arc::ptr_eq(r1, again.reconciliation().unwrap()));
    assert_eq!(changes.load(Ordering::SeqCst), 1);

    // The server is upgraded: a 405 from a route the table offers marks it stale, the next
    // check reads the new document.
    *s.doc.lock().unwrap() = Some(small_doc(true));
    let p = prepared(
        "plugin.uninstall",
        json!({"plugin_id": "Demo"}),
        Value::Null,
    );
    let e = client.send(&p, &ctx()).await.unwrap_err();
    assert!(
        matches!(&e, GatewayError::RouteNotServed { status: 405, .. }),
        "{e:?}"
    );
    assert_eq!(e.outcome(), mpa_protocol::Outcome::Failed);
    assert!(
        e.to_string().contains("does not serve plugin.uninstall"),
        "{e}"
    );
    let upgraded = client.server_knowledge().await;
    assert_eq!(s.reads.load(Ordering::SeqCst), 3);
    assert!(!Arc::ptr_eq(r1, upgraded.reconciliation().unwrap()));
    assert_eq!(changes.load(Ordering::SeqCst), 2);

    // No document any more: the catalogue alone, said as such.
    *s.doc.lock().unwrap() = None;
    client.server().mark_stale();
    let none = client.server_knowledge().await;
    assert!(
        matches!(&*none, ServerKnowledge::CatalogueOnly(NoOpenApi::NotServed(r)) if r.contains("HTTP 404")),
        "{none:?}"
    );
    assert_eq!(changes.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn an_unavailable_operation_is_refused_by_send_itself() {
    let s = doc_server(Some(small_doc(false))).await;
    let client = common::client(&s.server.base_url());
    client.server_knowledge().await;
    let p = prepared("subscription.get", json!({"subscribe_id": 1}), Value::Null);
    let e = client.send(&p, &ctx()).await.unwrap_err();
    let GatewayError::Unavailable(refusal) = &e else {
        panic!("{e:?}")
    };
    assert_eq!(refusal.code(), "operation_unavailable");
    assert!(
        e.to_string()
            .contains("subscription.get is not available on MoviePilot v9.9.9"),
        "{e}"
    );
    assert_eq!(
        s.server
            .seen()
            .iter()
            .filter(|x| x.target != "/api/v1/openapi.json")
            .count(),
        0,
        "nothing was sent"
    );
}

#[tokio::test]
async fn an_unreachable_server_leaves_the_catalogue_alone() {
    let dead = common::dead_addr().await;
    let client = common::client(&format!("http://{dead}"));
    let k = client.server_knowledge().await;
    assert!(
        matches!(
            &*k,
            ServerKnowledge::CatalogueOnly(NoOpenApi::Unreachable(_))
        ),
        "{k:?}"
    );
    assert!(
        k.offers("site.list"),
        "the catalogue alone offers everything"
    );
    let p = prepared("subscription.list", Value::Null, Value::Null);
    assert_eq!(&*k.adapt(&p).unwrap(), &p);
}

/// Signing in is when a user meets the server again: its routes are read before the next call.
#[tokio::test]
async fn a_sign_in_marks_the_routes_for_reading_again() {
    let reads = Arc::new(AtomicUsize::new(0));
    let r = reads.clone();
    let doc = small_doc(false);
    let server = serve(Arc::new(move |seen: &Seen| {
        if seen.target == "/api/v1/openapi.json" {
            r.fetch_add(1, Ordering::SeqCst);
            return doc.clone().into_response();
        }
        axum::Json(
            json!({"access_token": common::TOKEN, "token_type": "bearer",
            "super_user": false, "user_id": 7, "user_name": "alice"}),
        )
        .into_response()
    }))
    .await;
    let client = common::client(&server.base_url());
    client.server_knowledge().await;
    client.server_knowledge().await;
    assert_eq!(reads.load(Ordering::SeqCst), 1);
    client.login("alice", "pw").await.unwrap();
    client.server_knowledge().await;
    assert_eq!(reads.load(Ordering::SeqCst), 2);
}
