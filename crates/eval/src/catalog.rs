//! The 229 MoviePilot operations as routes, read from the catalogue TSV compiled into the crate.
//! Only the columns the fake needs are read: id, method, path template, effect class and role.
//! The gateway owns the full contract (inputs, collection shapes); this reader stays small.

use mpa_protocol::EffectClass;
use std::sync::LazyLock;

pub(crate) const TSV: &str = include_str!("../../../catalog/moviepilot-operations.tsv");

/// Values MoviePilot accepts for the one dynamic route segment, `{source}`.
const SOURCES: [&str; 4] = ["tmdb", "douban", "bangumi", "anilist"];

/// Two routes carry two operations each; MoviePilot tells them apart by one query field.
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub const SHARED_ROUTE_SELECTORS: [(&str, &str, &str); 3] = [
    ("media.person.search", "type", "person"),
    ("plugin.installed", "state", "installed"),
    ("plugin.market", "state", "market"),
];

#[derive(Debug, Clone, PartialEq, Eq)]
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub enum Segment {
    Literal(&'static str),
    Param(&'static str),
}

/// One catalogue operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    pub id: &'static str,
    /// Upper-case HTTP method.
    pub method: &'static str,
    pub path_template: &'static str,
    pub effect: EffectClass,
    /// `required_role` is `system_admin`, or unknown (`?`, treated as admin like the spec says).
    pub admin: bool,
    // public for the crate's tests (tests/all.rs); not part of the API
    #[doc(hidden)]
    pub segments: Vec<Segment>,
}

impl Operation {
    /// The path template's placeholder names, in order.
    pub fn path_params(&self) -> Vec<&'static str> {
        self.segments
            .iter()
            .filter_map(|s| match s {
                Segment::Param(p) => Some(*p),
                Segment::Literal(_) => None,
            })
            .collect()
    }
}

/// Where a request lands.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a> {
    Operation {
        op: &'a Operation,
        /// Decoded placeholder values, in template order.
        path_params: Vec<(&'static str, String)>,
    },
    /// The path is a catalogue route, but not for this method.
    MethodNotAllowed,
    NotFound,
}

/// The operation table.
#[derive(Debug)]
pub struct Catalog {
    operations: Vec<Operation>,
}

static CATALOG: LazyLock<Catalog> = LazyLock::new(|| Catalog::parse(TSV));

/// The compiled-in catalogue, parsed once.
pub fn catalog() -> &'static Catalog {
    &CATALOG
}

fn segments_of(path: &str) -> impl Iterator<Item = &str> {
    // A trailing slash is not significant: FastAPI redirects one form to the other.
    path.trim_start_matches('/')
        .trim_end_matches('/')
        .split('/')
}

impl Catalog {
    fn parse(tsv: &'static str) -> Catalog {
        let operations = tsv
            .lines()
            .skip(1)
            .filter_map(|line| {
                let mut cols = line.split('\t');
                let (id, _category, method, path, effect, role) = (
                    cols.next()?,
                    cols.next()?,
                    cols.next()?,
                    cols.next()?,
                    cols.next()?,
                    cols.next()?,
                );
                let segments = segments_of(path)
                    .map(
                        |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                            Some(name) => Segment::Param(name),
                            None => Segment::Literal(s),
                        },
                    )
                    .collect();
                Some(Operation {
                    id,
                    method,
                    path_template: path,
                    effect: EffectClass::parse(effect).unwrap_or(EffectClass::Unknown),
                    admin: role != "user",
                    segments,
                })
            })
            .collect();
        Catalog { operations }
    }

    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }

    pub fn get(&self, id: &str) -> Option<&Operation> {
        self.operations.iter().find(|op| op.id == id)
    }

    /// Maps a request to its operation. `path` is the raw (percent-encoded) request path;
    /// `query` the decoded query pairs, used only to tell apart the two shared routes.
    pub fn resolve(&self, method: &str, path: &str, query: &[(String, String)]) -> Route<'_> {
        let decoded: Vec<String> = segments_of(path).map(percent_decode).collect();
        let mut best: Vec<(&Operation, Vec<bool>)> = Vec::new();
        let mut path_known = false;
        for op in &self.operations {
            let Some(shape) = match_segments(&op.segments, &decoded) else {
                continue;
            };
            path_known = true;
            if !op.method.eq_ignore_ascii_case(method) {
                continue;
            }
            // The most specific template wins: a literal beats a placeholder at the first
            // position where two candidates differ (`/media/search` over `/media/{media_id}`).
            match best.first().map(|(_, s)| shape.cmp(s)) {
                Some(std::cmp::Ordering::Less) => {}
                Some(std::cmp::Ordering::Equal) => best.push((op, shape)),
                _ => best = vec![(op, shape)],
            }
        }
        let op = match pick(best.iter().map(|(op, _)| *op), query) {
            Some(op) => op,
            None if path_known => return Route::MethodNotAllowed,
            None => return Route::NotFound,
        };
        let path_params = op
            .segments
            .iter()
            .zip(decoded)
            .filter_map(|(seg, value)| match seg {
                Segment::Param(name) => Some((*name, value)),
                Segment::Literal(_) => None,
            })
            .collect();
        Route::Operation { op, path_params }
    }
}

/// Literal-ness per segment when `template` matches `path`.
fn match_segments(template: &[Segment], path: &[String]) -> Option<Vec<bool>> {
    if template.len() != path.len() {
        return None;
    }
    template
        .iter()
        .zip(path)
        .map(|(seg, value)| match seg {
            Segment::Literal(lit) => (*lit == value).then_some(true),
            Segment::Param("source") => SOURCES.contains(&value.as_str()).then_some(false),
            Segment::Param(_) => (!value.is_empty()).then_some(false),
        })
        .collect()
}

/// One candidate is the route; two share a route and are told apart by their query selector,
/// the one without a selector being the default.
fn pick<'a>(
    candidates: impl Iterator<Item = &'a Operation> + Clone,
    query: &[(String, String)],
) -> Option<&'a Operation> {
    let selector = |op: &Operation| {
        SHARED_ROUTE_SELECTORS
            .iter()
            .find(|(id, _, _)| *id == op.id)
    };
    let selected = candidates.clone().find(|op| {
        selector(op)
            .is_some_and(|(_, key, value)| query.iter().any(|(k, v)| k == key && v == value))
    });
    selected
        .or_else(|| candidates.clone().find(|op| selector(op).is_none()))
        .or_else(|| candidates.clone().next())
}

/// Decodes `%XX` escapes (UTF-8); `+` stays a plus sign in paths.
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
