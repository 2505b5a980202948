//! Proxies named in the environment are ignored: MoviePilot is local, and a proxy would see
//! every bearer token. The test runs in a process of its own (`in_own_process!`), because the
//! environment is process-wide.

use crate::common;

use serde_json::Value;

#[tokio::test]
async fn environment_proxies_are_ignored() {
    mpa_test_support::in_own_process!(environment_proxies_are_ignored);
    let dead = common::dead_addr().await;
    let proxy = format!("http://{dead}");
    for name in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        // SAFETY: this is the only test in this process (`in_own_process!`) and no other thread reads or writes the
        // environment while it runs (the runtime's worker threads do not touch it).
        unsafe { std::env::set_var(name, &proxy) };
    }
    for name in ["NO_PROXY", "no_proxy"] {
        // SAFETY: as above.
        unsafe { std::env::remove_var(name) };
    }
    let server = common::ok_server().await;

    // The environment really does name a dead proxy: a default client goes through it and fails.
    let plain = reqwest::Client::new()
        .get(format!("{}/api/v1/subscribe/", server.base_url()))
        .send()
        .await;
    assert!(
        plain.is_err(),
        "a client honouring the environment must fail via the dead proxy"
    );
    assert!(server.seen().is_empty());

    // The gateway's client goes straight to MoviePilot.
    let op = mpa_gateway::catalogue().get("subscription.list").unwrap();
    let request = op
        .prepare(&Value::Null, &Value::Null, &Value::Null)
        .unwrap();
    let response = common::client(&server.base_url())
        .send(&request, &common::ctx())
        .await
        .unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(server.take()[0].request_line(), "GET /api/v1/subscribe/");
}
