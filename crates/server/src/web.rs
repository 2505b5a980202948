//! The web page: hand-written HTML, CSS and JS embedded in the binary (no build step, nothing
//! fetched from elsewhere at run time), and the markdown renderer it shows answers with.
//!
//! Assets are served compressed (gzip when the client accepts it, compressed once per process)
//! with a strong `ETag` (a `304` for a matching `If-None-Match`). The page links them by content
//! (`/assets/app.js?v=<hash>`): such a request is cacheable for a year, since a new binary with
//! other assets links other names; the page itself is revalidated on every load.

use crate::auth::Authed;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::sync::OnceLock;

const INDEX_HTML: &str = include_str!("../web/index.html");
const APP_JS: &str = include_str!("../web/app.js");
const APP_CSS: &str = include_str!("../web/app.css");
const ICON_SVG: &str = include_str!("../web/icon.svg");

/// The page: no inline script or style, and no other site may frame it (clickjacking). Images
/// come from this host only (attachments); markdown never makes an `<img>`.
const CSP: &str = "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

/// One embedded file, ready to send.
struct Asset {
    body: Vec<u8>,
    gzip: Vec<u8>,
    /// The first 16 hex digits of the body's SHA-256: the `ETag` and the `v` of its link.
    hash: String,
    content_type: &'static str,
}

impl Asset {
    fn new(body: Vec<u8>, content_type: &'static str) -> Asset {
        let hash = hex::encode(Sha256::digest(&body))[..16].to_owned();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        // Writing to a Vec cannot fail; an empty gzip is only ever skipped below.
        let gzip = enc
            .write_all(&body)
            .and_then(|()| enc.finish())
            .unwrap_or_default();
        Asset {
            body,
            gzip,
            hash,
            content_type,
        }
    }
}

struct Assets {
    index: Asset,
    js: Asset,
    css: Asset,
    icon: Asset,
}

fn assets() -> &'static Assets {
    static ASSETS: OnceLock<Assets> = OnceLock::new();
    ASSETS.get_or_init(|| {
        let js = Asset::new(APP_JS.into(), "text/javascript; charset=utf-8");
        let css = Asset::new(APP_CSS.into(), "text/css; charset=utf-8");
        let icon = Asset::new(ICON_SVG.into(), "image/svg+xml");
        let index = INDEX_HTML
            .replace("/assets/app.js", &format!("/assets/app.js?v={}", js.hash))
            .replace(
                "/assets/app.css",
                &format!("/assets/app.css?v={}", css.hash),
            )
            .replace(
                "/assets/icon.svg",
                &format!("/assets/icon.svg?v={}", icon.hash),
            );
        Assets {
            index: Asset::new(index.into_bytes(), "text/html; charset=utf-8"),
            js,
            css,
            icon,
        }
    })
}

fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or_default().trim();
            let refused = parts.any(|p| matches!(p.trim(), "q=0" | "q=0.0" | "q=0.00" | "q=0.000"));
            name.eq_ignore_ascii_case("gzip") && !refused
        })
}

/// `asset` as the answer to a request with `headers`; `immutable` when the link named its hash.
fn send(asset: &'static Asset, headers: &HeaderMap, immutable: bool) -> Response {
    let etag = format!("\"{}\"", asset.hash);
    let cache = if immutable {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let gzip = accepts_gzip(headers) && !asset.gzip.is_empty();
    let mut r = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else if gzip {
        asset.gzip.as_slice().into_response()
    } else {
        asset.body.as_slice().into_response()
    };
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    if gzip && !fresh {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

pub async fn index(headers: HeaderMap) -> Response {
    let mut r = send(&assets().index, &headers, false);
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    r
}

#[derive(Deserialize)]
pub struct Version {
    #[serde(default)]
    v: Option<String>,
}

/// `/assets/{name}`: the page's script, style and icon.
pub async fn asset(
    Path(name): Path<String>,
    Query(version): Query<Version>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let a = assets();
    let asset = match name.as_str() {
        "app.js" => &a.js,
        "app.css" => &a.css,
        "icon.svg" => &a.icon,
        _ => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "no such asset",
            ));
        }
    };
    let immutable = version.v.as_deref() == Some(asset.hash.as_str());
    Ok(send(asset, &headers, immutable))
}

/// Most texts one render request may carry, and their total size: a chat's answers, not a
/// document store.
pub const RENDER_MAX_TEXTS: usize = 500;
pub const RENDER_MAX_BYTES: usize = 4 * 1024 * 1024;

#[derive(Deserialize)]
pub struct RenderRequest {
    texts: Vec<String>,
}

/// `POST /api/v1/agent/render` `{texts: [markdown…]}` → `{html: [html…]}`, in order: the one
/// renderer of answers, for the streaming bubble and for a reloaded chat alike.
pub async fn render(
    Authed(_actor): Authed,
    Json(req): Json<RenderRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let bytes: usize = req.texts.iter().map(String::len).sum();
    if req.texts.len() > RENDER_MAX_TEXTS || bytes > RENDER_MAX_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "render_too_large",
            format!(
                "at most {RENDER_MAX_TEXTS} texts and {} MiB per render request",
                RENDER_MAX_BYTES / (1024 * 1024)
            ),
        ));
    }
    let html = tokio::task::spawn_blocking(move || {
        req.texts
            .iter()
            .map(|t| crate::markdown::render(t))
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|_| ApiError::internal("render_failed", "rendering the answer failed"))?;
    Ok(Json(serde_json::json!({ "html": html })))
}
