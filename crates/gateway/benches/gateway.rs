//! Gateway costs. Targets (issue 13): validation + request building ≤ 50 µs per call,
//! catalogue parse ≤ 5 ms, `subscription.list` round trip to a loopback server p50 ≤ 2 ms
//! (host overhead over a bare HTTP round trip ≤ 0.5 ms). Issue 25: reconciling the 229
//! operations with a 254-operation OpenAPI ≤ 20 ms, once per server version; adapting a call
//! to its live route is the per-call cost left.
//! Run: `cargo bench -p mpa-gateway --bench gateway`.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use axum::http::HeaderValue;
use axum::response::IntoResponse;
use divan::Bencher;
use mpa_gateway::{
    BearerToken, CATALOGUE_TSV, CallContext, Catalogue, GatewayClient, GatewayConfig,
    Reconciliation, ServerApi, catalogue,
};
use serde_json::{Value, json};
use std::sync::LazyLock;

fn main() {
    divan::main();
}

/// Representative calls: a bare list, a paged list, a Chinese search, a lookup with path and
/// query, and a write with a nested body.
fn calls() -> Vec<(&'static str, Value, Value, Value)> {
    vec![
        ("subscription.list", Value::Null, Value::Null, Value::Null),
        (
            "subscription.list",
            Value::Null,
            json!({"page": 2}),
            Value::Null,
        ),
        (
            "media.search",
            Value::Null,
            json!({"title": "三体 第一季", "media_source": ["tmdb", "douban"], "count": 20}),
            Value::Null,
        ),
        (
            "subscription.find",
            json!({"media_id": "204541"}),
            json!({"media_source": "tmdb", "season": 1, "mtype": "电视剧"}),
            Value::Null,
        ),
        (
            "download.add",
            Value::Null,
            Value::Null,
            json!({"torrent_in": {"title": "The.Three-Body.Problem.S01E01.2160p", "enclosure": "magnet:?xt=urn:btih:0123456789abcdef0123456789abcdef01234567", "site_name": "站点", "size": 4_294_967_296u64, "seeders": 12},
                   "media_source": "tmdb", "media_id": "204541", "downloader": "qbittorrent"}),
        ),
    ]
}

/// Lookup, validation, the filled route and query, and the ledger digest — everything the host
/// does for a call before the HTTP client.
#[divan::bench(args = [0, 1, 2, 3, 4])]
fn validate_and_build(bencher: Bencher, which: usize) {
    let (id, path, query, body) = calls().swap_remove(which);
    let cat = catalogue();
    bencher.bench_local(|| {
        let op = cat.get(divan::black_box(id)).unwrap();
        let prepared = op.prepare(&path, &query, &body).unwrap();
        (prepared.path_and_query(), prepared.arguments_digest())
    });
}

/// A refused call, contract included (what `invalid_input` carries).
#[divan::bench]
fn refuse_with_contract(bencher: Bencher) {
    let op = catalogue().get("site.list").unwrap();
    let query = json!({"status": "enabled"});
    bencher.bench_local(|| {
        let e = op.prepare(&Value::Null, &query, &Value::Null).unwrap_err();
        (
            e.to_string(),
            serde_json::to_string(&op.input_contract()).unwrap(),
        )
    });
}

#[divan::bench]
fn catalogue_parse() -> usize {
    Catalogue::parse(divan::black_box(CATALOGUE_TSV))
        .unwrap()
        .len()
}

/// The recorded real MoviePilot v2 document (254 operations on 216 paths).
static RECORDED: LazyLock<Vec<u8>> = LazyLock::new(|| {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../catalog/openapi/moviepilot-v2-2025-06.json"
    ))
    .unwrap()
});

/// What a new server version costs: parse its OpenAPI and reconcile the catalogue with it.
#[divan::bench]
fn openapi_parse_and_reconcile() -> usize {
    let api = ServerApi::parse(divan::black_box(&RECORDED)).unwrap();
    Reconciliation::new(catalogue(), api).counts().available
}

/// Reconciliation alone (the document already parsed).
#[divan::bench]
fn reconcile(bencher: Bencher) {
    let api = ServerApi::parse(&RECORDED).unwrap();
    bencher
        .with_inputs(|| api.clone())
        .bench_local_values(|api| Reconciliation::new(catalogue(), api).counts().available);
}

/// The per-call cost on a reconciled server: adapting a prepared call to its live route (a
/// translated `subscription.find`, a plain `subscription.list`).
#[divan::bench(args = ["subscription.find", "subscription.list"])]
fn adapt_to_live_route(bencher: Bencher, id: &str) {
    let table = Reconciliation::new(catalogue(), ServerApi::parse(&RECORDED).unwrap());
    let op = catalogue().get(id).unwrap();
    let prepared = if id == "subscription.find" {
        op.prepare(
            &json!({"media_id": "204541"}),
            &json!({"media_source": "themoviedb", "season": 1}),
            &Value::Null,
        )
    } else {
        op.prepare(&Value::Null, &Value::Null, &Value::Null)
    }
    .unwrap();
    bencher.bench_local(|| table.adapt(op, divan::black_box(&prepared)).unwrap());
}

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
});

/// A loopback server answering `subscription.list` like MoviePilot: 20 rows and the collection
/// headers.
static SERVER: LazyLock<String> = LazyLock::new(|| {
    let rows: Vec<Value> = (1..=20)
        .map(|i| json!({"id": i, "name": format!("订阅 {i}"), "year": "2024", "type": "电视剧", "media_source": "tmdb", "media_id": format!("{}", 200_000 + i), "season": 1, "state": "R"}))
        .collect();
    let body = serde_json::to_string(&rows).unwrap();
    RUNTIME.block_on(async move {
        let app = axum::Router::new().fallback(move || {
            let body = body.clone();
            async move {
                let mut r = ([("content-type", "application/json")], body).into_response();
                r.headers_mut()
                    .insert("x-result-count", HeaderValue::from_static("20"));
                r.headers_mut()
                    .insert("x-total-count", HeaderValue::from_static("20"));
                r
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    })
});

/// The whole gateway path for `subscription.list`: validate, send with headers, read, project
/// the collection and render the result JSON.
#[divan::bench(sample_count = 2000)]
fn subscription_list_round_trip(bencher: Bencher) {
    let client = GatewayClient::new(GatewayConfig::new(SERVER.as_str())).unwrap();
    let ctx = CallContext {
        token: BearerToken::new("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIzIn0.c2lnbmF0dXJl"),
        session_id: Some("s".into()),
        channel: Some("web".into()),
        source: Some("agent".into()),
    };
    let op = catalogue().get("subscription.list").unwrap();
    bencher.bench_local(|| {
        RUNTIME.block_on(async {
            let prepared = op
                .prepare(&Value::Null, &Value::Null, &Value::Null)
                .unwrap();
            let r = client.send(&prepared, &ctx).await.unwrap();
            serde_json::to_string(&r.result_json()).unwrap().len()
        })
    });
}

/// The same request with a bare reqwest client (no validation, headers or projection): the
/// server's and the network's share of the round trip.
#[divan::bench(sample_count = 2000)]
fn bare_http_round_trip(bencher: Bencher) {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("{}/api/v1/subscribe/", SERVER.as_str());
    bencher.bench_local(|| {
        RUNTIME.block_on(async {
            client
                .get(&url)
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
                .len()
        })
    });
}
