//! Routes as segments: a template's literal and placeholder segments, the rules a path
//! parameter value must meet to be exactly one segment, the URL built by appending segments to
//! the parsed base (never by string concatenation), and the check that a built URL's path is
//! the template filled with exactly the given values.
//!
//! Why so strict: MoviePilot runs under uvicorn, which percent-decodes the path before routing,
//! and Starlette resolves no dot segments itself — but URL parsers on the way do. A value of
//! `..` once turned `subscription.find` into `GET /api/v1/subscribe/` (every subscription), and
//! a decoded `%2F` would let a value pick another route. So a value is refused when it is empty,
//! `.` or `..`, or holds `/`, `\` or a control character; every other value is one segment.

use reqwest::Url;

/// One segment of a route template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateSegment<'a> {
    Literal(&'a str),
    /// `{name}`.
    Param(&'a str),
}

/// The segments of a template (`/api/v1/subscribe/` → `api`, `v1`, `subscribe`, ``): a
/// trailing slash is an empty last literal, as it is on the wire.
pub fn template_segments(template: &str) -> impl Iterator<Item = TemplateSegment<'_>> {
    template
        .strip_prefix('/')
        .unwrap_or(template)
        .split('/')
        .map(
            |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) if !name.is_empty() && !name.contains(['{', '}']) => {
                    TemplateSegment::Param(name)
                }
                _ => TemplateSegment::Literal(s),
            },
        )
}

/// Why a path parameter value cannot be one route segment, or `None` when it can.
pub(crate) fn segment_refusal(value: &str) -> Option<&'static str> {
    if value.trim().is_empty() {
        Some("is empty")
    } else if value == "." || value == ".." {
        Some("is a dot segment (`.` or `..`), which would name another route")
    } else if value.contains('/') || value.contains('\\') {
        Some("contains `/` or `\\`, which would split it into several route segments")
    } else if value.chars().any(char::is_control) {
        Some("contains control characters")
    } else {
        None
    }
}

/// The route filled with `values` (in placeholder order), as raw segments.
pub(crate) fn filled_segments<'a>(template: &'a str, values: &'a [String]) -> Option<Vec<&'a str>> {
    let mut values = values.iter();
    let mut out = Vec::new();
    for seg in template_segments(template) {
        match seg {
            TemplateSegment::Literal(l) => out.push(l),
            TemplateSegment::Param(_) => out.push(values.next()?.as_str()),
        }
    }
    values.next().is_none().then_some(out)
}

/// `base` with the filled route appended segment by segment (each percent-encoded by the URL
/// library as one segment) and `query` (already encoded) as its query. `None` when the base
/// cannot take path segments or the values do not fit the template.
pub fn build_url(
    base: &Url,
    template: &str,
    values: &[String],
    query: Option<&str>,
) -> Option<Url> {
    let segments = filled_segments(template, values)?;
    let mut url = base.clone();
    {
        let mut path = url.path_segments_mut().ok()?;
        path.pop_if_empty();
        path.extend(segments);
    }
    url.set_query(query.filter(|q| !q.is_empty()));
    Some(url)
}

/// Whether `url`'s path is `base`'s path followed by exactly `template` filled with `values`:
/// the same number of segments, each literal byte for byte, each placeholder decoding to its
/// value and being one segment (no dot segment, no empty one). Checked after building, so a
/// request the URL library (or anything else) bent away from its route is never sent.
pub fn url_matches(base: &Url, url: &Url, template: &str, values: &[String]) -> bool {
    if url.scheme() != base.scheme()
        || url.host_str() != base.host_str()
        || url.port_or_known_default() != base.port_or_known_default()
        || !url.username().is_empty()
        || url.password().is_some()
        || url.fragment().is_some()
    {
        return false;
    }
    let prefix = base.path().trim_end_matches('/');
    let Some(rest) = url.path().strip_prefix(prefix) else {
        return false;
    };
    let Some(rest) = rest.strip_prefix('/') else {
        return false;
    };
    let mut sent = rest.split('/');
    let mut values = values.iter();
    for seg in template_segments(template) {
        let Some(wire) = sent.next() else {
            return false;
        };
        let ok = match seg {
            TemplateSegment::Literal(l) => wire == l,
            TemplateSegment::Param(_) => {
                let Some(value) = values.next() else {
                    return false;
                };
                let decoded = percent_encoding::percent_decode_str(wire).decode_utf8();
                !wire.is_empty()
                    && wire != "."
                    && wire != ".."
                    && decoded.is_ok_and(|d| d == value.as_str() && segment_refusal(&d).is_none())
            }
        };
        if !ok {
            return false;
        }
    }
    sent.next().is_none() && values.next().is_none()
}
