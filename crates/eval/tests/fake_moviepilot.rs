//! The fake MoviePilot over real HTTP on 127.0.0.1, with reqwest as the client.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on any error"
)]

use mpa_eval::jwt::{decode, encode};
use mpa_eval::{
    Attempt, DuplicateSubscription, Effect, EvalError, FakeConfig, FakeHandle, FakeMoviePilot,
    Fault, FaultAction, ObservationKind, RefusalKind, Reply, SERVED_OPERATIONS, StateFile,
    WorldState, catalog,
};
use mpa_protocol::Outcome;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SECRET: &str = "test-secret";

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn world() -> WorldState {
    WorldState::from_value(json!({
        "users": [
            {"id": 1, "name": "admin", "password": "pw-admin", "super_user": true},
            {"id": 2, "name": "alice", "password": "pw-alice"},
            {"id": 3, "name": "bob", "password": "pw-bob", "is_active": false}
        ],
        "media": [
            {"media_source": "themoviedb", "media_id": "204541", "title": "三体", "type": "电视剧",
             "year": "2023", "en_title": "The Three-Body Problem"},
            {"media_source": "themoviedb", "media_id": "535167", "title": "流浪地球", "type": "电影"}
        ],
        "torrents": [
            {"media_source": "themoviedb", "media_id": "204541", "season": 1,
             "torrent_info": {"title": "Three-Body.S01.2160p", "site_name": "甲",
                              "enclosure": format!("magnet:?xt=urn:btih:{}&dn=Three-Body", "e5".repeat(20))}}
        ],
        "subscriptions": [
            {"id": 71, "media_source": "themoviedb", "media_id": "991000", "name": "无关订阅",
             "type": "电影", "season": null, "state": "N"}
        ],
        "downloads": [
            {"hash": "DD".repeat(20), "title": "Unrelated.2024", "media_source": "themoviedb",
             "media_id": "991000", "downloader": "evaluation-downloader"}
        ],
        "sites": [
            {"id": 11, "name": "启用站点甲", "enabled": true, "is_active": true, "cookie": "c=1"},
            {"id": 12, "name": "停用站点", "enabled": false},
            {"id": 13, "name": "启用站点乙", "enabled": true}
        ],
        "downloaders": [{"name": "evaluation-downloader", "type": "qbittorrent"}],
        "download_paths": [{"name": "评测目录", "storage": "local", "save_path": "/evaluation/downloads"}],
        "settings": {
            "TMDB_API_KEY": "tmdb-key-value",
            "Downloaders": [{"name": "qb", "config": {"host": "h", "password": "qb-pass"}}],
            "Plain": {"a": 1}
        },
        "scheduler": [{"id": "subscribe_search", "name": "订阅搜索"}]
    }))
    .unwrap()
}

async fn start_with(config: FakeConfig) -> FakeHandle {
    FakeMoviePilot::start(config, world()).await.unwrap()
}

async fn start(faults: Vec<Fault>) -> FakeHandle {
    let mut config = FakeConfig::new(SECRET);
    config.faults = faults;
    start_with(config).await
}

fn fault(v: Value) -> Fault {
    serde_json::from_value(v).unwrap()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

async fn login(h: &FakeHandle, user: &str, password: &str) -> (StatusCode, Value) {
    let r = client()
        .post(format!("{}/api/v1/login/access-token", h.url()))
        .form(&[("username", user), ("password", password)])
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

async fn token(h: &FakeHandle, user: &str, password: &str) -> String {
    let (status, body) = login(h, user, password).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["access_token"].as_str().unwrap().to_string()
}

struct HttpReply {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

async fn call(
    h: &FakeHandle,
    token: Option<&str>,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> HttpReply {
    let mut req = client()
        .request(method, format!("{}{path}", h.url()))
        .header("X-MoviePilot-Agent-Session", "sess-1")
        .header("X-MoviePilot-Agent-Channel", "web")
        .header("X-MoviePilot-Agent-Source", "conversation");
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let status = r.status();
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    HttpReply {
        status,
        headers,
        body,
    }
}

async fn get(h: &FakeHandle, token: &str, path: &str) -> HttpReply {
    call(h, Some(token), reqwest::Method::GET, path, None).await
}

async fn post(h: &FakeHandle, token: &str, path: &str, body: Value) -> HttpReply {
    call(h, Some(token), reqwest::Method::POST, path, Some(body)).await
}

fn header(r: &HttpReply, name: &str) -> Option<String> {
    r.headers.get(name).map(|v| v.to_str().unwrap().to_string())
}

fn last(h: &FakeHandle) -> Attempt {
    h.ledger().pop().unwrap()
}

fn magnet(hash: &str, dn: &str) -> String {
    format!("magnet:?xt=urn:btih:{hash}&dn={dn}")
}

fn download_body(enclosure: &str) -> Value {
    json!({
        "torrent_in": {"title": "Between.2025.1080p", "enclosure": enclosure},
        "media_source": "themoviedb", "media_id": "481002"
    })
}

#[tokio::test]
async fn login_issues_a_moviepilot_token() {
    let h = start(vec![]).await;
    let (status, body) = login(&h, "admin", "pw-admin").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["token_type"], "bearer");
    assert_eq!(body["super_user"], true);
    assert_eq!(body["user_id"], 1);
    assert_eq!(body["user_name"], "admin");
    assert_eq!(body["level"], 1);
    let claims: Value = decode(
        body["access_token"].as_str().unwrap(),
        SECRET.as_bytes(),
        now(),
    )
    .unwrap();
    assert_eq!(claims["sub"], "1");
    assert_eq!(claims["username"], "admin");
    assert_eq!(claims["super_user"], true);
    assert_eq!(claims["purpose"], "authentication");
    assert!(claims["exp"].as_i64().unwrap() > now());

    let attempt = last(&h);
    assert_eq!(attempt.path, "/api/v1/login/access-token");
    assert_eq!(attempt.operation_id, None);
    assert_eq!(attempt.status, Some(200));
    assert_eq!(attempt.user.unwrap().name, "admin");
    assert_eq!(
        attempt.body,
        Some(json!({"username": "admin", "password": "***"}))
    );

    // An inactive account cannot sign in.
    let (status, body) = login(&h, "bob", "pw-bob").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body, json!({"detail": "用户未启用"}));
    h.shutdown().await;
}

#[tokio::test]
async fn wrong_password_and_unknown_user_get_the_same_error() {
    let h = start(vec![]).await;
    let wrong = login(&h, "admin", "nope").await;
    let unknown = login(&h, "nobody", "nope").await;
    assert_eq!(wrong.0, StatusCode::UNAUTHORIZED);
    assert_eq!(wrong, unknown);
    assert_eq!(wrong.1, json!({"detail": "用户名、密码或二次校验码不正确"}));
    let ledger = h.ledger();
    assert_eq!(ledger.len(), 2);
    for a in &ledger {
        assert_eq!(
            a.refusal.as_ref().unwrap().kind,
            RefusalKind::BadCredentials
        );
        assert_eq!(a.user, None);
        assert_eq!(a.outcome, Outcome::Failed);
    }
    // The ledger never holds a password.
    assert!(!serde_json::to_string(&ledger).unwrap().contains("nope"));
}

#[tokio::test]
async fn rest_routes_accept_only_valid_jwt_bearers() {
    let h = start(vec![]).await;
    let path = "/api/v1/subscribe/";

    let none = call(&h, None, reqwest::Method::GET, path, None).await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    assert_eq!(none.body, json!({"detail": "Not authenticated"}));
    assert_eq!(header(&none, "www-authenticate").as_deref(), Some("Bearer"));

    // MoviePilot's API token is no bearer for REST routes, in the header or the query.
    let api_token = get(&h, "mp-api-token-0123456789", path).await;
    assert_eq!(api_token.status, StatusCode::FORBIDDEN);
    assert_eq!(api_token.body, json!({"detail": "token校验不通过"}));
    let in_query = call(
        &h,
        None,
        reqwest::Method::GET,
        "/api/v1/subscribe/?token=mp-api-token",
        None,
    )
    .await;
    assert_eq!(in_query.status, StatusCode::UNAUTHORIZED);

    let claims = |exp: i64, sub: &str| json!({"sub": sub, "username": "admin", "super_user": true, "purpose": "authentication", "exp": exp});
    let expired = encode(&claims(now() - 10, "1"), SECRET.as_bytes());
    let foreign = encode(&claims(now() + 600, "1"), b"another-secret");
    let ghost = encode(&claims(now() + 600, "99"), SECRET.as_bytes());
    let resource = encode(
        &json!({"sub": "1", "purpose": "resource", "exp": now() + 600}),
        SECRET.as_bytes(),
    );
    for (t, detail) in [
        (expired.as_str(), "token校验不通过"),
        (foreign.as_str(), "token校验不通过"),
        (resource.as_str(), "token校验不通过"),
        (ghost.as_str(), "用户不存在"),
    ] {
        let r = get(&h, t, path).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        assert_eq!(r.body, json!({"detail": detail}));
    }
    // A token minted with the secret for a known user works, login or not.
    let minted = encode(&claims(now() + 600, "2"), SECRET.as_bytes());
    assert_eq!(get(&h, &minted, path).await.status, StatusCode::OK);

    let ledger = h.ledger();
    assert_eq!(ledger.len(), 8);
    let kinds: Vec<_> = ledger
        .iter()
        .map(|a| a.refusal.as_ref().map(|r| r.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![
            Some(RefusalKind::Unauthenticated),
            Some(RefusalKind::InvalidToken),
            Some(RefusalKind::Unauthenticated),
            Some(RefusalKind::InvalidToken),
            Some(RefusalKind::InvalidToken),
            Some(RefusalKind::InvalidToken),
            Some(RefusalKind::InvalidToken),
            None,
        ]
    );
    assert!(
        ledger[..7]
            .iter()
            .all(|a| a.observations.is_empty() && a.user.is_none())
    );
    assert_eq!(ledger[7].user.as_ref().unwrap().name, "alice");
    assert!(
        ledger
            .iter()
            .all(|a| a.operation_id.as_deref() == Some("subscription.list"))
    );
    // No token lands in the ledger.
    assert!(!serde_json::to_string(&ledger).unwrap().contains(&minted));
}

/// Issue 23 item 8: the expiry test slept three real seconds for a token to age; the fake's
/// clock now moves on request.
#[tokio::test]
async fn a_token_expires_when_the_fake_clock_passes_its_exp() {
    let mut config = FakeConfig::new(SECRET);
    config.token_ttl = Duration::from_secs(60);
    let h = start_with(config).await;
    let path = "/api/v1/subscribe/";
    let t = token(&h, "alice", "pw-alice").await;
    let issued = h.token_for("alice").unwrap();
    assert_eq!(get(&h, &t, path).await.status, StatusCode::OK);
    h.advance_clock(Duration::from_secs(30));
    assert_eq!(get(&h, &t, path).await.status, StatusCode::OK);
    h.advance_clock(Duration::from_secs(31));
    for old in [&t, &issued] {
        let r = get(&h, old, path).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        assert_eq!(r.body, json!({"detail": "token校验不通过"}));
    }
    // Tokens issued now carry the fake's time: they work.
    let before = now();
    let fresh = token(&h, "alice", "pw-alice").await;
    let claims: Value = decode(&fresh, SECRET.as_bytes(), before + 61).unwrap();
    assert!(claims["iat"].as_i64().unwrap() >= before + 61);
    assert_eq!(get(&h, &fresh, path).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_non_superuser_is_refused_admin_operations() {
    let h = start(vec![]).await;
    let alice = token(&h, "alice", "pw-alice").await;
    let r = get(&h, &alice, "/api/v1/system/settings").await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.body, json!({"detail": "用户权限不足"}));
    let add = post(
        &h,
        &alice,
        "/api/v1/subscribe/",
        json!({"media_source": "themoviedb", "media_id": "204541", "name": "三体"}),
    )
    .await;
    assert_eq!(add.status, StatusCode::FORBIDDEN);
    assert_eq!(
        h.snapshot().subscriptions,
        h.initial_snapshot().subscriptions
    );
    let a = last(&h);
    assert_eq!(a.refusal.unwrap().kind, RefusalKind::Forbidden);
    assert!(a.effects.is_empty());

    // An admin account's token without `super_user` grants no admin rights either.
    let plain = encode(
        &json!({"sub": "1", "username": "admin", "super_user": false, "exp": now() + 600}),
        SECRET.as_bytes(),
    );
    assert_eq!(
        get(&h, &plain, "/api/v1/system/settings").await.status,
        StatusCode::FORBIDDEN
    );

    // A user-role operation is fine for alice; the admin passes.
    assert_eq!(
        get(&h, &alice, "/api/v1/site/agent").await.status,
        StatusCode::OK
    );
    let admin = h.token_for("admin").unwrap();
    assert_eq!(
        get(&h, &admin, "/api/v1/system/settings").await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn envelope_and_collection_headers() {
    let h = start(vec![]).await;
    let t = h.token_for("alice").unwrap();

    let full = get(&h, &t, "/api/v1/site/agent").await;
    assert_eq!(full.status, StatusCode::OK);
    assert_eq!(
        full.body.as_object().unwrap().keys().collect::<Vec<_>>(),
        vec!["success", "message", "data"]
    );
    assert_eq!(full.body["success"], true);
    assert_eq!(header(&full, "x-result-count").as_deref(), Some("3"));
    assert_eq!(header(&full, "x-total-count").as_deref(), Some("3"));
    assert_eq!(header(&full, "x-page"), None);
    // Site credentials are for superusers only.
    assert_eq!(
        full.body["data"][0],
        json!({"id": 11, "name": "启用站点甲", "is_active": true, "enabled": true})
    );

    let paged = get(&h, &t, "/api/v1/site/agent?status=active&page=2&count=1").await;
    assert_eq!(
        paged.body["data"],
        json!([{"id": 13, "name": "启用站点乙", "enabled": true}])
    );
    assert_eq!(header(&paged, "x-result-count").as_deref(), Some("1"));
    assert_eq!(header(&paged, "x-total-count").as_deref(), Some("2"));
    assert_eq!(header(&paged, "x-page").as_deref(), Some("2"));
    assert_eq!(header(&paged, "x-page-size").as_deref(), Some("1"));

    // Paging is on as soon as one of page/count is given; count defaults to 50.
    let page_only = get(&h, &t, "/api/v1/subscribe/?page=1").await;
    assert_eq!(header(&page_only, "x-page-size").as_deref(), Some("50"));

    // media.search has endpoint defaults (page 1, count 8) and no total.
    let search = get(&h, &t, "/api/v1/media/search?title=%E4%B8%89%E4%BD%93").await;
    assert_eq!(search.body["data"][0]["media_id"], "204541");
    assert_eq!(search.body["data"][0]["tmdb_id"], 204541);
    assert_eq!(header(&search, "x-result-count").as_deref(), Some("1"));
    assert_eq!(header(&search, "x-total-count"), None);
    assert_eq!(header(&search, "x-page-size").as_deref(), Some("8"));

    // Validation failures are FastAPI 422s.
    let bad = get(&h, &t, "/api/v1/subscribe/?count=500").await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad.body["detail"][0]["loc"], json!(["query", "count"]));
    let extra = get(&h, &t, "/api/v1/subscribe/?colour=red").await;
    assert_eq!(extra.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(extra.body["detail"][0]["type"], "extra_forbidden");
    let missing = get(&h, &t, "/api/v1/subscribe/media/204541").await;
    assert_eq!(
        missing.body["detail"][0]["loc"],
        json!(["query", "media_source"])
    );
    let a = last(&h);
    assert_eq!(a.refusal.unwrap().kind, RefusalKind::Invalid);
    assert_eq!(a.outcome, Outcome::Failed);
}

#[tokio::test]
async fn a_second_subscription_for_the_same_media_and_season_answers_the_existing_id() {
    let h = start(vec![]).await;
    let t = h.token_for("admin").unwrap();
    let first = post(
        &h,
        &t,
        "/api/v1/subscribe/",
        json!({"media_source": "themoviedb", "media_id": "204541", "name": "三体", "season": 1}),
    )
    .await;
    assert_eq!(
        first.body,
        json!({"success": true, "message": "新增订阅成功", "data": {"id": 72}})
    );
    // Another name, the `tmdb` spelling, and the v2 `tmdbid` field: the same identity.
    for body in [
        json!({"media_source": "tmdb", "media_id": "204541", "name": "The Three-Body Problem", "season": 1}),
        json!({"tmdbid": 204541, "name": "San Ti", "season": 1}),
    ] {
        let again = post(&h, &t, "/api/v1/subscribe/", body).await;
        assert_eq!(
            again.body,
            json!({"success": true, "message": "订阅已存在", "data": {"id": 72}})
        );
    }
    let rows: Vec<_> = h
        .snapshot()
        .subscriptions
        .into_iter()
        .filter(|r| r["media_id"] == "204541")
        .collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["name"], "三体");
    assert_eq!(rows[0]["username"], "admin");

    let ledger = h.ledger();
    assert!(matches!(
        &ledger[0].effects[..],
        [Effect::SubscriptionCreated { id: 72, .. }]
    ));
    assert!(!ledger[0].duplicate_attempt);
    for a in &ledger[1..] {
        assert!(a.effects.is_empty());
        assert!(a.duplicate_attempt);
    }

    // Another season is another subscription.
    let s2 = post(
        &h,
        &t,
        "/api/v1/subscribe/",
        json!({"media_source": "themoviedb", "media_id": "204541", "name": "三体", "season": 2}),
    )
    .await;
    assert_eq!(s2.body["data"]["id"], 73);

    // find reads it back by identity (the title plays no part), get by id.
    let found = get(
        &h,
        &t,
        "/api/v1/subscribe/media/204541?media_source=themoviedb&season=1&title=x",
    )
    .await;
    assert_eq!(found.body["data"]["id"], 72);
    let a = last(&h);
    assert_eq!(a.observations.len(), 1);
    assert_eq!(a.observations[0].kind, ObservationKind::Subscription);
    assert_eq!(a.observations[0].id, json!(72));
    let miss = get(&h, &t, "/api/v1/subscribe/media/204541?media_source=douban").await;
    assert_eq!(
        miss.body,
        json!({"success": true, "message": "未找到匹配订阅", "data": {}})
    );
    assert!(last(&h).observations.is_empty());

    // delete removes by id; a second delete fails.
    let delete = || {
        call(
            &h,
            Some(&t),
            reqwest::Method::DELETE,
            "/api/v1/subscribe/73",
            None,
        )
    };
    let del = delete().await;
    assert_eq!(del.body["success"], true);
    assert!(matches!(
        &last(&h).effects[..],
        [Effect::SubscriptionDeleted { id: 73, .. }]
    ));
    let again = delete().await;
    assert_eq!(again.body["success"], false);
    assert_eq!(last(&h).outcome, Outcome::Failed);
}

#[tokio::test]
async fn the_refuse_policy_answers_a_duplicate_subscription_with_a_failure() {
    let mut config = FakeConfig::new(SECRET);
    config.duplicate_subscription = DuplicateSubscription::Refuse;
    let h = start_with(config).await;
    let t = h.token_for("admin").unwrap();
    let r = post(
        &h,
        &t,
        "/api/v1/subscribe/",
        json!({"media_source": "themoviedb", "media_id": "991000", "name": "改名"}),
    )
    .await;
    assert_eq!(r.body["success"], false);
    let a = last(&h);
    assert!(a.duplicate_attempt);
    assert_eq!(a.outcome, Outcome::Failed);
    assert_eq!(h.snapshot(), h.initial_snapshot());
}

#[tokio::test]
async fn a_download_is_the_same_whatever_the_display_name_or_hex_case() {
    let h = start(vec![]).await;
    let t = h.token_for("alice").unwrap();
    let hash = "b2".repeat(20);
    let first = post(
        &h,
        &t,
        "/api/v1/download/add",
        download_body(&magnet(&hash, "Between.2025.1080p")),
    )
    .await;
    assert_eq!(
        first.body,
        json!({"success": true, "message": "添加下载成功", "data": {"download_id": hash}})
    );
    // base32 of twenty 0xb2 bytes, and upper-case hex with another name and parameter order.
    let b32 = "WKZLFMVSWKZLFMVSWKZLFMVSWKZLFMVS";
    for enclosure in [
        format!("magnet:?dn=Other.Name&xt=urn:btih:{}", hash.to_uppercase()),
        magnet(b32, "x"),
    ] {
        let again = post(&h, &t, "/api/v1/download/add", download_body(&enclosure)).await;
        assert_eq!(again.body["success"], false);
        assert!(last(&h).duplicate_attempt);
    }
    let downloads = h.snapshot().downloads;
    assert_eq!(downloads.len(), 2);
    let row = downloads
        .iter()
        .find(|r| r["hash"] == hash.as_str())
        .unwrap();
    assert_eq!(row["id"], hash.as_str());
    assert_eq!(row["infohash"], hash.as_str());
    assert_eq!(row["downloader"], "evaluation-downloader");
    let ledger = h.ledger();
    assert!(
        matches!(&ledger[0].effects[..], [Effect::DownloadAdded { infohash, .. }] if *infohash == hash)
    );
    assert!(ledger[1..].iter().all(|a| a.effects.is_empty()));

    // The hex of the pre-existing row was normalised to lower case on load.
    let dd = post(
        &h,
        &t,
        "/api/v1/download/add",
        download_body(&magnet(&"dd".repeat(20), "y")),
    )
    .await;
    assert_eq!(dd.body["success"], false);

    // Business refusals: not a magnet, unknown downloader, unknown directory.
    let http = post(
        &h,
        &t,
        "/api/v1/download/add",
        download_body("https://x/a.torrent"),
    )
    .await;
    assert_eq!(http.body["success"], false);
    let mut b = download_body(&magnet(&"c3".repeat(20), "z"));
    b["downloader"] = json!("nope");
    assert_eq!(
        post(&h, &t, "/api/v1/download/add", b).await.body["success"],
        false
    );
    let mut b = download_body(&magnet(&"c3".repeat(20), "z"));
    b["save_path"] = json!("/elsewhere");
    assert_eq!(
        post(&h, &t, "/api/v1/download/add", b).await.body["success"],
        false
    );
    // Fields outside TorrentInfo are invalid input.
    let mut b = download_body(&magnet(&"c3".repeat(20), "z"));
    b["torrent_in"]["media_info"] = json!({});
    assert_eq!(
        post(&h, &t, "/api/v1/download/add", b).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(h.snapshot().downloads.len(), 2);
}

#[tokio::test]
async fn lost_receipt_applies_the_download_and_drops_the_connection() {
    let h = start(vec![
        fault(json!({"operation": "download.add", "action": {"kind": "drop"}, "nth": 1})),
        fault(json!({
            "operation": ["download.tasks.active", "download.history.list"],
            "action": {"kind": "respond", "status": 503},
            "when": {"after_unknown": true}
        })),
    ])
    .await;
    let t = h.token_for("alice").unwrap();
    // Reads work before the first unknown.
    assert_eq!(
        get(&h, &t, "/api/v1/download/").await.status,
        StatusCode::OK
    );
    // A refused add is not "the first creating add": the drop waits for one that lands.
    let refused = post(
        &h,
        &t,
        "/api/v1/download/add",
        download_body("not-a-magnet"),
    )
    .await;
    assert_eq!(refused.body["success"], false);

    let hash = "c3".repeat(20);
    let err = client()
        .post(format!("{}/api/v1/download/add", h.url()))
        .bearer_auth(&t)
        .json(&download_body(&magnet(&hash, "Summer.2025.1080p")))
        .send()
        .await
        .unwrap_err();
    assert!(
        err.status().is_none(),
        "a transport error, not an HTTP status: {err}"
    );
    // hyper's "connection closed before message completed": no byte of a response arrived.
    let mut chain = Vec::new();
    let mut source: Option<&dyn std::error::Error> = Some(&err);
    while let Some(e) = source {
        chain.push(e.to_string());
        source = e.source();
    }
    assert!(
        chain
            .iter()
            .any(|m| m.contains("connection closed before message completed")),
        "{chain:?}"
    );

    let targets: Vec<_> = h
        .snapshot()
        .downloads
        .into_iter()
        .filter(|r| r["hash"] == hash.as_str())
        .collect();
    assert_eq!(targets.len(), 1);
    let a = last(&h);
    assert_eq!(a.operation_id.as_deref(), Some("download.add"));
    assert!(
        matches!(&a.effects[..], [Effect::DownloadAdded { infohash, .. }] if *infohash == hash)
    );
    assert_eq!(a.reply, Reply::Dropped);
    assert_eq!(a.status, None);
    assert_eq!(a.outcome, Outcome::Unknown);
    assert!(a.observations.is_empty());
    assert_eq!(a.faults, vec![FaultAction::Drop { after_effect: true }]);

    // After the unknown, download reads fail for the rest of the run, with no evidence.
    for path in ["/api/v1/download/", "/api/v1/history/download"] {
        let r = get(&h, &t, path).await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.body["success"], false);
        let a = last(&h);
        assert!(a.observations.is_empty());
        assert_eq!(a.refusal.unwrap().kind, RefusalKind::Fault);
    }
    // A retry is a refused duplicate; the fault fired once only.
    let retry = post(
        &h,
        &t,
        "/api/v1/download/add",
        download_body(&magnet(&hash, "again")),
    )
    .await;
    assert_eq!(retry.body["success"], false);
    assert!(last(&h).duplicate_attempt);

    // Remove the read fault at run time: the row is now observed by a read.
    h.set_faults(vec![]);
    let r = get(&h, &t, "/api/v1/download/").await;
    assert_eq!(r.status, StatusCode::OK);
    let seen: Vec<_> = last(&h).observations.iter().map(|o| o.id.clone()).collect();
    assert!(seen.contains(&json!(hash)));
    h.shutdown().await;
}

#[tokio::test]
async fn a_stalled_call_holds_until_shutdown_while_others_are_served() {
    let h = start(vec![
        fault(
            json!({"operation": "subscription.list", "action": {"kind": "stall"},
                     "when": {"headers": {"x-moviepilot-agent-source": "subagent"}}}),
        ),
        fault(json!({"operation": "site.list", "action": {"kind": "stall", "ms": 50}, "times": 1})),
    ])
    .await;
    let t = h.token_for("alice").unwrap();
    let stalled = client()
        .get(format!("{}/api/v1/subscribe/", h.url()))
        .bearer_auth(&t)
        .header("X-MoviePilot-Agent-Source", "subagent")
        .timeout(Duration::from_millis(300))
        .send()
        .await
        .unwrap_err();
    assert!(stalled.is_timeout(), "{stalled:?}");
    // The same operation from the parent scope is served while the subagent's call hangs.
    assert_eq!(
        get(&h, &t, "/api/v1/subscribe/").await.status,
        StatusCode::OK
    );
    // A bounded stall answers normally once it ends.
    let slow = get(&h, &t, "/api/v1/site/agent").await;
    assert_eq!(slow.status, StatusCode::OK);
    assert_eq!(last(&h).faults, vec![FaultAction::Stall { ms: Some(50) }]);

    let first = h.ledger().remove(0);
    assert_ne!(first.reply, Reply::Sent);
    assert_eq!(first.status, None);
    assert_eq!(first.outcome, Outcome::Unknown);
    assert!(first.observations.is_empty());
    assert_eq!(first.agent.source.as_deref(), Some("subagent"));
    // Shutdown ends the stalled call too.
    h.shutdown().await;
}

#[tokio::test]
async fn a_5xx_fault_answers_instead_of_the_operation() {
    let h = start(vec![
        fault(
            json!({"operation": "site.list", "action": {"kind": "respond", "status": 502,
                     "body": {"detail": "Bad Gateway"}}, "times": 1}),
        ),
        fault(json!({"operation": "subscription.add",
                     "action": {"kind": "respond", "status": 500, "after_effect": true}})),
    ])
    .await;
    let t = h.token_for("admin").unwrap();
    let r = get(&h, &t, "/api/v1/site/agent").await;
    assert_eq!(r.status, StatusCode::BAD_GATEWAY);
    assert_eq!(r.body, json!({"detail": "Bad Gateway"}));
    let a = last(&h);
    assert!(a.observations.is_empty());
    assert_eq!(a.outcome, Outcome::Failed);
    assert_eq!(
        get(&h, &t, "/api/v1/site/agent").await.status,
        StatusCode::OK
    );

    // After the effect: the subscription exists although the client saw a 500.
    let r = post(
        &h,
        &t,
        "/api/v1/subscribe/",
        json!({"media_source": "themoviedb", "media_id": "535167"}),
    )
    .await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(r.body["success"], false);
    let a = last(&h);
    assert!(
        matches!(&a.effects[..], [Effect::SubscriptionCreated { record, .. }] if record["name"] == "流浪地球")
    );
    assert_eq!(a.status, Some(500));
    assert_eq!(h.snapshot().subscriptions.len(), 2);
}

#[tokio::test]
async fn every_catalogue_route_is_recognised_and_unserved_ones_answer_501() {
    let h = start(vec![]).await;
    let t = h.token_for("admin").unwrap();
    for op in catalog().operations() {
        let mut path = op.path_template.replace("{source}", "tmdb");
        for p in op.path_params() {
            path = path.replace(&format!("{{{p}}}"), "1");
        }
        match op.id {
            "media.person.search" => path.push_str("?type=person&title=x"),
            "plugin.installed" => path.push_str("?state=installed"),
            "plugin.market" => path.push_str("?state=market"),
            _ => {}
        }
        let method = reqwest::Method::from_bytes(op.method.as_bytes()).unwrap();
        let r = call(&h, Some(&t), method, &path, None).await;
        let a = last(&h);
        assert_eq!(
            a.operation_id.as_deref(),
            Some(op.id),
            "{} {path}",
            op.method
        );
        assert_eq!(a.method, op.method);
        if SERVED_OPERATIONS.contains(&op.id) {
            assert_ne!(r.status, StatusCode::NOT_IMPLEMENTED, "{}", op.id);
        } else {
            assert_eq!(r.status, StatusCode::NOT_IMPLEMENTED, "{}", op.id);
            assert_eq!(r.body["operation_id"], op.id);
            assert_eq!(a.refusal.unwrap().kind, RefusalKind::NotServed);
        }
    }
    assert_eq!(h.ledger().len(), 229);

    let unknown = get(&h, &t, "/api/v1/no/such/route").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(last(&h).refusal.unwrap().kind, RefusalKind::NotFound);
    let wrong_method = call(
        &h,
        Some(&t),
        reqwest::Method::PUT,
        "/api/v1/download/add",
        None,
    )
    .await;
    assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
    let a = last(&h);
    assert_eq!(a.operation_id, None);
    assert_eq!(a.refusal.unwrap().kind, RefusalKind::MethodNotAllowed);
}

#[tokio::test]
async fn the_ledger_records_refusals_headers_and_only_returned_records() {
    let h = start(vec![]).await;
    let t = h.token_for("alice").unwrap();
    let bad_id = get(&h, &t, "/api/v1/subscribe/abc").await;
    assert_eq!(bad_id.status, StatusCode::UNPROCESSABLE_ENTITY);
    let r = get(&h, &t, "/api/v1/subscribe/?page=1&count=20").await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1);
    let active = get(&h, &t, "/api/v1/site/agent?status=active").await;
    assert_eq!(active.body["data"].as_array().unwrap().len(), 2);

    let ledger = h.ledger();
    assert_eq!(
        ledger.iter().map(|a| a.sequence).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    let refused = &ledger[0];
    assert_eq!(refused.operation_id.as_deref(), Some("subscription.get"));
    assert_eq!(
        refused.path_params,
        json!({"subscribe_id": "abc"}).as_object().unwrap().clone()
    );
    assert_eq!(refused.refusal.as_ref().unwrap().kind, RefusalKind::Invalid);
    assert!(refused.observations.is_empty());
    let list = &ledger[1];
    assert_eq!(
        list.query,
        json!({"page": "1", "count": "20"})
            .as_object()
            .unwrap()
            .clone()
    );
    assert_eq!(list.agent.session.as_deref(), Some("sess-1"));
    assert_eq!(list.agent.channel.as_deref(), Some("web"));
    assert_eq!(list.agent.source.as_deref(), Some("conversation"));
    assert_eq!(list.user.as_ref().unwrap().id, 2);
    assert_eq!(list.outcome, Outcome::Succeeded);
    assert_eq!(list.observations.len(), 1);
    assert_eq!(list.observations[0].id, json!(71));
    // Only the enabled sites were returned, so only they are evidence.
    let ids: Vec<_> = ledger[2]
        .observations
        .iter()
        .map(|o| o.id.clone())
        .collect();
    assert_eq!(ids, vec![json!(11), json!(13)]);
    assert!(
        ledger[2]
            .observations
            .iter()
            .all(|o| o.kind == ObservationKind::Site)
    );
}

#[tokio::test]
async fn search_then_download_from_the_search_results() {
    let h = start(vec![]).await;
    let t = h.token_for("alice").unwrap();
    let empty = get(&h, &t, "/api/v1/search/last/context").await;
    assert_eq!(empty.body["data"], json!({"params": {}, "results": []}));
    let found = get(
        &h,
        &t,
        "/api/v1/search/media/204541?media_source=themoviedb&season=1",
    )
    .await;
    assert_eq!(header(&found, "x-total-count").as_deref(), Some("1"));
    assert_eq!(found.body["data"][0]["media_info"]["title"], "三体");
    let last_search = get(&h, &t, "/api/v1/search/last/context").await;
    let results = last_search.body["data"]["results"].clone();
    assert_eq!(results.as_array().unwrap().len(), 1);
    let a = last(&h);
    assert_eq!(a.observations[0].kind, ObservationKind::Resource);
    assert_eq!(a.observations[0].id, json!("e5".repeat(20)));
    // The torrent_in as returned; the media identity comes from the catalogued resource.
    let add = post(
        &h,
        &t,
        "/api/v1/download/add",
        json!({"torrent_in": results[0]["torrent_info"]}),
    )
    .await;
    assert_eq!(add.body["data"]["download_id"], "e5".repeat(20));
    let row = h.snapshot().downloads.into_iter().last().unwrap();
    assert_eq!(row["media_id"], "204541");
    assert_eq!(row["media"]["title"], "三体");

    let exists = get(
        &h,
        &t,
        "/api/v1/mediaserver/exists?media_source=themoviedb&media_id=204541",
    )
    .await;
    assert_eq!(exists.body["data"]["exists"], false);
    let detail = get(
        &h,
        &t,
        "/api/v1/media/535167?media_source=themoviedb&type_name=电影",
    )
    .await;
    assert_eq!(detail.body["data"]["title"], "流浪地球");
    let queue = get(&h, &t, "/api/v1/transfer/queue").await;
    assert_eq!(queue.body["data"], json!([]));
}

#[tokio::test]
async fn settings_are_redacted_and_updated_with_four_ops() {
    let h = start(vec![]).await;
    let t = h.token_for("admin").unwrap();
    let r = get(&h, &t, "/api/v1/system/settings?include_values=true").await;
    let items = r.body["data"].as_array().unwrap();
    let by_key = |k: &str| items.iter().find(|i| i["key"] == k).unwrap().clone();
    assert_eq!(
        by_key("TMDB_API_KEY"),
        json!({"key": "TMDB_API_KEY", "secret": true, "value": "******"})
    );
    assert_eq!(
        by_key("Downloaders")["value"][0]["config"]["password"],
        "******"
    );
    assert_eq!(by_key("Downloaders")["value"][0]["config"]["host"], "h");
    let shown = get(
        &h,
        &t,
        "/api/v1/system/settings?setting_key=TMDB_API_KEY&show_secrets=true",
    )
    .await;
    assert_eq!(shown.body["data"][0]["value"], "tmdb-key-value");
    let names = get(&h, &t, "/api/v1/system/settings?keyword=plain").await;
    assert_eq!(
        names.body["data"],
        json!([{"key": "Plain", "secret": false}])
    );

    let path = "/api/v1/system/settings";
    let merged = post(
        &h,
        &t,
        path,
        json!({"setting_key": "Plain", "operation": "merge_dict", "value": {"b": 2}}),
    )
    .await;
    assert_eq!(merged.body["data"]["value"], json!({"a": 1, "b": 2}));
    post(&h, &t, path, json!({"setting_key": "Downloaders", "operation": "upsert_list_item", "value": {"name": "tr", "config": {}}})).await;
    post(&h, &t, path, json!({"setting_key": "Downloaders", "operation": "upsert_list_item", "value": {"name": "qb", "config": {"host": "h2"}}})).await;
    let settings = h.snapshot().settings;
    assert_eq!(
        settings["Downloaders"],
        json!([{"name": "qb", "config": {"host": "h2"}}, {"name": "tr", "config": {}}])
    );
    let removed = post(
        &h,
        &t,
        path,
        json!({"setting_key": "Downloaders", "operation": "remove_list_item", "value": "tr"}),
    )
    .await;
    assert_eq!(removed.body["success"], true);
    let none = post(
        &h,
        &t,
        path,
        json!({"setting_key": "Downloaders", "operation": "remove_list_item", "value": "tr"}),
    )
    .await;
    assert_eq!(none.body["success"], false);
    post(
        &h,
        &t,
        path,
        json!({"setting_key": "TMDB_API_KEY", "value": "new"}),
    )
    .await;
    assert_eq!(h.snapshot().settings["TMDB_API_KEY"], "new");
    let bad_op = post(
        &h,
        &t,
        path,
        json!({"setting_key": "Plain", "operation": "append"}),
    )
    .await;
    assert_eq!(bad_op.status, StatusCode::UNPROCESSABLE_ENTITY);
    let effects: Vec<_> = h.ledger().into_iter().flat_map(|a| a.effects).collect();
    assert_eq!(effects.len(), 5);
    assert!(
        matches!(&effects[0], Effect::SettingUpdated { key, op, before: Some(_), after: Some(_) } if key == "Plain" && op == "merge_dict")
    );

    let jobs = get(&h, &t, "/api/v1/dashboard/schedule").await;
    assert_eq!(jobs.body["data"][0]["status"], "等待");
    let run = get(&h, &t, "/api/v1/system/runscheduler?jobid=subscribe_search").await;
    assert_eq!(run.body["success"], true);
    assert!(
        matches!(&last(&h).effects[..], [Effect::SchedulerJobRun { job_id }] if job_id == "subscribe_search")
    );
    assert_eq!(h.snapshot().scheduler[0].status, "正在运行");
    let unknown = get(&h, &t, "/api/v1/system/runscheduler?jobid=nope").await;
    assert_eq!(unknown.body["success"], false);
}

#[tokio::test]
async fn world_restrictions_refuse_other_operations_and_pages() {
    let mut config = FakeConfig::new(SECRET);
    config.restrictions = serde_json::from_value(json!({
        "operations": ["subscription.list"], "count": 20, "max_page": 6
    }))
    .unwrap();
    let h = start_with(config).await;
    let t = h.token_for("alice").unwrap();
    assert_eq!(
        get(&h, &t, "/api/v1/subscribe/?page=6&count=20")
            .await
            .status,
        StatusCode::OK
    );
    for path in [
        "/api/v1/subscribe/?page=7&count=20",
        "/api/v1/subscribe/?page=1&count=50",
        "/api/v1/subscribe/",
        "/api/v1/subscribe/media/1?media_source=themoviedb",
    ] {
        let r = get(&h, &t, path).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(last(&h).refusal.unwrap().kind, RefusalKind::Restricted);
    }
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[tokio::test]
async fn state_files_with_unknown_fields_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let addr = "127.0.0.1:0".parse().unwrap();
    let cases = [
        (
            r#"{"config": {"secret_key": "k"}, "sate": {}}"#,
            "unknown field `sate`",
        ),
        (
            r#"{"config": {"secret_key": "k"}, "state": {"users": [{"id": 1, "name": "a", "password": "b", "colour": "red"}]}}"#,
            "unknown field `colour`",
        ),
        (
            r#"{"config": {"secret_key": "k"}, "state": {"subscriptions": [{"id": 1, "name": "a", "media_source": "douban", "media_id": "1", "colour": "red"}]}}"#,
            "state.subscriptions[0]: unknown field(s) [\"colour\"]",
        ),
        (
            r#"{"config": {"secret_key": "k", "faults": [{"operation": "x", "action": {"kind": "explode"}}]}}"#,
            "unknown variant `explode`",
        ),
        (
            r#"{"state": {"downloads": [{"hash": "abc"}]}, "config": {"secret_key": "k"}}"#,
            "`hash` must be a 40-hex infohash",
        ),
    ];
    for (i, (text, expected)) in cases.iter().enumerate() {
        let path = write(&dir, &format!("s{i}.json"), text);
        let err = mpa_eval::load_state_file(&path, addr).unwrap_err();
        assert!(matches!(err, EvalError::InvalidState { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains(expected), "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
    }
    let no_secret = write(&dir, "nosecret.json", r#"{"state": {}}"#);
    let err = mpa_eval::load_state_file(&no_secret, addr).unwrap_err();
    assert!(matches!(err, EvalError::MissingSecret { .. }), "{err}");
    let missing = mpa_eval::load_state_file(&dir.path().join("absent.json"), addr).unwrap_err();
    assert!(matches!(missing, EvalError::ReadState { .. }), "{missing}");
}

#[tokio::test]
async fn the_demo_world_loads_and_serves() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../eval/worlds/demo.json");
    let file = StateFile::load(&path).unwrap();
    let (config, state) = mpa_eval::load_state_file(&path, "127.0.0.1:0".parse().unwrap()).unwrap();
    assert_eq!(state, file.state);
    assert!(
        state
            .users
            .iter()
            .any(|u| u.name == "admin" && u.super_user)
    );
    assert!(
        state
            .users
            .iter()
            .any(|u| u.name == "alice" && !u.super_user)
    );
    let h = FakeMoviePilot::start(config, state).await.unwrap();
    let t = token(&h, "alice", "alice-demo").await;
    let r = get(&h, &t, "/api/v1/media/search?title=三体").await;
    let titles: Vec<_> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["en_title"].clone())
        .collect();
    assert_eq!(
        titles,
        vec![json!("The Three-Body Problem"), json!("3 Body Problem")]
    );
    h.shutdown().await;

    // `serve` runs the same file until its shutdown future resolves.
    mpa_eval::serve("127.0.0.1:0".parse().unwrap(), &path, async {})
        .await
        .unwrap();
}
