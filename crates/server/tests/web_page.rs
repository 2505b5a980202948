//! The page's assets and its markdown renderer over HTTP (issue 29 items 1 and 7): assets are
//! sent gzip-compressed when asked, carry an `ETag` (a matching `If-None-Match` is `304`), and
//! the page links them by content hash, which makes those links cacheable for a year; answers
//! render through `POST /api/v1/agent/render`, where a table is a `<table>` and no HTML or
//! script a model wrote becomes markup.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::Env;
use reqwest::StatusCode;
use reqwest::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_SECURITY_POLICY, ETAG, IF_NONE_MATCH,
};
use serde_json::{Value, json};

async fn render(env: &Env, token: &str, body: Value) -> (StatusCode, Value) {
    let r = env
        .http
        .post(env.url("/api/v1/agent/render"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread")]
async fn assets_are_compressed_cacheable_by_hash_and_revalidated_by_etag() {
    let env = Env::start().await;
    let page = env
        .http
        .get(env.url("/"))
        .header(ACCEPT_ENCODING, "gzip, deflate, br")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.headers()[CONTENT_ENCODING], "gzip");
    assert_eq!(page.headers()[CACHE_CONTROL], "no-cache");
    assert!(
        page.headers()[CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    let gz = page.bytes().await.unwrap();
    // The page itself, uncompressed, names its assets by hash.
    let html = env.http.get(env.url("/")).send().await.unwrap();
    assert!(html.headers().get(CONTENT_ENCODING).is_none());
    let html = html.text().await.unwrap();
    assert!(gz.len() < html.len(), "{} < {}", gz.len(), html.len());
    let js_link = html
        .split('"')
        .find(|s| s.starts_with("/assets/app.js?v="))
        .expect("the script is linked by hash")
        .to_owned();
    assert!(html.contains("/assets/app.css?v="));

    let js = env
        .http
        .get(env.url(&js_link))
        .header(ACCEPT_ENCODING, "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(js.status(), StatusCode::OK);
    assert_eq!(
        js.headers()[CACHE_CONTROL],
        "public, max-age=31536000, immutable"
    );
    assert_eq!(js.headers()[CONTENT_ENCODING], "gzip");
    let etag = js.headers()[ETAG].to_str().unwrap().to_owned();
    assert_eq!(
        etag,
        format!("\"{}\"", &js_link["/assets/app.js?v=".len()..])
    );

    // Unversioned (or another version): revalidated each time; a matching ETag is a 304.
    let plain = env
        .http
        .get(env.url("/assets/app.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(plain.headers()[CACHE_CONTROL], "no-cache");
    assert_eq!(plain.headers()[ETAG].to_str().unwrap(), etag);
    let again = env
        .http
        .get(env.url("/assets/app.js"))
        .header(IF_NONE_MATCH, &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert!(again.bytes().await.unwrap().is_empty());
    // gzip refused with q=0: the plain bytes.
    let refused = env
        .http
        .get(env.url("/assets/app.css"))
        .header(ACCEPT_ENCODING, "gzip;q=0")
        .send()
        .await
        .unwrap();
    assert!(refused.headers().get(CONTENT_ENCODING).is_none());
    let missing = env.http.get(env.url("/assets/../x")).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let other = env
        .http
        .get(env.url("/assets/secret.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_render_endpoint_makes_tables_and_lists_and_keeps_every_payload_text() {
    let env = Env::start().await;
    let token = env.user("alice", "alice-password-1", false).await;
    let (s, v) = render(
        &env,
        &token,
        json!({"texts": [
            "| a | b |\n|---|---|\n| 1 | 2 |",
            "- one\n  - two\n\nsee https://example.org/docs: here",
            "<script>alert(1)</script>\n\n<img src=x onerror=alert(2)> [x](javascript:alert(3)) ![p](https://t.example/p.png)",
        ]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let html: Vec<&str> = v["html"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert_eq!(html.len(), 3);
    assert!(html[0].contains("<table>") && html[0].contains("<td>2</td>"));
    assert!(
        html[1].contains("<li>one\n<ul>\n<li>two</li>"),
        "{}",
        html[1]
    );
    assert!(
        html[1]
            .contains(r#"<a href="https://example.org/docs">https://example.org/docs</a>: here"#),
        "{}",
        html[1]
    );
    for bad in ["<script", "<img", "javascript:", "onerror=alert(2)>"] {
        assert!(!html[2].contains(bad), "{bad} in {}", html[2]);
    }
    assert!(html[2].contains("&lt;script&gt;") && html[2].contains("&lt;img src=x"));

    // Only for signed-in callers, and bounded.
    let (s, _) = render(&env, "not-a-token", json!({"texts": ["x"]})).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let many: Vec<String> = (0..=mpa_server::web::RENDER_MAX_TEXTS)
        .map(|i| i.to_string())
        .collect();
    let (s, v) = render(&env, &token, json!({"texts": many})).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(v["error"]["code"], "render_too_large");
    let (s, v) = render(&env, &token, json!({"text": "x"})).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    env.shutdown().await;
}
