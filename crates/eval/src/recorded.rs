//! Serving as a given MoviePilot rather than as the catalogue: the OpenAPI document the fake
//! serves at `GET /api/v1/openapi.json` ([`OpenApiServing`]) — one generated from the
//! catalogue's own routes (the default, under which every operation exists), a given document
//! (the recorded real v2 one), or none — and, for a given document, routing as that server
//! routes; plus the answer shapes of the recorded server ([`AnswerStyle::RecordedV2`]).
//!
//! Routing by a document follows Starlette: the path is percent-decoded first and then split
//! (so a `%2F` in a value is a separator), routes are tried in document order, the first whose
//! path and method match answers; a path that matches only for other methods is 405, nothing
//! at all is 404, and a path that matches with the other trailing slash is a 307 there. A
//! request that lands on a route of another operation (a literal captured by a parameterised
//! route: `/plugin/rating` by `/plugin/{plugin_id}`) is answered as the real server did, `200
//! {}`, and recorded as captured.
//!
//! Reads of the document are counted apart ([`FakeHandle::openapi_reads`]); the ledger holds
//! the REST calls only.
//!
//! [`FakeHandle::openapi_reads`]: crate::FakeHandle::openapi_reads

use crate::catalog::{Operation, catalog, percent_decode};
use serde_json::{Map, Value, json};
use std::sync::{Arc, LazyLock};

/// MoviePilot's OpenAPI route.
pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";

/// Which document the fake serves and routes by.
#[derive(Debug, Clone, Default)]
pub enum OpenApiServing {
    /// A document generated from the catalogue's own routes; routing as the catalogue says.
    #[default]
    Catalogue,
    /// This document; requests are routed as its server routes them.
    Document(Arc<DocumentRoutes>),
    /// No document: `GET /api/v1/openapi.json` answers 404, as on a server that serves none.
    NotServed,
    /// Routes as this document's server but serves no document (its docs turned off): a
    /// client that cannot read the routes meets its 404s and 405s.
    Undocumented(Arc<DocumentRoutes>),
}

impl OpenApiServing {
    /// Serve (and route by) the OpenAPI document in `bytes`.
    pub fn document(bytes: Vec<u8>) -> Result<OpenApiServing, String> {
        DocumentRoutes::parse(bytes).map(|d| OpenApiServing::Document(Arc::new(d)))
    }

    /// Route by the document in `bytes` without serving it.
    pub fn undocumented(bytes: Vec<u8>) -> Result<OpenApiServing, String> {
        DocumentRoutes::parse(bytes).map(|d| OpenApiServing::Undocumented(Arc::new(d)))
    }

    /// The document requests are routed by, if not the catalogue.
    pub(crate) fn routes(&self) -> Option<&DocumentRoutes> {
        match self {
            OpenApiServing::Document(d) | OpenApiServing::Undocumented(d) => Some(d),
            OpenApiServing::Catalogue | OpenApiServing::NotServed => None,
        }
    }
}

/// How answers are shaped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AnswerStyle {
    /// The evaluation world's: every reply the `{success, message, data}` envelope, collection
    /// headers on lists, 403 for a non-superuser.
    #[default]
    Envelope,
    /// What the recorded v2 server answered: reads as bare JSON values (an all-null record for
    /// a subscription lookup that found nothing), no collection headers, HTTP 400 `用户权限不足`
    /// for a non-superuser, a fault's string body as plain text; media ids as `<source>:<id>`
    /// (`mediaid`) and `tmdbid` in requests.
    RecordedV2,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Literal(String),
    Param(String),
}

#[derive(Debug, Clone)]
struct DocRoute {
    method: String,
    path: String,
    segments: Vec<Seg>,
    query: Vec<String>,
}

/// A document's bytes and its routes in document order.
#[derive(Debug)]
pub struct DocumentRoutes {
    bytes: Vec<u8>,
    routes: Vec<DocRoute>,
}

fn segments(path: &str) -> Vec<Seg> {
    path.strip_prefix('/')
        .unwrap_or(path)
        .split('/')
        .map(
            |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) => Seg::Param(name.to_string()),
                None => Seg::Literal(s.to_string()),
            },
        )
        .collect()
}

impl DocumentRoutes {
    fn parse(bytes: Vec<u8>) -> Result<DocumentRoutes, String> {
        let doc: Value = serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))?;
        let paths = doc
            .get("paths")
            .and_then(Value::as_object)
            .ok_or("no paths")?;
        let mut routes = Vec::new();
        for (path, item) in paths {
            let Some(item) = item.as_object() else {
                continue;
            };
            for (method, op) in item {
                let method = method.to_ascii_uppercase();
                if !["GET", "POST", "PUT", "DELETE", "PATCH"].contains(&method.as_str()) {
                    continue;
                }
                let query = op
                    .get("parameters")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|p| p.get("in").and_then(Value::as_str) == Some("query"))
                    .filter_map(|p| p.get("name").and_then(Value::as_str).map(str::to_string))
                    .collect();
                routes.push(DocRoute {
                    method,
                    path: path.clone(),
                    segments: segments(path),
                    query,
                });
            }
        }
        Ok(DocumentRoutes { bytes, routes })
    }
}

/// The document `GET /api/v1/openapi.json` answers with, if any.
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub fn document_bytes(serving: &OpenApiServing) -> Option<&[u8]> {
    match serving {
        OpenApiServing::Catalogue => Some(&CATALOGUE_DOCUMENT),
        OpenApiServing::Document(d) => Some(&d.bytes),
        OpenApiServing::NotServed | OpenApiServing::Undocumented(_) => None,
    }
}

/// Where a request lands on a document's server.
pub(crate) enum DocRouting {
    /// On the route of a catalogue operation: serve it as usual, after dropping the query
    /// fields the route does not declare (the server ignores them).
    Operation {
        keep_query: Vec<String>,
    },
    NotFound,
    MethodNotAllowed,
    /// The route exists with the other trailing slash.
    Redirect(String),
    /// On a route that is not the one the catalogue names for this request.
    Captured {
        route: String,
    },
}

fn matches(route: &[Seg], path: &[String]) -> bool {
    route.len() == path.len()
        && route.iter().zip(path).all(|(r, p)| match r {
            Seg::Literal(l) => l == p,
            Seg::Param(_) => !p.is_empty(),
        })
}

/// Whether a catalogue template and a document route have the same shape (a `{source}`
/// placeholder stands for the concrete source segments of the server).
fn same_shape(op: &Operation, route: &DocRoute) -> bool {
    let trimmed = |s: &[Seg]| -> Vec<Seg> {
        let mut v = s.to_vec();
        if v.len() > 1 && v.last() == Some(&Seg::Literal(String::new())) {
            v.pop();
        }
        v
    };
    let a = trimmed(&segments(op.path_template));
    let b = trimmed(&route.segments);
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| match (x, y) {
            (Seg::Literal(l), Seg::Literal(m)) => l == m,
            (Seg::Param(p), Seg::Literal(_)) => p == "source",
            (Seg::Param(_), Seg::Param(_)) => true,
            (Seg::Literal(_), Seg::Param(_)) => false,
        })
}

/// Routes a request as the document's server would (see the module notes).
pub(crate) fn route_by_document(
    doc: &DocumentRoutes,
    method: &str,
    raw_path: &str,
    query: &[(String, String)],
) -> DocRouting {
    // uvicorn decodes the whole path, then Starlette matches it.
    let decoded = percent_decode(raw_path);
    let parts: Vec<String> = decoded
        .strip_prefix('/')
        .unwrap_or(&decoded)
        .split('/')
        .map(str::to_string)
        .collect();
    let mut path_only = false;
    let mut found = None;
    for r in &doc.routes {
        if matches(&r.segments, &parts) {
            if r.method.eq_ignore_ascii_case(method) {
                found = Some(r);
                break;
            }
            path_only = true;
        }
    }
    let Some(route) = found else {
        if path_only {
            return DocRouting::MethodNotAllowed;
        }
        // Starlette's redirect_slashes.
        let other = match decoded.strip_suffix('/') {
            Some(without) => without.to_string(),
            None => format!("{decoded}/"),
        };
        let other_parts: Vec<String> = other
            .strip_prefix('/')
            .unwrap_or(&other)
            .split('/')
            .map(str::to_string)
            .collect();
        if doc
            .routes
            .iter()
            .any(|r| r.method.eq_ignore_ascii_case(method) && matches(&r.segments, &other_parts))
        {
            return DocRouting::Redirect(other);
        }
        return DocRouting::NotFound;
    };
    match catalog().resolve(method, raw_path, query) {
        crate::catalog::Route::Operation { op, .. } if same_shape(op, route) => {
            DocRouting::Operation {
                keep_query: route.query.clone(),
            }
        }
        _ => DocRouting::Captured {
            route: format!("{} {}", route.method, route.path),
        },
    }
}

/// The recorded server's request names, as the world reads them: `mediaid=tmdb:1` (path or
/// query) as `media_source` + `media_id`, `tmdbid`/`doubanid` likewise.
pub(crate) fn normalise_v2_request(
    path_params: &mut [(&'static str, String)],
    query: &mut Vec<(String, String)>,
) {
    let has = |q: &Vec<(String, String)>, k: &str| q.iter().any(|(n, _)| n == k);
    for (name, value) in path_params.iter_mut() {
        if *name == "media_id"
            && !has(query, "media_source")
            && let Some((source, id)) = value.split_once(':')
        {
            query.push(("media_source".into(), source.to_string()));
            *value = id.to_string();
        }
    }
    let mut extra = Vec::new();
    query.retain(|(k, v)| match k.as_str() {
        "mediaid" => {
            if let Some((source, id)) = v.split_once(':') {
                extra.push(("media_source".to_string(), source.to_string()));
                extra.push(("media_id".to_string(), id.to_string()));
            }
            false
        }
        "tmdbid" => {
            extra.push(("media_source".to_string(), "themoviedb".to_string()));
            extra.push(("media_id".to_string(), v.clone()));
            false
        }
        "doubanid" => {
            extra.push(("media_source".to_string(), "douban".to_string()));
            extra.push(("media_id".to_string(), v.clone()));
            false
        }
        _ => true,
    });
    query.extend(extra);
}

/// The fields of MoviePilot v2's `Subscribe` schema: what an empty lookup answers, all null.
const SUBSCRIBE_FIELDS_V2: [&str; 16] = [
    "id",
    "name",
    "year",
    "type",
    "keyword",
    "tmdbid",
    "doubanid",
    "bangumiid",
    "mediaid",
    "season",
    "poster",
    "backdrop",
    "vote",
    "description",
    "state",
    "username",
];

/// A reply of the recorded server: reads bare, an empty subscription lookup all null.
pub(crate) fn shape_v2_reply(op: &Operation, status: u16, body: Value) -> Value {
    if !(200..300).contains(&status) || !op.effect.is_read() {
        return body;
    }
    let Value::Object(mut envelope) = body else {
        return body;
    };
    if envelope.get("success") != Some(&Value::Bool(true)) || !envelope.contains_key("data") {
        return Value::Object(envelope);
    }
    let data = envelope.remove("data").unwrap_or(Value::Null);
    let empty_lookup = matches!(op.id, "subscription.find" | "subscription.get")
        && data.as_object().is_some_and(Map::is_empty);
    if empty_lookup {
        return Value::Object(
            SUBSCRIBE_FIELDS_V2
                .iter()
                .map(|f| ((*f).to_string(), Value::Null))
                .collect(),
        );
    }
    data
}

/// The document of the catalogue's own routes: one route per operation (a `{source}` route
/// once per source), its query fields by name, an open JSON object or array as its body.
static CATALOGUE_DOCUMENT: LazyLock<Vec<u8>> = LazyLock::new(catalogue_document);

fn catalogue_document() -> Vec<u8> {
    let mut paths: Map<String, Value> = Map::new();
    for line in crate::catalog::TSV.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [
            id,
            _,
            method,
            path,
            _,
            _,
            _,
            _,
            _,
            _,
            path_params,
            query,
            body,
            ..,
        ] = cols[..]
        else {
            continue;
        };
        let expansions: Vec<String> = if path.contains("{source}") {
            ["tmdb", "douban", "bangumi", "anilist"]
                .iter()
                .map(|s| path.replace("{source}", s))
                .collect()
        } else {
            vec![path.to_string()]
        };
        let mut parameters: Vec<Value> = field_names(path_params)
            .into_iter()
            .filter(|(n, _)| *n != "source")
            .map(|(name, _)| json!({"name": name, "in": "path", "required": true}))
            .collect();
        parameters.extend(
            field_names(query)
                .into_iter()
                .map(|(name, required)| json!({"name": name, "in": "query", "required": required})),
        );
        for p in expansions {
            let item = paths.entry(p).or_insert_with(|| Value::Object(Map::new()));
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            let key = method.to_ascii_lowercase();
            match item.get_mut(&key) {
                // Two operations share this route: the union of their query fields.
                Some(existing) => {
                    if let Some(ps) = existing.get_mut("parameters").and_then(Value::as_array_mut) {
                        for p in &parameters {
                            if !ps.iter().any(|q| q["name"] == p["name"]) {
                                ps.push(p.clone());
                            }
                        }
                    }
                }
                None => {
                    let mut op = json!({"operationId": id, "parameters": parameters.clone()});
                    if body != "-" {
                        let schema = if body.starts_with("arr<") {
                            json!({"type": "array", "items": {}})
                        } else {
                            json!({"type": "object"})
                        };
                        op["requestBody"] = json!({
                            "required": body.contains('*'),
                            "content": {"application/json": {"schema": schema}}
                        });
                    }
                    item.insert(key, op);
                }
            }
        }
    }
    let doc = json!({
        "openapi": "3.1.0",
        "info": {"title": "MoviePilot (evaluation world)", "version": "catalogue"},
        "paths": paths,
    });
    serde_json::to_vec(&doc).unwrap_or_default()
}

/// `name:type; name2*:type …` → names and whether each is required (`*`).
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub fn field_names(col: &str) -> Vec<(&str, bool)> {
    if col == "-" {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut extras = Vec::new();
    let mut depth = 0i32;
    let mut angle = 0i32;
    let mut start = 0;
    let bytes = col.as_bytes();
    for i in 0..=bytes.len() {
        let at_end = i == bytes.len();
        if !at_end {
            match bytes[i] {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth -= 1,
                // `arr<…>` nests; the `>` of `>=` does not.
                b'<' if col[..i].ends_with("arr") => angle += 1,
                b'>' if angle > 0 => angle -= 1,
                _ => {}
            }
        }
        if at_end || (depth == 0 && angle == 0 && col[i..].starts_with("; ")) {
            let mut entry = col[start..i].trim();
            // `title:str  [… also lists mtype:MediaType, year:str]`: optional extras.
            if let Some(open) = entry.find(" [") {
                let remark = &entry[open..];
                if let Some(at) = remark.find("also lists ") {
                    for part in remark[at + "also lists ".len()..]
                        .trim_end_matches(']')
                        .split(", ")
                    {
                        if let Some((name, _)) = part.split_once(':') {
                            extras.push((name.trim(), false));
                        }
                    }
                }
                entry = entry[..open].trim_end();
            }
            if let Some((name, _)) = entry.split_once(':') {
                let required = name.ends_with('*');
                out.push((name.trim_end_matches('*').trim(), required));
            }
            out.append(&mut extras);
            start = i + 2;
        }
    }
    out
}
