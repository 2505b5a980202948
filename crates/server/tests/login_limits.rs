//! Regressions of issue 12 (login under attack, tokens): each test is named after the finding,
//! asserts the exact answers and that nothing else changed (tokens issued).
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common;

use common::*;
use reqwest::StatusCode;
use serde_json::Value;

async fn code_of(r: reqwest::Response) -> (StatusCode, Option<String>, Value) {
    let status = r.status();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(r.headers()["content-type"], "application/json");
    (status, retry, r.json().await.unwrap())
}

/// Today 40 parallel guesses were all checked (the limit was read before hashing and counted
/// after), so the right one logged in. The attempt is now reserved before the check.
#[tokio::test(flavor = "multi_thread")]
async fn forty_parallel_guesses_check_at_most_the_limit_and_the_right_one_gets_429() {
    let env = Env::start().await;
    env.accounts
        .create("alice", false, Some("the-right-password"))
        .await
        .unwrap();
    let env = std::sync::Arc::new(env);
    let (first_refusal_tx, first_refusal) = tokio::sync::oneshot::channel::<()>();
    let first_refusal_tx = std::sync::Mutex::new(Some(first_refusal_tx));
    let first_refusal_tx = std::sync::Arc::new(first_refusal_tx);
    let mut guesses = Vec::new();
    for i in 0..39 {
        let env = std::sync::Arc::clone(&env);
        let tx = std::sync::Arc::clone(&first_refusal_tx);
        guesses.push(tokio::spawn(async move {
            let r = env.login("alice", &format!("wrong-guess-{i}")).await;
            let status = r.status();
            if status == StatusCode::TOO_MANY_REQUESTS
                && let Some(tx) = tx.lock().unwrap().take()
            {
                let _ = tx.send(());
            }
            status
        }));
    }
    // The right password joins the burst once the limit is reached: the guesses still being
    // checked hold their reservations, so it must not get in.
    first_refusal.await.unwrap();
    let (status, retry, v) = code_of(env.login("alice", "the-right-password").await).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(v["error"]["code"], "too_many_login_attempts");
    assert!(retry.unwrap().parse::<u64>().unwrap() > 0);
    let mut checked = 0;
    let mut refused = 0;
    for g in guesses {
        match g.await.unwrap() {
            StatusCode::UNAUTHORIZED => checked += 1,
            StatusCode::TOO_MANY_REQUESTS => refused += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert!(
        checked <= 5,
        "{checked} guesses were checked; the limit is 5"
    );
    assert_eq!(checked + refused, 39);
    // While the limit holds, the right password is still refused, and no token was issued.
    let (status, _, _) = code_of(env.login("alice", "the-right-password").await).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(rows(&env, "auth_tokens"), 0);
    std::sync::Arc::into_inner(env).unwrap().shutdown().await;
}

/// Five failures for one account used to lock out every account behind the same address (one
/// reverse proxy serves a whole household). Now they lock that account at that address only.
#[tokio::test(flavor = "multi_thread")]
async fn five_failures_for_one_account_do_not_lock_out_others_behind_the_same_proxy() {
    let env = Env::start().await;
    env.accounts
        .create("carol", false, Some("carol-password"))
        .await
        .unwrap();
    env.accounts
        .create("dave", false, Some("dave-password"))
        .await
        .unwrap();
    for _ in 0..5 {
        let r = env.login("carol", "wrong-password").await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let body = r.text().await.unwrap();
        assert!(body.contains("invalid_credentials") && !body.contains("wrong-password"));
    }
    let (status, retry, v) = code_of(env.login("carol", "carol-password").await).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(v["error"]["code"], "too_many_login_attempts");
    assert!(retry.is_some());
    assert_eq!(rows(&env, "auth_tokens"), 0);
    // Someone else behind the same address logs in, and a wrong password there is just wrong.
    let r = env.login("dave", "dave-password").await;
    assert_eq!(r.status(), StatusCode::OK);
    let (status, _, v) = code_of(env.login("nobody", "whatever-password").await).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(v["error"]["code"], "invalid_credentials");
    assert_eq!(rows(&env, "auth_tokens"), 1);
    env.shutdown().await;
}

/// An attacker elsewhere could lock a named user out. Failures from other addresses now only slow
/// that name down: the owner's right password still works (after a short delay).
#[tokio::test(flavor = "multi_thread")]
async fn an_attacker_on_another_address_cannot_lock_the_owner_out() {
    let env = Env::start().await;
    env.accounts
        .create("erin", false, Some("erins-own-password"))
        .await
        .unwrap();
    for attacker in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        let c = client_from(attacker);
        for i in 0..5 {
            let r = env.login_with(&c, "erin", &format!("guess-{i}")).await;
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        }
        // Locked at that address, even with the right password.
        let (status, _, v) = code_of(env.login_with(&c, "erin", "erins-own-password").await).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(v["error"]["code"], "too_many_login_attempts");
    }
    assert_eq!(rows(&env, "auth_tokens"), 0);
    // The owner, from her own address: a typo is a plain 401, the right password logs in.
    let (status, _, v) = code_of(env.login("erin", "erins-typo").await).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(v["error"]["code"], "invalid_credentials");
    let (status, _, v) = code_of(env.login("erin", "erins-own-password").await).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["user"]["name"], "erin");
    assert_eq!(rows(&env, "auth_tokens"), 1);
    env.shutdown().await;
}

/// One address trying many names meets a separate, higher ceiling (the per-account limit alone
/// would let it try five passwords on every name).
#[tokio::test(flavor = "multi_thread")]
async fn one_address_guessing_many_names_meets_the_address_ceiling() {
    let env = Env::start().await;
    env.accounts
        .create("frank", false, Some("franks-password"))
        .await
        .unwrap();
    let sprayer = client_from("127.0.0.9");
    for i in 0..50 {
        let r = env
            .login_with(&sprayer, &format!("user{i}"), "password123")
            .await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "attempt {i}");
    }
    let (status, retry, v) =
        code_of(env.login_with(&sprayer, "frank", "franks-password").await).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(v["error"]["code"], "too_many_login_attempts");
    assert!(retry.is_some());
    // Other addresses are not affected.
    let r = env.login("frank", "franks-password").await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(rows(&env, "auth_tokens"), 1);
    env.shutdown().await;
}

/// `POST /api/v1/logout` with the static admin token answered 204 although the token keeps
/// working; it now says that it cannot be revoked.
#[tokio::test(flavor = "multi_thread")]
async fn logout_with_the_static_admin_token_says_it_cannot_be_revoked() {
    let env = Env::start().await;
    let r = env
        .http
        .post(env.url("/api/v1/logout"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let (status, _, v) = code_of(r).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["code"], "admin_token_not_revocable");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("MPA_ADMIN_TOKEN")
    );
    // Nothing changed: the token still works.
    let (s, me) = env.get(ADMIN_TOKEN, "/api/v1/me").await;
    assert_eq!((s, me["is_admin"].clone()), (StatusCode::OK, true.into()));
    // A login token is still revoked the usual way.
    let token = env.user("gina", "ginas-password", false).await;
    assert_eq!(env.logout(&token).await, StatusCode::NO_CONTENT);
    assert_eq!(
        env.get(&token, "/api/v1/me").await.0,
        StatusCode::UNAUTHORIZED
    );
    env.shutdown().await;
}
