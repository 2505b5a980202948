//! The fake's operation catalogue: every row parses, every route resolves to its own operation.

use mpa_eval::catalog::{Operation, Route, SHARED_ROUTE_SELECTORS, Segment, catalog};
use mpa_protocol::EffectClass;
use std::collections::HashSet;

fn fill(op: &Operation) -> String {
    op.segments
        .iter()
        .map(|s| match s {
            Segment::Literal(l) => (*l).to_string(),
            Segment::Param("source") => "douban".to_string(),
            Segment::Param(p) => format!("x{p}"),
        })
        .fold(String::new(), |acc, s| acc + "/" + &s)
}

#[test]
fn every_row_parses_and_ids_are_unique() {
    let ops = catalog().operations();
    assert_eq!(ops.len(), 229);
    let ids: HashSet<_> = ops.iter().map(|o| o.id).collect();
    assert_eq!(ids.len(), 229);
    assert!(ops.iter().all(|o| o.path_template.starts_with("/api/v1/")));
    assert_eq!(
        catalog()
            .get("subscription.add")
            .map(|o| (o.method, o.admin, o.effect)),
        Some(("POST", true, EffectClass::ReversibleWrite))
    );
    assert_eq!(
        catalog()
            .get("subscription.list")
            .map(|o| (o.admin, o.effect.is_read())),
        Some((false, true))
    );
}

#[test]
fn every_filled_template_resolves_to_its_own_operation() {
    for op in catalog().operations() {
        let mut query = Vec::new();
        if let Some((_, k, v)) = SHARED_ROUTE_SELECTORS
            .iter()
            .find(|(id, _, _)| *id == op.id)
        {
            query.push((k.to_string(), v.to_string()));
        }
        let path = fill(op);
        match catalog().resolve(op.method, &path, &query) {
            Route::Operation {
                op: found,
                path_params,
            } => {
                assert_eq!(found.id, op.id, "{path}");
                assert_eq!(
                    path_params.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
                    op.path_params()
                );
            }
            other => panic!("{path}: {other:?}"),
        }
    }
}

#[test]
fn literals_win_trailing_slash_and_encoding() {
    let r = catalog().resolve("GET", "/api/v1/media/search", &[]);
    assert!(matches!(r, Route::Operation { op, .. } if op.id == "media.search"));
    let r = catalog().resolve("GET", "/api/v1/subscribe", &[]);
    assert!(matches!(r, Route::Operation { op, .. } if op.id == "subscription.list"));
    match catalog().resolve("GET", "/api/v1/subscribe/media/tmdb%3A%E4%B8%89", &[]) {
        Route::Operation { op, path_params } => {
            assert_eq!(op.id, "subscription.find");
            assert_eq!(path_params, vec![("media_id", "tmdb:三".to_string())]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        catalog().resolve("PATCH", "/api/v1/subscribe/", &[]),
        Route::MethodNotAllowed
    );
    assert_eq!(
        catalog().resolve("GET", "/api/v1/nothing", &[]),
        Route::NotFound
    );
    assert_eq!(
        catalog().resolve("GET", "/api/v1/imdb/person/credits/1", &[]),
        Route::NotFound
    );
}
