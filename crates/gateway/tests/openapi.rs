//! The server's OpenAPI document: routes, parameters and bodies.

use mpa_gateway::{HttpMethod, RouteBody, ServerApi};
use serde_json::json;

#[test]
fn routes_parameters_and_bodies() {
    let doc = json!({
        "openapi": "3.1.0",
        "info": {"title": "MoviePilot", "version": "0.1.0"},
        "paths": {
            "/api/v1/subscribe/media/{mediaid}": {
                "get": {"parameters": [
                    {"name": "mediaid", "in": "path", "required": true},
                    {"name": "season", "in": "query"}
                ]},
                "delete": {"parameters": [{"name": "mediaid", "in": "path", "required": true}]}
            },
            "/api/v1/subscribe/": {
                "post": {"requestBody": {"required": true, "content": {"application/json":
                    {"schema": {"$ref": "#/components/schemas/Subscribe"}}}}}
            },
            "/api/v1/system/env": {
                "post": {"requestBody": {"content": {"application/json":
                    {"schema": {"type": "object", "title": "Env"}}}}}
            },
            "/api/v1/login/access-token": {
                "post": {"requestBody": {"content": {"application/x-www-form-urlencoded": {}}}}
            }
        },
        "components": {"schemas": {"Subscribe": {"type": "object", "required": ["name"],
            "properties": {"name": {}, "tmdbid": {}}}}}
    });
    let bytes = serde_json::to_vec(&doc).unwrap();
    let api = ServerApi::parse(&bytes).unwrap();
    assert_eq!(api.version, None, "FastAPI's default says nothing");
    assert_eq!(api.fingerprint.len(), 12);
    assert_eq!(api.routes.len(), 5);
    let get = &api.routes[0];
    assert_eq!(
        (get.method, get.path.as_str(), get.order),
        (HttpMethod::Get, "/api/v1/subscribe/media/{mediaid}", 0)
    );
    assert_eq!(get.path_params, ["mediaid"]);
    assert_eq!(get.query_param("season").map(|q| q.required), Some(false));
    assert_eq!(
        api.routes[2].body,
        RouteBody::Object {
            fields: Some(["name".to_string(), "tmdbid".to_string()].into()),
            required: ["name".to_string()].into(),
            body_required: true,
        }
    );
    assert!(matches!(
        api.routes[3].body,
        RouteBody::Object { fields: None, .. }
    ));
    assert_eq!(api.routes[4].body, RouteBody::Form);
    assert!(ServerApi::parse(b"<html>").is_err());
    assert!(ServerApi::parse(br#"{"swagger": "2.0", "paths": {}}"#).is_err());
}
