//! The catalogue against the user's own server. The catalogue describes the MoviePilot release
//! that ships the agent; the user's server may be older or newer. Each operation is matched to
//! the server's routes (from its OpenAPI, [`ServerApi`]) once per document and found
//!
//! - **available** — a route with the same shape and method (path parameter names may differ:
//!   they are positional on the wire; a trailing slash may differ: the server's form is used);
//! - **absent** — no route for the path at all;
//! - **other method** — the path exists (or falls under a parameterised route) only for other
//!   methods: the server would answer 405;
//! - **shadowed** — no route of its own, but a parameterised route of the same method would
//!   capture the request (`GET /site/agent` reaching `GET /site/{site_id}`) and answer for it;
//! - **other parameters** — the route requires a parameter (or body) the contract cannot give.
//!
//! Only available operations may be called; [`Reconciliation::adapt`] turns a catalogue-form
//! request into the request for the live route: query and body fields the route does not accept
//! are refused by name (the server would ignore them silently), paging on a route without paging
//! is refused with a note, and known renamings are translated (`media_id` + `media_source` as
//! `mediaid = "tmdb:27205"`; `tmdbid`/`doubanid`). Built once per server document; `adapt` walks
//! no route table except the few routes that a path value could reach instead.

use crate::catalogue::{Catalogue, HttpMethod, Operation};
use crate::openapi::{RouteBody, ServerApi, ServerRoute};
use crate::request::{Location, PreparedRequest};
use crate::route::{TemplateSegment, template_segments};
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

/// Whether an operation can be called on the server, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Availability {
    Available,
    Absent,
    OtherMethod {
        /// The server's routes for this path, other methods only (`DELETE /api/v1/x/{id}`).
        routes: Vec<String>,
    },
    Shadowed {
        /// The route that would answer instead.
        method: HttpMethod,
        route: String,
    },
    OtherParameters {
        /// What the server requires that the contract cannot give.
        requires: Vec<String>,
    },
}

impl Availability {
    /// `available`, `absent`, `other_method`, `shadowed`, `other_parameters`.
    pub fn status(&self) -> &'static str {
        match self {
            Availability::Available => "available",
            Availability::Absent => "absent",
            Availability::OtherMethod { .. } => "other_method",
            Availability::Shadowed { .. } => "shadowed",
            Availability::OtherParameters { .. } => "other_parameters",
        }
    }

    pub fn is_available(&self) -> bool {
        matches!(self, Availability::Available)
    }

    /// One sentence on why `op` cannot be called (empty for an available one).
    pub fn reason(&self, op: &Operation) -> String {
        match self {
            Availability::Available => String::new(),
            Availability::Absent => format!(
                "this MoviePilot has no route {} {} (the operation is newer than this server, or was renamed)",
                op.method, op.path
            ),
            Availability::OtherMethod { routes } => format!(
                "this MoviePilot answers {} only as {}; a {} there gets HTTP 405",
                op.path,
                routes.join(", "),
                op.method
            ),
            Availability::Shadowed { method, route } => format!(
                "this MoviePilot has no route {} {}; the request would be answered by {method} {route}, \
                 another operation",
                op.method, op.path
            ),
            Availability::OtherParameters { requires } => format!(
                "this MoviePilot's {} {} requires {}, which this operation's contract does not have",
                op.method,
                op.path,
                requires.join(", ")
            ),
        }
    }
}

/// How MoviePilot v2 spells a media id: `<prefix>:<id>`.
fn media_id_prefix(source: &str) -> &str {
    match source {
        "themoviedb" | "tmdb" => "tmdb",
        other => other,
    }
}

/// A renaming between the contract and the live route, applied to each call.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Translation {
    /// The route's `{mediaid}` path parameter takes `<source>:<id>` from the contract's
    /// `media_id` path parameter and `media_source` query field.
    MediaIdPath { position: usize },
    /// The route's `mediaid` query parameter, from the contract's `media_id` and
    /// `media_source` query fields.
    MediaIdQuery,
    /// The route's `tmdbid` / `doubanid` query parameters, from `media_id` + `media_source`.
    ProviderIdQuery { tmdb: bool, douban: bool },
}

impl Translation {
    /// The contract's query fields this translation consumes.
    fn consumes(&self) -> &'static [&'static str] {
        match self {
            Translation::MediaIdPath { .. } => &["media_source"],
            Translation::MediaIdQuery | Translation::ProviderIdQuery { .. } => {
                &["media_id", "media_source"]
            }
        }
    }

    /// The route's parameters it supplies.
    fn supplies(&self) -> Vec<&'static str> {
        match self {
            Translation::MediaIdPath { .. } => vec![],
            Translation::MediaIdQuery => vec!["mediaid"],
            Translation::ProviderIdQuery { tmdb, douban } => {
                let mut v = Vec::new();
                if *tmdb {
                    v.push("tmdbid");
                }
                if *douban {
                    v.push("doubanid");
                }
                v
            }
        }
    }
}

/// The live route an available operation is sent to.
#[derive(Debug, Clone)]
struct LiveRoute {
    /// Index into the server's routes.
    route: usize,
    /// The server's template (`/api/v1/subscribe/media/{mediaid}`).
    template: Arc<str>,
    /// For each placeholder of `template`, in order, the position of the contract's
    /// placeholder value it takes.
    value_positions: Vec<usize>,
    accepted_query: BTreeSet<String>,
    body: RouteBody,
    translations: Vec<Translation>,
    /// Other routes of the same method that a path value could reach instead (a literal where
    /// the template has a placeholder): checked per call, most specific wins.
    capturers: Vec<usize>,
}

/// One catalogue operation on the server.
#[derive(Debug, Clone)]
pub struct LiveOperation {
    pub id: &'static str,
    pub availability: Availability,
    /// The live route when available. A `{source}` operation has one per source value the
    /// server serves.
    routes: Vec<(Option<&'static str>, LiveRoute)>,
    /// `{source}` values the server does not serve, with why.
    missing_sources: Vec<(&'static str, Availability)>,
}

/// Counts by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AvailabilityCounts {
    pub available: usize,
    pub absent: usize,
    pub other_method: usize,
    pub shadowed: usize,
    pub other_parameters: usize,
}

impl AvailabilityCounts {
    pub fn total(&self) -> usize {
        self.available + self.unavailable()
    }

    pub fn unavailable(&self) -> usize {
        self.absent + self.other_method + self.shadowed + self.other_parameters
    }
}

impl fmt::Display for AvailabilityCounts {
    /// "108 of 229 operations available (96 absent, 16 other method, 9 shadowed)".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} operations available",
            self.available,
            self.total()
        )?;
        let parts: Vec<String> = [
            (self.absent, "absent"),
            (self.other_method, "other method"),
            (self.shadowed, "shadowed"),
            (self.other_parameters, "other parameters"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, w)| format!("{n} {w}"))
        .collect();
        if !parts.is_empty() {
            write!(f, " ({})", parts.join(", "))?;
        }
        Ok(())
    }
}

/// Why a call cannot go to the live route. Nothing is sent for any of them. The `Display` text
/// is the sentence a model reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveRefusal {
    /// The operation (or its `{source}`) is not available on this server.
    Unavailable {
        operation_id: &'static str,
        server: String,
        status: &'static str,
        reason: String,
    },
    /// Fields the route does not accept (it would ignore them and answer as if they were not
    /// given).
    NotAccepted {
        operation_id: &'static str,
        location: Location,
        names: Vec<String>,
        accepted: Vec<String>,
        route: String,
        server: String,
    },
    /// `page`/`count` on a route that always answers the whole list.
    NoPaging {
        operation_id: &'static str,
        names: Vec<String>,
        route: String,
        server: String,
    },
    /// A translation needs a value the call did not give, or cannot express it.
    Untranslatable {
        operation_id: &'static str,
        message: String,
    },
    /// A path value would reach another route of the server.
    ValueReachesOtherRoute {
        operation_id: &'static str,
        name: String,
        route: String,
    },
}

impl LiveRefusal {
    pub fn operation_id(&self) -> &'static str {
        match self {
            LiveRefusal::Unavailable { operation_id, .. }
            | LiveRefusal::NotAccepted { operation_id, .. }
            | LiveRefusal::NoPaging { operation_id, .. }
            | LiveRefusal::Untranslatable { operation_id, .. }
            | LiveRefusal::ValueReachesOtherRoute { operation_id, .. } => operation_id,
        }
    }

    /// `operation_unavailable`, `invalid_path_parameter` or `invalid_input`.
    pub fn code(&self) -> &'static str {
        match self {
            LiveRefusal::Unavailable { .. } => "operation_unavailable",
            LiveRefusal::ValueReachesOtherRoute { .. } => "invalid_path_parameter",
            LiveRefusal::NotAccepted { .. }
            | LiveRefusal::NoPaging { .. }
            | LiveRefusal::Untranslatable { .. } => "invalid_input",
        }
    }
}

fn backticked(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for LiveRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LiveRefusal::Unavailable {
                operation_id,
                server,
                reason,
                ..
            } => write!(f, "{operation_id} is not available on {server}: {reason}"),
            LiveRefusal::NotAccepted {
                operation_id,
                location,
                names,
                accepted,
                route,
                server,
            } => {
                let noun = match location {
                    Location::Body => "body field",
                    Location::PathParam => "path parameter",
                    Location::Query => "query field",
                };
                write!(
                    f,
                    "{operation_id}: {server} does not accept the {noun}{} {} on {route} (it would \
                     ignore {}); leave {} out",
                    if names.len() == 1 { "" } else { "s" },
                    backticked(names),
                    if names.len() == 1 { "it" } else { "them" },
                    if names.len() == 1 { "it" } else { "them" },
                )?;
                if !accepted.is_empty() {
                    write!(f, "; it accepts {}", backticked(accepted))?;
                }
                Ok(())
            }
            LiveRefusal::NoPaging {
                operation_id,
                names,
                route,
                server,
            } => write!(
                f,
                "{operation_id}: {server} does not page {route}: it always answers the whole list, \
                 so {} would be ignored; call it without {} and read the part you need",
                backticked(names),
                backticked(names)
            ),
            LiveRefusal::Untranslatable { message, .. } => f.write_str(message),
            LiveRefusal::ValueReachesOtherRoute {
                operation_id,
                name,
                route,
            } => write!(
                f,
                "{operation_id}: this value of path parameter `{name}` would reach {route} on this \
                 MoviePilot, another operation; nothing was sent"
            ),
        }
    }
}

impl std::error::Error for LiveRefusal {}

/// The catalogue reconciled with one server document.
#[derive(Debug, Clone)]
pub struct Reconciliation {
    api: ServerApi,
    label: String,
    ops: Vec<LiveOperation>,
    by_id: HashMap<&'static str, usize>,
    counts: AvailabilityCounts,
}

/// Segments without a trailing empty one (`/a/b/` and `/a/b` have the same shape).
fn shape(template: &str) -> Vec<TemplateSegment<'_>> {
    let mut segs: Vec<_> = template_segments(template).collect();
    if segs.len() > 1 && segs.last() == Some(&TemplateSegment::Literal("")) {
        segs.pop();
    }
    segs
}

/// How `route` relates to the contract's segments.
#[derive(Debug, PartialEq, Eq)]
enum Fit {
    /// Same literals, placeholders at the same positions.
    Same,
    /// Matches every request of the contract's route: placeholders where it has literals.
    Covers,
    /// Matches some requests: a literal where the contract has a placeholder.
    Sometimes,
    No,
}

fn fit(contract: &[TemplateSegment<'_>], route: &[TemplateSegment<'_>]) -> Fit {
    if contract.len() != route.len() {
        return Fit::No;
    }
    let mut covers = false;
    let mut sometimes = false;
    for (c, r) in contract.iter().zip(route) {
        match (c, r) {
            (TemplateSegment::Literal(a), TemplateSegment::Literal(b)) if a == b => {}
            (TemplateSegment::Literal(_), TemplateSegment::Literal(_)) => return Fit::No,
            (TemplateSegment::Literal(_), TemplateSegment::Param(_)) => covers = true,
            (TemplateSegment::Param(_), TemplateSegment::Literal(_)) => sometimes = true,
            (TemplateSegment::Param(_), TemplateSegment::Param(_)) => {}
        }
    }
    match (covers, sometimes) {
        (false, false) => Fit::Same,
        (true, false) => Fit::Covers,
        _ => Fit::Sometimes,
    }
}

/// The contract's segments with `{source}` replaced by `source`.
fn expanded<'a>(op: &'a Operation, source: Option<&'a str>) -> Vec<TemplateSegment<'a>> {
    shape(op.path)
        .into_iter()
        .map(|s| match (s, source) {
            (TemplateSegment::Param("source"), Some(v)) => TemplateSegment::Literal(v),
            (other, _) => other,
        })
        .collect()
}

impl Reconciliation {
    /// Reconciles every catalogue operation with `api`.
    pub fn new(catalogue: &Catalogue, api: ServerApi) -> Reconciliation {
        let shapes: Vec<Vec<TemplateSegment<'_>>> =
            api.routes.iter().map(|r| shape(&r.path)).collect();
        let mut ops = Vec::with_capacity(catalogue.len());
        let mut counts = AvailabilityCounts::default();
        for op in catalogue.operations() {
            let live = live_operation(op, &api, &shapes);
            match &live.availability {
                Availability::Available => counts.available += 1,
                Availability::Absent => counts.absent += 1,
                Availability::OtherMethod { .. } => counts.other_method += 1,
                Availability::Shadowed { .. } => counts.shadowed += 1,
                Availability::OtherParameters { .. } => counts.other_parameters += 1,
            }
            ops.push(live);
        }
        let by_id = ops.iter().enumerate().map(|(i, o)| (o.id, i)).collect();
        let label = api.label();
        Reconciliation {
            api,
            label,
            ops,
            by_id,
            counts,
        }
    }

    /// The server's version (`None` when its document states none).
    pub fn version(&self) -> Option<&str> {
        self.api.version.as_deref()
    }

    pub fn fingerprint(&self) -> &str {
        &self.api.fingerprint
    }

    /// "MoviePilot v2.5.6 (OpenAPI 3f2a…)" — how the server is named in messages.
    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn counts(&self) -> AvailabilityCounts {
        self.counts
    }

    /// How many routes the server documents.
    pub fn server_operations(&self) -> usize {
        self.api.routes.len()
    }

    pub fn get(&self, id: &str) -> Option<&LiveOperation> {
        self.by_id.get(id).map(|&i| &self.ops[i])
    }

    pub fn operations(&self) -> &[LiveOperation] {
        &self.ops
    }

    /// Whether `id` can be called here.
    pub fn is_available(&self, id: &str) -> bool {
        self.get(id).is_some_and(|o| o.availability.is_available())
    }

    fn unavailable(&self, op: &Operation, availability: &Availability) -> LiveRefusal {
        LiveRefusal::Unavailable {
            operation_id: op.id,
            server: self.label.clone(),
            status: availability.status(),
            reason: availability.reason(op),
        }
    }

    /// The request for the live route: refused when the operation is unavailable or the call
    /// uses what the route does not accept; translated where the route names things otherwise.
    pub fn adapt(
        &self,
        op: &Operation,
        request: &PreparedRequest,
    ) -> Result<PreparedRequest, LiveRefusal> {
        let Some(live) = self.get(op.id) else {
            return Err(self.unavailable(op, &Availability::Absent));
        };
        if !live.availability.is_available() {
            return Err(self.unavailable(op, &live.availability));
        }
        let values = request.path_values();
        let source = op
            .path_params
            .iter()
            .position(|f| f.name == "source")
            .and_then(|i| values.get(i))
            .map(String::as_str);
        let route = match live.routes.iter().find(|(s, _)| *s == source) {
            Some((_, r)) => r,
            None => {
                let missing = live
                    .missing_sources
                    .iter()
                    .find(|(s, _)| Some(*s) == source)
                    .map(|(_, a)| a.clone())
                    .unwrap_or(Availability::Absent);
                let mut refusal = self.unavailable(op, &missing);
                if let LiveRefusal::Unavailable { reason, .. } = &mut refusal {
                    let served: Vec<&str> = live.routes.iter().filter_map(|(s, _)| *s).collect();
                    *reason = format!(
                        "{reason}; sources this server serves for it: {}",
                        served.join(", ")
                    );
                }
                return Err(refusal);
            }
        };
        self.adapt_to(op, request, route)
    }

    fn adapt_to(
        &self,
        op: &Operation,
        request: &PreparedRequest,
        route: &LiveRoute,
    ) -> Result<PreparedRequest, LiveRefusal> {
        let server_route = &self.api.routes[route.route];
        let given: BTreeMap<&str, &str> = request
            .query_pairs()
            .iter()
            .map(|(k, v)| (k.as_ref(), v.as_str()))
            .collect();
        let consumed: BTreeSet<&str> = route
            .translations
            .iter()
            .flat_map(|t| t.consumes().iter().copied())
            .collect();
        // Constants the gateway fills in itself are dropped quietly; what the caller gave is
        // refused by name.
        let filled = |name: &str| {
            op.query_field(name)
                .is_some_and(|f| matches!(f.kind, crate::contract::FieldKind::Const(_)))
        };
        // In the contract's order, each name once.
        let mut not_accepted: Vec<String> = Vec::new();
        for (k, _) in request.query_pairs() {
            let k = k.as_ref();
            if !route.accepted_query.contains(k)
                && !consumed.contains(k)
                && !filled(k)
                && !not_accepted.iter().any(|n| n == k)
            {
                not_accepted.push(k.to_owned());
            }
        }
        let paging: Vec<String> = not_accepted
            .iter()
            .filter(|n| *n == "page" || *n == "count")
            .cloned()
            .collect();
        if !paging.is_empty() && paging.len() == not_accepted.len() {
            return Err(LiveRefusal::NoPaging {
                operation_id: op.id,
                names: paging,
                route: format!("{} {}", server_route.method, server_route.path),
                server: self.label.clone(),
            });
        }
        if !not_accepted.is_empty() {
            return Err(LiveRefusal::NotAccepted {
                operation_id: op.id,
                location: Location::Query,
                names: not_accepted,
                accepted: route.accepted_query.iter().cloned().collect(),
                route: format!("{} {}", server_route.method, server_route.path),
                server: self.label.clone(),
            });
        }
        if let (
            Some(Value::Object(body)),
            RouteBody::Object {
                fields: Some(f), ..
            },
        ) = (request.body(), &route.body)
        {
            let mut names: Vec<String> = body
                .keys()
                .filter(|k| !f.contains(k.as_str()))
                .cloned()
                .collect();
            names.sort_unstable();
            if !names.is_empty() {
                return Err(LiveRefusal::NotAccepted {
                    operation_id: op.id,
                    location: Location::Body,
                    names,
                    accepted: f.iter().cloned().collect(),
                    route: format!("{} {}", server_route.method, server_route.path),
                    server: self.label.clone(),
                });
            }
        }
        if request.body().is_some() && matches!(route.body, RouteBody::None) {
            return Err(LiveRefusal::NotAccepted {
                operation_id: op.id,
                location: Location::Body,
                names: vec!["body".to_owned()],
                accepted: Vec::new(),
                route: format!("{} {}", server_route.method, server_route.path),
                server: self.label.clone(),
            });
        }

        // Path values in the server's placeholder order, then the translations.
        let values = request.path_values();
        let mut path_values: Vec<String> = route
            .value_positions
            .iter()
            .filter_map(|&i| values.get(i).cloned())
            .collect();
        let mut query: Vec<(Cow<'static, str>, String)> = request
            .query_pairs()
            .iter()
            .filter(|(k, _)| !consumed.contains(k.as_ref()))
            .filter(|(k, _)| route.accepted_query.contains(k.as_ref()))
            .cloned()
            .collect();
        for t in &route.translations {
            self.translate(op, t, &given, values, &mut path_values, &mut query)?;
        }
        for (i, v) in path_values.iter().enumerate() {
            if let Some(reason) = crate::route::segment_refusal(v) {
                return Err(LiveRefusal::Untranslatable {
                    operation_id: op.id,
                    message: format!(
                        "{}: the translated path parameter {} {reason}; nothing was sent",
                        op.id,
                        i + 1
                    ),
                });
            }
        }
        if let Some(other) = self.reached_instead(route, &path_values) {
            let name = op.path_params.first().map_or("", |f| f.name).to_owned();
            return Err(LiveRefusal::ValueReachesOtherRoute {
                operation_id: op.id,
                name,
                route: other,
            });
        }
        Ok(request.for_live_route(Cow::Owned(route.template.to_string()), path_values, query))
    }

    fn translate(
        &self,
        op: &Operation,
        t: &Translation,
        given: &BTreeMap<&str, &str>,
        values: &[String],
        path_values: &mut [String],
        query: &mut Vec<(Cow<'static, str>, String)>,
    ) -> Result<(), LiveRefusal> {
        let need = |name: &str| LiveRefusal::Untranslatable {
            operation_id: op.id,
            message: format!(
                "{}: {} names media as `<source>:<id>`, so `{name}` is required here; nothing was sent",
                op.id, self.label
            ),
        };
        let combined = |id: &str, source: &str| {
            if id.contains(':') {
                id.to_owned()
            } else {
                format!("{}:{id}", media_id_prefix(source))
            }
        };
        match t {
            Translation::MediaIdPath { position } => {
                let id_index = op
                    .path_params
                    .iter()
                    .position(|f| f.name == "media_id")
                    .ok_or_else(|| need("media_id"))?;
                let id = values.get(id_index).ok_or_else(|| need("media_id"))?;
                let source = match given.get("media_source") {
                    Some(s) => *s,
                    None if id.contains(':') => "",
                    None => return Err(need("media_source")),
                };
                if let Some(slot) = path_values.get_mut(*position) {
                    *slot = combined(id, source);
                }
            }
            Translation::MediaIdQuery => {
                if let Some(id) = given.get("media_id") {
                    let source = match given.get("media_source") {
                        Some(s) => *s,
                        None if id.contains(':') => "",
                        None => return Err(need("media_source")),
                    };
                    query.push((Cow::Borrowed("mediaid"), combined(id, source)));
                }
            }
            Translation::ProviderIdQuery { tmdb, douban } => {
                if let Some(id) = given.get("media_id") {
                    let source = given.get("media_source").copied().unwrap_or("themoviedb");
                    let name = match media_id_prefix(source) {
                        "tmdb" if *tmdb => "tmdbid",
                        "douban" if *douban => "doubanid",
                        other => {
                            let mut served = Vec::new();
                            if *tmdb {
                                served.push("themoviedb");
                            }
                            if *douban {
                                served.push("douban");
                            }
                            return Err(LiveRefusal::Untranslatable {
                                operation_id: op.id,
                                message: format!(
                                    "{}: {} looks media up here by {} ids only, not `{other}`; \
                                     nothing was sent",
                                    op.id,
                                    self.label,
                                    served.join(" or ")
                                ),
                            });
                        }
                    };
                    let id = id.split_once(':').map_or(*id, |(_, rest)| rest);
                    query.push((Cow::Borrowed(name), id.to_owned()));
                }
            }
        }
        Ok(())
    }

    /// The route (as `METHOD /path`) a filled route would reach instead of its own, if any:
    /// among the routes that match the filled segments, the most specific wins (a literal
    /// beats a placeholder at the first position where they differ).
    fn reached_instead(&self, route: &LiveRoute, values: &[String]) -> Option<String> {
        if route.capturers.is_empty() {
            return None;
        }
        let own = &self.api.routes[route.route];
        let filled: Vec<&str> = {
            let mut values = values.iter();
            shape(&own.path)
                .into_iter()
                .map(|s| match s {
                    TemplateSegment::Literal(l) => l,
                    TemplateSegment::Param(_) => values.next().map_or("", String::as_str),
                })
                .collect()
        };
        let literalness = |r: &ServerRoute| -> Option<Vec<bool>> {
            let segs = shape(&r.path);
            (segs.len() == filled.len()).then_some(())?;
            segs.iter()
                .zip(&filled)
                .map(|(s, v)| match s {
                    TemplateSegment::Literal(l) => (l == v).then_some(true),
                    TemplateSegment::Param(_) => Some(false),
                })
                .collect()
        };
        let mine = literalness(own)?;
        route
            .capturers
            .iter()
            .map(|&i| &self.api.routes[i])
            .filter_map(|r| literalness(r).map(|l| (r, l)))
            .filter(|(_, l)| *l > mine)
            .max_by(|a, b| a.1.cmp(&b.1))
            .map(|(r, _)| format!("{} {}", r.method, r.path))
    }
}

fn live_operation(
    op: &Operation,
    api: &ServerApi,
    shapes: &[Vec<TemplateSegment<'_>>],
) -> LiveOperation {
    let sources: Vec<Option<&'static str>> = if op.path_param("source").is_some() {
        crate::catalogue::ALLOWED_SOURCES
            .iter()
            .map(|s| Some(*s))
            .collect()
    } else {
        vec![None]
    };
    let mut routes = Vec::new();
    let mut missing = Vec::new();
    for source in sources {
        match live_route(op, source, api, shapes) {
            Ok(r) => routes.push((source, r)),
            Err(a) => missing.push((source, a)),
        }
    }
    let availability = if !routes.is_empty() {
        Availability::Available
    } else {
        // The most telling reason among the sources: a route that answers for it beats a
        // missing method beats a missing route.
        missing
            .iter()
            .map(|(_, a)| a.clone())
            .max_by_key(|a| match a {
                Availability::Shadowed { .. } => 4,
                Availability::OtherParameters { .. } => 3,
                Availability::OtherMethod { .. } => 2,
                Availability::Absent | Availability::Available => 1,
            })
            .unwrap_or(Availability::Absent)
    };
    LiveOperation {
        id: op.id,
        availability,
        routes,
        missing_sources: missing
            .into_iter()
            .filter_map(|(s, a)| s.map(|s| (s, a)))
            .collect(),
    }
}

fn live_route(
    op: &Operation,
    source: Option<&str>,
    api: &ServerApi,
    shapes: &[Vec<TemplateSegment<'_>>],
) -> Result<LiveRoute, Availability> {
    let contract = expanded(op, source);
    let mut same = None;
    let mut covering = None;
    let mut other_methods: Vec<String> = Vec::new();
    let mut capturers = Vec::new();
    for (i, (r, s)) in api.routes.iter().zip(shapes).enumerate() {
        let f = fit(&contract, s);
        if f == Fit::No {
            continue;
        }
        if r.method != op.method {
            if f != Fit::Sometimes {
                other_methods.push(format!("{} {}", r.method, r.path));
            }
            continue;
        }
        match f {
            Fit::Same if same.is_none() => same = Some(i),
            Fit::Covers if covering.is_none() => covering = Some(i),
            Fit::Sometimes => capturers.push(i),
            _ => {}
        }
    }
    let Some(index) = same else {
        if let Some(c) = covering {
            let r = &api.routes[c];
            return Err(Availability::Shadowed {
                method: r.method,
                route: r.path.clone(),
            });
        }
        if !other_methods.is_empty() {
            return Err(Availability::OtherMethod {
                routes: other_methods,
            });
        }
        return Err(Availability::Absent);
    };
    let server = &api.routes[index];
    let server_shape = &shapes[index];

    // Which contract value each server placeholder takes, by position.
    let contract_full = shape(op.path);
    let mut contract_value_index = Vec::new();
    let mut n = 0;
    for s in &contract_full {
        contract_value_index.push(match s {
            TemplateSegment::Param(_) => {
                n += 1;
                Some(n - 1)
            }
            TemplateSegment::Literal(_) => None,
        });
    }
    let mut value_positions = Vec::new();
    let mut translations = Vec::new();
    for (pos, s) in server_shape.iter().enumerate() {
        if let TemplateSegment::Param(name) = s {
            let Some(Some(ci)) = contract_value_index.get(pos) else {
                return Err(Availability::OtherParameters {
                    requires: vec![format!("path parameter `{name}`")],
                });
            };
            let contract_name = match contract_full.get(pos) {
                Some(TemplateSegment::Param(c)) => *c,
                _ => "",
            };
            if *name == "mediaid"
                && contract_name == "media_id"
                && op.query_field("media_source").is_some()
            {
                translations.push(Translation::MediaIdPath {
                    position: value_positions.len(),
                });
            }
            value_positions.push(*ci);
        }
    }
    let has = |name: &str| server.query_param(name).is_some();
    if has("mediaid")
        && op.query_field("media_id").is_some()
        && op.query_field("media_source").is_some()
    {
        translations.push(Translation::MediaIdQuery);
    } else if (has("tmdbid") || has("doubanid"))
        && op.query_field("media_id").is_some()
        && !has("media_id")
    {
        translations.push(Translation::ProviderIdQuery {
            tmdb: has("tmdbid"),
            douban: has("doubanid"),
        });
    }
    let supplied: BTreeSet<&str> = translations
        .iter()
        .flat_map(Translation::supplies)
        .collect();
    let mut requires: Vec<String> = server
        .query
        .iter()
        .filter(|q| {
            q.required && op.query_field(&q.name).is_none() && !supplied.contains(q.name.as_str())
        })
        .map(|q| format!("query field `{}`", q.name))
        .collect();
    let contract_has_body = !matches!(op.body.kind, crate::contract::BodyKind::None);
    match &server.body {
        RouteBody::Form => requires.push("a form body (this agent sends JSON)".to_owned()),
        RouteBody::Object { body_required, .. } | RouteBody::Other { body_required }
            if *body_required && !contract_has_body =>
        {
            requires.push("a request body".to_owned());
        }
        RouteBody::None if op.body.required => {
            // The contract's body would be dropped: the call would do something else.
            requires.push("no body (this operation's contract requires one)".to_owned());
        }
        _ => {}
    }
    if !requires.is_empty() {
        return Err(Availability::OtherParameters { requires });
    }
    Ok(LiveRoute {
        route: index,
        template: Arc::from(server.path.as_str()),
        value_positions,
        accepted_query: server.query.iter().map(|q| q.name.clone()).collect(),
        body: server.body.clone(),
        translations,
        capturers,
    })
}
