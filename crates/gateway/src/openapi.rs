//! What a MoviePilot server says it serves: its `GET /api/v1/openapi.json` (FastAPI serves it
//! without credentials) read into routes — method, path template, the names of its path and
//! query parameters, and what body it takes. Only what reconciliation needs is kept; the
//! document itself is dropped after parsing.
//!
//! The document's path order is FastAPI's registration order of each path's *first* route,
//! which is what Starlette matches in; see `reconcile` for how that is used.

use crate::catalogue::HttpMethod;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::fmt;

/// FastAPI's default `info.version`, which says nothing about MoviePilot's own version.
const FASTAPI_DEFAULT_VERSION: &str = "0.1.0";

/// How deep `$ref`s and schema alternatives are followed (a cyclic document cannot loop).
const MAX_SCHEMA_DEPTH: usize = 8;

/// One query parameter of a route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryParam {
    pub name: String,
    pub required: bool,
}

/// What body a route takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteBody {
    /// No request body.
    None,
    /// A JSON object. `fields` are the property names when the schema lists them and does not
    /// allow others (MoviePilot's Pydantic models silently drop unknown fields); `None` is any
    /// object (`dict`).
    Object {
        fields: Option<BTreeSet<String>>,
        required: BTreeSet<String>,
        body_required: bool,
    },
    /// A JSON array, or a value whose shape the schema leaves open.
    Other { body_required: bool },
    /// A form or multipart body: the gateway sends JSON, which such a route cannot read.
    Form,
}

/// One method + path of the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRoute {
    pub method: HttpMethod,
    /// The path template as documented (`/api/v1/subscribe/media/{mediaid}`).
    pub path: String,
    /// The position of this path in the document (registration order of its first route).
    pub order: usize,
    pub path_params: Vec<String>,
    pub query: Vec<QueryParam>,
    pub body: RouteBody,
}

impl ServerRoute {
    pub fn query_param(&self, name: &str) -> Option<&QueryParam> {
        self.query.iter().find(|q| q.name == name)
    }
}

/// Why an OpenAPI document could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenApiError {
    pub reason: String,
}

impl fmt::Display for OpenApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MoviePilot's OpenAPI document is not usable: {}",
            self.reason
        )
    }
}

impl std::error::Error for OpenApiError {}

/// A server's routes, from its OpenAPI document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerApi {
    /// `info.version` when it names something (FastAPI's default `0.1.0` does not).
    pub version: Option<String>,
    /// The first 12 hex digits of the SHA-256 of the document's bytes: changes whenever the
    /// server's routes (or anything else in the document) change.
    pub fingerprint: String,
    pub routes: Vec<ServerRoute>,
}

impl ServerApi {
    /// How the server is named to people and models: its version, or the document's
    /// fingerprint when it states none.
    pub fn label(&self) -> String {
        match &self.version {
            Some(v) => format!("MoviePilot {v} (OpenAPI {})", self.fingerprint),
            None => format!("MoviePilot (OpenAPI {})", self.fingerprint),
        }
    }

    /// Parses the bytes of an OpenAPI 3 document.
    pub fn parse(bytes: &[u8]) -> Result<ServerApi, OpenApiError> {
        let err = |reason: &str| OpenApiError {
            reason: reason.to_owned(),
        };
        let doc: Value =
            serde_json::from_slice(bytes).map_err(|_| err("the answer is not JSON"))?;
        let version_word = doc.get("openapi").and_then(Value::as_str).unwrap_or("");
        if !version_word.starts_with('3') {
            return Err(err("it is not an OpenAPI 3 document"));
        }
        let paths = doc
            .get("paths")
            .and_then(Value::as_object)
            .ok_or_else(|| err("it has no paths"))?;
        let schemas = doc
            .pointer("/components/schemas")
            .and_then(Value::as_object);
        let components = Components { doc: &doc, schemas };
        let mut routes = Vec::new();
        for (order, (path, item)) in paths.iter().enumerate() {
            let Some(item) = item.as_object() else {
                continue;
            };
            let shared = item.get("parameters").and_then(Value::as_array);
            for (method_word, operation) in item {
                let Some(method) = HttpMethod::parse(&method_word.to_ascii_uppercase()) else {
                    continue;
                };
                routes.push(components.route(method, path, order, operation, shared));
            }
        }
        let version = doc
            .pointer("/info/version")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|v| !v.is_empty() && *v != FASTAPI_DEFAULT_VERSION)
            .map(|v| v.chars().take(40).collect());
        Ok(ServerApi {
            version,
            fingerprint: hex::encode(&Sha256::digest(bytes)[..6]),
            routes,
        })
    }
}

struct Components<'a> {
    doc: &'a Value,
    schemas: Option<&'a Map<String, Value>>,
}

impl<'a> Components<'a> {
    /// Follows a local `$ref` (`#/components/...`), once per level.
    fn resolve(&self, v: &'a Value) -> &'a Value {
        let mut cur = v;
        for _ in 0..MAX_SCHEMA_DEPTH {
            let Some(r) = cur.get("$ref").and_then(Value::as_str) else {
                return cur;
            };
            let found = r
                .strip_prefix("#/components/schemas/")
                .and_then(|name| self.schemas?.get(name))
                .or_else(|| r.strip_prefix('#').and_then(|p| self.doc.pointer(p)));
            match found {
                Some(next) => cur = next,
                None => return cur,
            }
        }
        cur
    }

    fn route(
        &self,
        method: HttpMethod,
        path: &str,
        order: usize,
        operation: &'a Value,
        shared: Option<&'a Vec<Value>>,
    ) -> ServerRoute {
        let mut path_params = Vec::new();
        let mut query: Vec<QueryParam> = Vec::new();
        let own = operation.get("parameters").and_then(Value::as_array);
        for p in shared
            .into_iter()
            .flatten()
            .chain(own.into_iter().flatten())
        {
            let p = self.resolve(p);
            let Some(name) = p.get("name").and_then(Value::as_str) else {
                continue;
            };
            let required = p.get("required").and_then(Value::as_bool).unwrap_or(false);
            match p.get("in").and_then(Value::as_str) {
                Some("path") if !path_params.iter().any(|n| n == name) => {
                    path_params.push(name.to_owned());
                }
                Some("query") => match query.iter_mut().find(|q| q.name == name) {
                    Some(q) => q.required = required,
                    None => query.push(QueryParam {
                        name: name.to_owned(),
                        required,
                    }),
                },
                _ => {}
            }
        }
        ServerRoute {
            method,
            path: path.to_owned(),
            order,
            path_params,
            query,
            body: self.body(operation.get("requestBody")),
        }
    }

    fn body(&self, request_body: Option<&'a Value>) -> RouteBody {
        let Some(rb) = request_body.map(|v| self.resolve(v)) else {
            return RouteBody::None;
        };
        let body_required = rb.get("required").and_then(Value::as_bool).unwrap_or(false);
        let Some(content) = rb.get("content").and_then(Value::as_object) else {
            return RouteBody::Other { body_required };
        };
        let Some(schema) = content
            .iter()
            .find(|(ct, _)| ct.starts_with("application/json"))
            .map(|(_, c)| c.get("schema").unwrap_or(&Value::Null))
        else {
            return RouteBody::Form;
        };
        match self.object_fields(schema, 0) {
            Some(Shape::Object { fields, required }) => RouteBody::Object {
                fields,
                required,
                body_required,
            },
            _ => RouteBody::Other { body_required },
        }
    }

    /// The object shape of a schema: its properties (`None`: any keys), or `Other` when it is
    /// not (only) an object.
    fn object_fields(&self, schema: &'a Value, depth: usize) -> Option<Shape> {
        if depth > MAX_SCHEMA_DEPTH {
            return None;
        }
        let schema = self.resolve(schema);
        let alternatives = ["allOf", "anyOf", "oneOf"]
            .iter()
            .find_map(|k| schema.get(*k).and_then(Value::as_array).map(|a| (*k, a)));
        if let Some((kind, alts)) = alternatives {
            let mut merged: Option<Shape> = None;
            for alt in alts {
                let alt = self.resolve(alt);
                // `Optional[Model]` is `anyOf: [Model, {type: null}]`.
                if alt.get("type").and_then(Value::as_str) == Some("null") {
                    continue;
                }
                let shape = self.object_fields(alt, depth + 1)?;
                merged = Some(match (merged, shape) {
                    (None, s) => s,
                    (Some(a), b) => a.union(b, kind == "allOf"),
                });
            }
            return merged;
        }
        let is_object = schema.get("type").and_then(Value::as_str) == Some("object")
            || schema.get("properties").is_some();
        if !is_object {
            return None;
        }
        let open = match schema.get("additionalProperties") {
            Some(Value::Bool(false)) => false,
            Some(_) => true,
            None => schema.get("properties").is_none(),
        };
        let props = schema.get("properties").and_then(Value::as_object);
        let fields = (!open).then(|| {
            props
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default()
        });
        let required = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Some(Shape::Object { fields, required })
    }
}

enum Shape {
    Object {
        fields: Option<BTreeSet<String>>,
        required: BTreeSet<String>,
    },
}

impl Shape {
    /// Alternatives accept the union of their fields; `allOf` also requires the union of their
    /// required fields, `anyOf`/`oneOf` only what every branch requires.
    fn union(self, other: Shape, all_of: bool) -> Shape {
        let (
            Shape::Object {
                fields: fa,
                required: ra,
            },
            Shape::Object {
                fields: fb,
                required: rb,
            },
        ) = (self, other);
        let fields = match (fa, fb) {
            (Some(a), Some(b)) => Some(a.union(&b).cloned().collect()),
            _ => None,
        };
        let required = if all_of {
            ra.union(&rb).cloned().collect()
        } else {
            ra.intersection(&rb).cloned().collect()
        };
        Shape::Object { fields, required }
    }
}
