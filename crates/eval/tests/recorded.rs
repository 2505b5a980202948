//! The recorded catalogue document: field names, every route.

use mpa_eval::OpenApiServing;
use mpa_eval::recorded::{document_bytes, field_names};
use serde_json::Value;

#[test]
fn catalogue_fields_by_name() {
    assert_eq!(
        field_names("page:int>=1 (opt); count:int 1..200 (opt; omit both = full); name*:str"),
        vec![("page", false), ("count", false), ("name", true)]
    );
    assert_eq!(
        field_names("media_source:arr<MediaSource>=[]; x:enum(a|b)"),
        vec![("media_source", false), ("x", false)]
    );
    assert_eq!(
        field_names("season:int; title:str  [doc also lists mtype:MediaType, year:str]"),
        vec![
            ("season", false),
            ("title", false),
            ("mtype", false),
            ("year", false)
        ]
    );
}

#[test]
fn the_catalogue_document_has_every_route() {
    let doc: Value =
        serde_json::from_slice(document_bytes(&OpenApiServing::Catalogue).unwrap()).unwrap();
    let n: usize = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_object().unwrap().len())
        .sum();
    // 229 operations, two pairs sharing a route, `{source}` expanded to four routes.
    assert_eq!(n, 229 - 2 + 3);
}
