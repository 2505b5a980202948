//! The HTTP client against real loopback servers: headers, collection projection, HTTP errors,
//! and the split between "certainly not sent" and "may have reached MoviePilot".
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common;

use axum::http::HeaderValue;
use axum::response::IntoResponse;
use common::{TOKEN, client, client_with_timeout, ctx, serve};
use mpa_gateway::{
    ApiError, ApiResponse, BearerToken, CallContext, Collection, GatewayClient, GatewayConfig,
    GatewayError, PreparedRequest, catalogue,
};
use mpa_protocol::Outcome;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

fn prepared(id: &str, path: Value, query: Value, body: Value) -> PreparedRequest {
    catalogue()
        .get(id)
        .unwrap()
        .prepare(&path, &query, &body)
        .unwrap()
}

fn list() -> PreparedRequest {
    prepared("subscription.list", Value::Null, Value::Null, Value::Null)
}

fn assert_secret_free(e: &GatewayError) {
    for text in [e.to_string(), format!("{e:?}")] {
        assert!(!text.contains(TOKEN), "token leaked: {text}");
        assert!(
            !text.contains("c2VjcmV0LXNpZ25hdHVyZS"),
            "signature leaked: {text}"
        );
    }
}

#[tokio::test]
async fn sends_the_bearer_and_the_agent_headers() {
    let server = common::ok_server().await;
    let c = client(&server.base_url());
    let mut context = ctx();
    context.channel = Some("微信 群".into());
    let r = c.send(&list(), &context).await.unwrap();
    assert_eq!(r.status, 200);
    let seen = server.take();
    assert_eq!(seen.len(), 1);
    let s = &seen[0];
    assert_eq!(s.request_line(), "GET /api/v1/subscribe/");
    assert_eq!(
        s.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(s.header("x-moviepilot-agent-session"), Some("sess-1"));
    assert_eq!(
        s.header("x-moviepilot-agent-channel"),
        Some("%E5%BE%AE%E4%BF%A1%20%E7%BE%A4")
    );
    assert_eq!(s.header("x-moviepilot-agent-source"), Some("web%20agent"));
    assert_eq!(s.header("accept"), Some("application/json"));
    assert!(s.body.is_empty());

    // Absent context headers are not sent at all.
    let bare = CallContext::new(BearerToken::new("t"));
    c.send(&list(), &bare).await.unwrap();
    let s = &server.take()[0];
    assert_eq!(s.header("authorization"), Some("Bearer t"));
    assert!(s.header("x-moviepilot-agent-session").is_none());
    assert!(s.header("x-moviepilot-agent-channel").is_none());

    // A write carries its JSON body.
    let add = prepared(
        "subscription.add",
        Value::Null,
        Value::Null,
        json!({"name": "三体", "season": 1}),
    );
    c.send(&add, &context).await.unwrap();
    let s = &server.take()[0];
    assert_eq!(s.request_line(), "POST /api/v1/subscribe/");
    assert_eq!(s.header("content-type"), Some("application/json"));
    assert_eq!(
        serde_json::from_slice::<Value>(&s.body).unwrap(),
        json!({"name": "三体", "season": 1})
    );
}

#[tokio::test]
async fn collection_headers_become_a_leading_collection_object() {
    let server = serve(Arc::new(|_| {
        let mut r = axum::Json(
            json!({"success": true, "data": [{"id": 1}, {"id": 2}], "collection": "theirs"}),
        )
        .into_response();
        let h = r.headers_mut();
        h.insert("x-result-count", HeaderValue::from_static("2"));
        h.insert("x-total-count", HeaderValue::from_static("10"));
        h.insert("x-page", HeaderValue::from_static("1"));
        h.insert("x-page-size", HeaderValue::from_static("2"));
        r
    }))
    .await;
    let r = client(&server.base_url())
        .send(&list(), &ctx())
        .await
        .unwrap();
    assert_eq!(
        r.collection,
        Some(Collection {
            result_count: Some(2),
            total_count: Some(10),
            page: Some(1),
            count: Some(2),
        })
    );
    assert_eq!(
        serde_json::to_string(&r.result_json()).unwrap(),
        r#"{"collection":{"result_count":2,"total_count":10,"page":1,"count":2},"success":true,"data":[{"id":1},{"id":2}]}"#
    );

    // A bare list payload goes under `data`, after the collection; a partial, malformed set of
    // headers keeps only what parses.
    let server = serve(Arc::new(|_| {
        let mut r = axum::Json(json!([1, 2, 3])).into_response();
        r.headers_mut()
            .insert("x-result-count", HeaderValue::from_static("3"));
        r.headers_mut()
            .insert("x-total-count", HeaderValue::from_static("lots"));
        r
    }))
    .await;
    let r = client(&server.base_url())
        .send(&list(), &ctx())
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_string(&r.result_json()).unwrap(),
        r#"{"collection":{"result_count":3},"data":[1,2,3]}"#
    );

    // Without collection headers the payload is passed through.
    let r = ApiResponse {
        status: 200,
        collection: None,
        payload: json!({"success": true}),
    };
    assert_eq!(r.result_json(), json!({"success": true}));
}

#[tokio::test]
async fn http_errors_are_api_errors_with_the_data() {
    let server = serve(Arc::new(|seen| {
        if seen.target.contains("/subscribe/9") {
            common::status_response(404, json!({"success": false, "message": "订阅不存在"}))
        } else if seen.target.contains("/subscribe/") && seen.method == "POST" {
            common::status_response(
                422,
                json!({"detail": [{"loc": ["body", "name"], "msg": "field required"}]}),
            )
        } else {
            (axum::http::StatusCode::BAD_GATEWAY, "upstream down").into_response()
        }
    }))
    .await;
    let c = client(&server.base_url());
    let e = c
        .send(
            &prepared(
                "subscription.get",
                json!({"subscribe_id": 9}),
                Value::Null,
                Value::Null,
            ),
            &ctx(),
        )
        .await
        .unwrap_err();
    let GatewayError::Api(api) = &e else {
        panic!("{e:?}")
    };
    assert_eq!(
        api,
        &ApiError {
            operation_id: "subscription.get".into(),
            status: 404,
            data: json!({"success": false, "message": "订阅不存在"}),
        }
    );
    assert_eq!(
        e.to_string(),
        "MoviePilot answered subscription.get with HTTP 404"
    );
    assert_eq!(e.outcome(), Outcome::Failed);
    assert!(e.reached_server());
    assert_secret_free(&e);

    let e = c
        .send(
            &prepared("subscription.add", Value::Null, Value::Null, json!({})),
            &ctx(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&e, GatewayError::Api(ApiError { status: 422, data, .. }) if data["detail"][0]["msg"] == "field required")
    );

    let e = c.send(&list(), &ctx()).await.unwrap_err();
    assert!(
        matches!(&e, GatewayError::Api(ApiError { status: 502, data, .. }) if data == &json!("upstream down"))
    );
}

#[tokio::test]
async fn connection_refused_is_not_sent() {
    let addr = common::dead_addr().await;
    let e = client(&format!("http://{addr}"))
        .send(&list(), &ctx())
        .await
        .unwrap_err();
    let GatewayError::NotSent {
        operation_id,
        reason,
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!(operation_id, "subscription.list");
    assert!(
        reason.starts_with("could not connect to MoviePilot"),
        "{reason}"
    );
    assert!(
        !reason.contains("127.0.0.1"),
        "the URL is stripped: {reason}"
    );
    assert_eq!(e.outcome(), Outcome::Failed);
    assert!(!e.reached_server());
    assert_secret_free(&e);

    // An unresolvable host is not sent either.
    let e = client("http://moviepilot.invalid")
        .send(&list(), &ctx())
        .await
        .unwrap_err();
    assert!(matches!(e, GatewayError::NotSent { .. }), "{e:?}");
}

#[tokio::test]
async fn a_connection_dropped_after_the_request_is_maybe_sent() {
    let (addr, count) = common::dropping_server().await;
    let add = prepared(
        "download.add",
        Value::Null,
        Value::Null,
        json!({"torrent_in": {"title": "x", "enclosure": "magnet:?xt=urn:btih:abc"}}),
    );
    let e = client(&format!("http://{addr}"))
        .send(&add, &ctx())
        .await
        .unwrap_err();
    let GatewayError::MaybeSent {
        operation_id,
        reason,
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!(operation_id, "download.add");
    assert!(
        reason.starts_with("the connection failed after the request was sent"),
        "{reason}"
    );
    assert_eq!(
        *count.lock().unwrap(),
        1,
        "the server read the request exactly once"
    );
    assert_eq!(e.outcome(), Outcome::Unknown);
    assert!(e.to_string().contains("may already have taken effect"));
    assert_secret_free(&e);
}

#[tokio::test]
async fn a_stalled_answer_past_the_timeout_is_maybe_sent() {
    // No answer at all.
    let addr = common::stalling_server(b"").await;
    let c = client_with_timeout(&format!("http://{addr}"), Duration::from_millis(300));
    let e = c.send(&list(), &ctx()).await.unwrap_err();
    let GatewayError::MaybeSent { reason, .. } = &e else {
        panic!("{e:?}")
    };
    assert!(
        reason.starts_with("no complete answer within 0.3 s"),
        "{reason}"
    );
    assert_secret_free(&e);

    // Headers, then a body that never finishes.
    let addr = common::stalling_server(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"succ",
    )
    .await;
    let c = client_with_timeout(&format!("http://{addr}"), Duration::from_millis(300));
    let e = c.send(&list(), &ctx()).await.unwrap_err();
    assert!(matches!(e, GatewayError::MaybeSent { .. }), "{e:?}");
    assert_eq!(e.outcome(), Outcome::Unknown);
}

#[tokio::test]
async fn torrent_searches_get_the_long_timeout() {
    let mut config = GatewayConfig::new("http://127.0.0.1:9");
    config.timeout = Duration::from_secs(30);
    config.long_timeout = Duration::from_secs(300);
    let c = GatewayClient::new(config).unwrap();
    let search = prepared(
        "search.torrents",
        json!({"media_id": "1"}),
        json!({"media_source": "tmdb"}),
        Value::Null,
    );
    assert_eq!(c.timeout_for(&search), Duration::from_secs(300));
    assert_eq!(c.timeout_for(&list()), Duration::from_secs(30));
    assert_eq!(GatewayConfig::new("x").timeout, Duration::from_secs(30));
}

#[tokio::test]
async fn oversized_answers_are_not_read() {
    let server = serve(Arc::new(|_| "x".repeat(10_000).into_response())).await;
    let mut config = GatewayConfig::new(server.base_url());
    config.max_response_bytes = 1000;
    let e = GatewayClient::new(config)
        .unwrap()
        .send(&list(), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(e, GatewayError::MaybeSent { ref reason, .. } if reason.contains("larger than 1000 bytes")),
        "{e:?}"
    );
}

#[test]
fn bad_base_urls_are_refused_without_echoing_them() {
    for (url, reason) in [
        ("not a url", "it does not parse as a URL"),
        ("ftp://host", "the scheme must be http or https"),
        ("http://u:hunter2@[::1", "it does not parse as a URL"),
        ("http://host/?a=1", "it must not have a query or fragment"),
    ] {
        let e = GatewayClient::new(GatewayConfig::new(url)).unwrap_err();
        assert!(
            matches!(e, GatewayError::InvalidBaseUrl { reason: r } if r == reason),
            "{url}: {e:?}"
        );
        assert!(!e.to_string().contains("hunter2"));
    }
    let c = GatewayClient::new(GatewayConfig::new("http://127.0.0.1:3001/mp/")).unwrap();
    assert_eq!(c.base_url(), "http://127.0.0.1:3001/mp");
}

#[tokio::test]
async fn a_path_prefix_in_the_base_url_is_kept() {
    let server = common::ok_server().await;
    let c = client(&format!("{}/prefix/", server.base_url()));
    c.send(&list(), &ctx()).await.unwrap();
    assert_eq!(
        server.take()[0].request_line(),
        "GET /prefix/api/v1/subscribe/"
    );
}

#[test]
fn the_context_never_shows_its_token() {
    let text = format!("{:?}", ctx());
    assert!(!text.contains(TOKEN), "{text}");
    assert!(text.contains("BearerToken(<redacted>)"));
}
