//! The web page: hand-written HTML, CSS and JS embedded in the binary (no build step, nothing
//! fetched from elsewhere at run time).

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

const INDEX_HTML: &str = include_str!("../web/index.html");
const APP_JS: &str = include_str!("../web/app.js");
const APP_CSS: &str = include_str!("../web/app.css");
const ICON_SVG: &str = include_str!("../web/icon.svg");

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Assets change with the binary; revalidating is cheap and avoids stale pages after upgrades.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// The page: no inline script or style, and no other site may frame it (clickjacking).
pub async fn index() -> Response {
    let mut r = asset(INDEX_HTML, "text/html; charset=utf-8");
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data: https:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
        ),
    );
    r
}

pub async fn app_js() -> Response {
    asset(APP_JS, "text/javascript; charset=utf-8")
}

pub async fn app_css() -> Response {
    asset(APP_CSS, "text/css; charset=utf-8")
}

pub async fn icon() -> Response {
    asset(ICON_SVG, "image/svg+xml")
}
