//! The operation catalogue: `catalog/moviepilot-operations.tsv` compiled in and parsed once.
//! Every MoviePilot call the agent can make is one row here: a fixed method and route, its effect
//! class and policy, and its typed input contract. Nothing outside the catalogue can be called.

use crate::contract::{
    self, BodyKind, BodySpec, Field, FieldKind, InputContract, LEGACY_PAGINATION_NOTE,
};
use mpa_protocol::{EffectClass, Outcome};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt;
use std::sync::LazyLock;
use std::time::Duration;

/// The catalogue file, as shipped in the repository.
pub const CATALOGUE_TSV: &str = include_str!("../../../catalog/moviepilot-operations.tsv");

const COLUMNS: [&str; 14] = [
    "operation_id",
    "category",
    "http_method",
    "path_template",
    "effect",
    "required_role",
    "confirmation",
    "recovery",
    "result_sensitivity",
    "collection_shape",
    "path_params",
    "query",
    "body",
    "notes",
];

/// Placeholders checked against an allow-list whatever the operation declares (MoviePilot's
/// executor does the same): a dynamic `{source}` route must not reach arbitrary providers.
pub const ALLOWED_SOURCES: [&str; 4] = ["tmdb", "douban", "bangumi", "anilist"];
pub const ALLOWED_ACTIONS: [&str; 2] = ["start", "stop"];

/// The request timeout MoviePilot's own gateway uses, and the one for torrent searches, which
/// query every indexer in turn.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
pub const LONG_TIMEOUT: Duration = Duration::from_secs(300);

macro_rules! word_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
        pub enum $name { $(#[serde(rename = $text)] $variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            pub fn parse(s: &str) -> Option<Self> {
                match s { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

word_enum!(
    /// The HTTP method of an operation's fixed route.
    HttpMethod { Get = "GET", Post = "POST", Put = "PUT", Delete = "DELETE", Patch = "PATCH" }
);
word_enum!(
    /// Who may call an operation (MoviePilot's policy roles).
    Role {
        User = "user",
        ChannelAdmin = "channel_admin",
        SystemAdmin = "system_admin",
        SystemInternal = "system_internal",
    }
);
word_enum!(
    /// Whether MoviePilot asks the user before the call.
    Confirmation { None = "none", Required = "required", Unsupported = "unsupported" }
);
word_enum!(
    /// How a write can be recovered or verified after an unknown outcome.
    Recovery {
        None = "none",
        Transaction = "transaction",
        BeforeState = "before_state",
        RecoverableDelete = "recoverable_delete",
        Idempotent = "idempotent",
        Reconcile = "reconcile",
        ManualOnly = "manual_only",
    }
);
word_enum!(
    /// How sensitive an operation's result is.
    Sensitivity { Normal = "normal", Private = "private", Secret = "secret", Unknown = "unknown" }
);

impl Role {
    /// Whether an ordinary (non-admin) user is refused this operation.
    pub fn requires_admin(self) -> bool {
        match self {
            Role::User => false,
            Role::ChannelAdmin | Role::SystemAdmin | Role::SystemInternal => true,
        }
    }
}

/// How a list result is paged (`x-moviepilot-collection`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Paging {
    /// The whole list unless `page`/`count` are given (legacy full-list pagination).
    Unpaginated,
    /// The endpoint's own page/count defaults apply.
    EndpointDefined,
}

/// The shape of an operation's result collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum CollectionShape {
    /// Not a collection.
    None,
    /// `data` is a list; `total` says whether `collection.total_count` is exact.
    List { paging: Paging, total: bool },
    /// The endpoint returns a page object; `items` and `total` are dotted paths into it.
    PageObject {
        items: &'static str,
        total: &'static str,
    },
}

impl CollectionShape {
    fn parse(s: &'static str) -> Result<Self, String> {
        Ok(match s {
            "-" => CollectionShape::None,
            "list/unpaginated/total" => CollectionShape::List {
                paging: Paging::Unpaginated,
                total: true,
            },
            "list/endpoint-defined/total" => CollectionShape::List {
                paging: Paging::EndpointDefined,
                total: true,
            },
            "list/endpoint-defined/no-total" => CollectionShape::List {
                paging: Paging::EndpointDefined,
                total: false,
            },
            other => {
                let inner = other
                    .strip_prefix("page_object(")
                    .and_then(|r| r.strip_suffix(")/endpoint-defined"))
                    .ok_or_else(|| format!("unknown collection shape `{other}`"))?;
                let (items, total) = inner
                    .split_once(',')
                    .ok_or_else(|| format!("page_object needs two paths: `{other}`"))?;
                CollectionShape::PageObject { items, total }
            }
        })
    }
}

impl fmt::Display for CollectionShape {
    /// The catalogue's own notation.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectionShape::None => f.write_str("-"),
            CollectionShape::List { paging, total } => write!(
                f,
                "list/{}/{}",
                match paging {
                    Paging::Unpaginated => "unpaginated",
                    Paging::EndpointDefined => "endpoint-defined",
                },
                if *total { "total" } else { "no-total" }
            ),
            CollectionShape::PageObject { items, total } => {
                write!(f, "page_object({items},{total})/endpoint-defined")
            }
        }
    }
}

/// One allow-listed MoviePilot operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Operation {
    pub id: &'static str,
    pub category: &'static str,
    pub method: HttpMethod,
    /// The route template, placeholders in braces (`/api/v1/subscribe/{subscribe_id}`).
    pub path: &'static str,
    pub effect: EffectClass,
    pub role: Role,
    pub confirmation: Confirmation,
    pub recovery: Recovery,
    pub sensitivity: Sensitivity,
    /// `false` for the rows whose policy MoviePilot has not published (`?` in the catalogue):
    /// their role, confirmation, recovery and sensitivity are the documented conservative
    /// defaults (system_admin, required, none, unknown).
    pub policy_known: bool,
    pub collection: CollectionShape,
    /// In route order.
    pub path_params: Vec<Field>,
    pub query: Vec<Field>,
    pub body: BodySpec,
    /// Legacy full-list pagination: `page`/`count` optional, omit both for the whole list.
    pub legacy_pagination: bool,
    pub notes: Option<&'static str>,
}

impl Operation {
    pub fn path_param(&self, name: &str) -> Option<&Field> {
        self.path_params.iter().find(|f| f.name == name)
    }

    pub fn query_field(&self, name: &str) -> Option<&Field> {
        self.query.iter().find(|f| f.name == name)
    }

    /// Torrent searches walk every indexer: they get [`LONG_TIMEOUT`] instead of
    /// [`DEFAULT_TIMEOUT`].
    pub fn is_long_running(&self) -> bool {
        self.id == "search.torrents"
    }

    /// The outcome a 2xx answer means. `scheduler.run` only queues the job: accepted, not done.
    pub fn success_outcome(&self) -> Outcome {
        if self.id == "scheduler.run" {
            Outcome::Pending
        } else {
            Outcome::Succeeded
        }
    }

    /// What this operation accepts, for a model to correct its call.
    pub fn input_contract(&self) -> InputContract {
        let mut allowed = Vec::new();
        let mut required = Vec::new();
        if !self.path_params.is_empty() {
            allowed.push("path_params");
            required.push("path_params");
        }
        if !self.query.is_empty() {
            allowed.push("query");
            if self.query.iter().any(|f| f.required && !is_const(f)) {
                required.push("query");
            }
        }
        if !matches!(self.body.kind, BodyKind::None) {
            allowed.push("body");
            if self.body.required {
                required.push("body");
            }
        }
        InputContract {
            operation_id: self.id,
            method: self.method.as_str(),
            path: self.path,
            allowed_arguments: allowed,
            required_arguments: required,
            path_params: (!self.path_params.is_empty())
                .then(|| contract::object_contract(&self.path_params, None)),
            query: (!self.query.is_empty()).then(|| {
                contract::object_contract(
                    &self.query,
                    self.legacy_pagination.then_some(LEGACY_PAGINATION_NOTE),
                )
            }),
            body: contract::body_contract(&self.body),
        }
    }
}

pub(crate) fn is_const(f: &Field) -> bool {
    matches!(f.kind, FieldKind::Const(_))
}

/// A row of the catalogue file that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogueError {
    /// 1-based line in the file.
    pub line: usize,
    pub column: &'static str,
    pub message: String,
}

impl fmt::Display for CatalogueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "operation catalogue line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for CatalogueError {}

/// Every allow-listed operation, in file order, indexed by id.
#[derive(Debug, Clone, Default)]
pub struct Catalogue {
    operations: Vec<Operation>,
    by_id: HashMap<&'static str, usize>,
    categories: Vec<&'static str>,
}

static EMBEDDED: LazyLock<Result<Catalogue, CatalogueError>> =
    LazyLock::new(|| Catalogue::parse(CATALOGUE_TSV));
static EMPTY: LazyLock<Catalogue> = LazyLock::new(Catalogue::default);

/// The catalogue compiled into this binary, parsed on first use.
///
/// The file is checked by this crate's tests, so a parse failure is a build defect; it is logged
/// and the catalogue is then empty (every id answers `unknown_operation`) rather than taking the
/// host down. [`embedded_catalogue_error`] reports it for start-up checks.
pub fn catalogue() -> &'static Catalogue {
    match &*EMBEDDED {
        Ok(c) => c,
        Err(e) => {
            static LOGGED: std::sync::Once = std::sync::Once::new();
            LOGGED.call_once(|| {
                tracing::error!(error = %e, "the embedded MoviePilot operation catalogue is invalid");
            });
            &EMPTY
        }
    }
}

/// Why the embedded catalogue could not be parsed, if it could not.
pub fn embedded_catalogue_error() -> Option<&'static CatalogueError> {
    EMBEDDED.as_ref().err()
}

fn policy_word<T: Copy>(
    raw: &str,
    unknown: T,
    parse: fn(&str) -> Option<T>,
) -> Result<(T, bool), String> {
    if raw == "?" {
        return Ok((unknown, false));
    }
    parse(raw)
        .map(|v| (v, true))
        .ok_or_else(|| format!("unknown value `{raw}`"))
}

/// The `{name}` placeholders of a route template, in order.
pub fn placeholders(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        out.push(&rest[open + 1..open + close]);
        rest = &rest[open + close + 1..];
    }
    out
}

fn parse_fields(col: &'static str) -> Result<(Vec<Field>, Vec<&'static str>), String> {
    let mut fields = Vec::new();
    let mut optional_markers = Vec::new();
    if col == "-" {
        return Ok((fields, optional_markers));
    }
    for entry in contract::split_top(col, "; ") {
        let parsed = contract::parse_field(entry)?;
        if parsed.optional_marker {
            optional_markers.push(parsed.field.name);
        }
        fields.push(parsed.field);
        fields.extend(parsed.extras);
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = fields.iter().find(|f| !seen.insert(f.name)) {
        return Err(format!("field `{}` declared twice", dup.name));
    }
    Ok((fields, optional_markers))
}

/// The pagination convention (runtime.md §11.2) as ranges on fields that declare none: `page`
/// starts at 1 (at 0 where the endpoint's default is 0), `count` is 1..200.
fn apply_paging_convention(fields: &mut [Field]) {
    for f in fields.iter_mut().filter(|f| f.kind == FieldKind::Integer) {
        match f.name {
            "page" if f.minimum.is_none() => {
                let zero_based = f.default == Some(serde_json::Value::from(0));
                f.minimum = Some(if zero_based { 0 } else { 1 });
            }
            "count" => {
                f.minimum.get_or_insert(1);
                f.maximum.get_or_insert(200);
            }
            _ => {}
        }
    }
}

fn parse_row(line: &'static str) -> Result<Operation, (&'static str, String)> {
    let cols: Vec<&'static str> = line.split('\t').collect();
    if cols.len() != COLUMNS.len() {
        return Err((
            "operation_id",
            format!("{} columns, {} expected", cols.len(), COLUMNS.len()),
        ));
    }
    let at = |i: usize| move |m: String| (COLUMNS[i], m);
    let id = cols[0];
    if id.is_empty()
        || !id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'_')
    {
        return Err((COLUMNS[0], format!("bad operation id `{id}`")));
    }
    let method = HttpMethod::parse(cols[2]).ok_or_else(|| (COLUMNS[2], cols[2].to_owned()))?;
    let path = cols[3];
    if !path.starts_with("/api/v1/") {
        return Err((COLUMNS[3], format!("route `{path}` is not under /api/v1/")));
    }
    let effect = EffectClass::parse(cols[4])
        .ok_or_else(|| (COLUMNS[4], format!("unknown effect `{}`", cols[4])))?;
    let (role, role_known) = policy_word(cols[5], Role::SystemAdmin, Role::parse).map_err(at(5))?;
    let (confirmation, c_known) =
        policy_word(cols[6], Confirmation::Required, Confirmation::parse).map_err(at(6))?;
    let (recovery, r_known) =
        policy_word(cols[7], Recovery::None, Recovery::parse).map_err(at(7))?;
    let (sensitivity, s_known) =
        policy_word(cols[8], Sensitivity::Unknown, Sensitivity::parse).map_err(at(8))?;
    let collection = CollectionShape::parse(cols[9]).map_err(at(9))?;
    let (path_params, _) = parse_fields(cols[10]).map_err(at(10))?;
    let names: Vec<&str> = path_params.iter().map(|f| f.name).collect();
    if placeholders(path) != names {
        return Err((
            COLUMNS[10],
            format!("path params {names:?} do not match the placeholders of `{path}`"),
        ));
    }
    if let Some(f) = path_params.iter().find(|f| !f.required) {
        return Err((
            COLUMNS[10],
            format!("path param `{}` is not required", f.name),
        ));
    }
    let (mut query, optional_markers) = parse_fields(cols[11]).map_err(at(11))?;
    let legacy_pagination =
        optional_markers.contains(&"page") && optional_markers.contains(&"count");
    if !optional_markers.is_empty() && !legacy_pagination {
        return Err((
            COLUMNS[11],
            "(opt) marks only the page/count pair of legacy pagination".into(),
        ));
    }
    apply_paging_convention(&mut query);
    let body = contract::parse_body(cols[12]).map_err(at(12))?;
    if method == HttpMethod::Get && !matches!(body.kind, BodyKind::None) {
        return Err((COLUMNS[12], "a GET operation declares a body".into()));
    }
    Ok(Operation {
        id,
        category: cols[1],
        method,
        path,
        effect,
        role,
        confirmation,
        recovery,
        sensitivity,
        policy_known: role_known && c_known && r_known && s_known,
        collection,
        path_params,
        query,
        body,
        legacy_pagination,
        notes: (cols[13] != "-").then_some(cols[13]),
    })
}

impl Catalogue {
    /// Parses the catalogue's TSV text (header line first). Borrowed from `'static` text, so the
    /// operations' names point into it without copies.
    pub fn parse(tsv: &'static str) -> Result<Catalogue, CatalogueError> {
        let mut lines = tsv.lines().enumerate();
        match lines.next() {
            Some((_, header)) if header.split('\t').eq(COLUMNS) => {}
            _ => {
                return Err(CatalogueError {
                    line: 1,
                    column: "operation_id",
                    message: "the header line does not name the 14 catalogue columns".into(),
                });
            }
        }
        let mut cat = Catalogue::default();
        for (i, line) in lines {
            if line.trim().is_empty() {
                continue;
            }
            let op = parse_row(line).map_err(|(column, message)| CatalogueError {
                line: i + 1,
                column,
                message,
            })?;
            if cat.by_id.insert(op.id, cat.operations.len()).is_some() {
                return Err(CatalogueError {
                    line: i + 1,
                    column: "operation_id",
                    message: format!("duplicate operation id `{}`", op.id),
                });
            }
            if !cat.categories.contains(&op.category) {
                cat.categories.push(op.category);
            }
            cat.operations.push(op);
        }
        cat.categories.sort_unstable();
        Ok(cat)
    }

    pub fn len(&self) -> usize {
        self.operations.len()
    }

    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    /// All operations in file order (sorted by id).
    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }

    /// The operation with exactly this id.
    pub fn get(&self, id: &str) -> Option<&Operation> {
        self.by_id.get(id).map(|&i| &self.operations[i])
    }

    /// Category names, sorted.
    pub fn categories(&self) -> &[&'static str] {
        &self.categories
    }

    /// The operations of one category, in id order.
    pub fn in_category<'a>(&'a self, category: &'a str) -> impl Iterator<Item = &'a Operation> {
        self.operations
            .iter()
            .filter(move |o| o.category == category)
    }

    /// Up to five ids close to an unknown one, best first: ids sharing its words (`subscribe`
    /// ≈ `subscription`) rank first, then by edit distance. Empty when nothing is close.
    pub fn suggest(&self, id: &str) -> Vec<&'static str> {
        crate::suggest::suggest(self.operations.iter().map(|o| o.id), id, 5)
    }
}
