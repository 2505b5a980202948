//! MoviePilot tokens and sign-in: minted tokens carry MoviePilot's claims, their expiry is
//! readable, the login form is what MoviePilot's OAuth2 endpoint expects, a wrong password and
//! an unknown user are indistinguishable, and no token shows in any error.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common;

use axum::response::IntoResponse;
use common::serve;
use mpa_gateway::{
    GatewayError, TOKEN_PURPOSE, TokenClaims, mint_token, mint_token_at, now_epoch,
    parse_login_answer, token_expiry, verify_token,
};
use percent_encoding::percent_decode_str;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const SECRET: &str = "moviepilot-secret-key-for-tests";
const PASSWORD: &str = "p@ss w&rd=密码+1";

fn form(body: &[u8]) -> BTreeMap<String, String> {
    std::str::from_utf8(body)
        .unwrap()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| {
                percent_decode_str(&s.replace('+', " "))
                    .decode_utf8()
                    .unwrap()
                    .into_owned()
            };
            (decode(k), decode(v))
        })
        .collect()
}

#[test]
fn a_minted_token_has_moviepilots_claims() {
    let token = mint_token_at(
        SECRET,
        "42",
        "alice",
        true,
        2,
        Duration::from_secs(600),
        1_000_000,
    )
    .unwrap();
    let claims = verify_token(SECRET, token.expose(), 1_000_001).unwrap();
    assert_eq!(
        claims,
        TokenClaims {
            sub: "42".into(),
            username: "alice".into(),
            super_user: true,
            level: 2,
            purpose: TOKEN_PURPOSE.into(),
            exp: 1_000_600,
            iat: 1_000_000,
        }
    );
    assert_eq!(TOKEN_PURPOSE, "authentication");
    // The claim types MoviePilot's TokenPayload reads: sub a string of digits, the rest typed.
    let raw: serde_json::Value =
        mpa_gateway::jwt::decode_hs256(token.expose(), SECRET.as_bytes(), 1_000_001).unwrap();
    assert_eq!(
        raw,
        json!({"sub": "42", "username": "alice", "super_user": true, "level": 2,
               "purpose": "authentication", "exp": 1_000_600, "iat": 1_000_000})
    );
    assert_eq!(
        verify_token("another-secret", token.expose(), 1_000_001),
        None
    );
    assert_eq!(
        verify_token(SECRET, token.expose(), 1_000_600),
        None,
        "expired"
    );
    assert_eq!(token_expiry(token.expose()), Some(1_000_600));
    assert_eq!(token.expires_at(), Some(1_000_600));
    assert_eq!(token_expiry("not-a-token"), None);

    let fresh = mint_token(SECRET, "7", "bob", false, 1, Duration::from_secs(300)).unwrap();
    let exp = fresh.expires_at().unwrap();
    let now = now_epoch();
    assert!(exp > now && exp <= now + 300);
    assert!(
        !verify_token(SECRET, fresh.expose(), now)
            .unwrap()
            .super_user
    );

    // A token for another purpose is not a REST token.
    let resource = mpa_gateway::jwt::encode_hs256(
        &json!({"sub": "1", "username": "a", "super_user": false, "level": 1,
                "purpose": "resource", "exp": 2_000_000, "iat": 1}),
        SECRET.as_bytes(),
    );
    assert_eq!(verify_token(SECRET, &resource, 1_000_000), None);
}

#[test]
fn minting_refuses_identities_moviepilot_cannot_read() {
    let e = mint_token(SECRET, "alice", "alice", false, 1, Duration::from_secs(60)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot mint a MoviePilot token: the MoviePilot user id must be a decimal number"
    );
    let e = mint_token("", "1", "alice", false, 1, Duration::from_secs(60)).unwrap_err();
    assert!(matches!(e, GatewayError::InvalidIdentity { .. }));
    assert!(!format!("{e:?}").contains(SECRET));
}

/// A MoviePilot sign-in endpoint: user `alice` (id 3, superuser) with [`PASSWORD`], user
/// `carol` disabled. Distinct error texts for the two failure cases, as MoviePilot has.
async fn login_server() -> common::TestServer {
    serve(Arc::new(|seen| {
        if seen.target != "/api/v1/login/access-token" || seen.method != "POST" {
            return common::status_response(404, json!({"detail": "Not Found"}));
        }
        let f = form(&seen.body);
        match (
            f.get("username").map(String::as_str),
            f.get("password").map(String::as_str),
        ) {
            (Some("alice"), Some(PASSWORD)) => {
                let token =
                    mint_token(SECRET, "3", "alice", true, 2, Duration::from_secs(3600)).unwrap();
                axum::Json(json!({
                    "access_token": token.expose(), "token_type": "bearer", "super_user": true,
                    "user_id": 3, "user_name": "alice", "avatar": null, "level": 2,
                    "permissions": {"discovery": true}, "widzard": false,
                }))
                .into_response()
            }
            (Some("alice"), _) => {
                common::status_response(401, json!({"detail": "用户名、密码或二次校验码不正确"}))
            }
            (Some("carol"), Some("right")) => {
                common::status_response(403, json!({"detail": "用户未启用"}))
            }
            _ => common::status_response(401, json!({"detail": "用户名、密码、二次校验码不正确"})),
        }
    }))
    .await
}

#[tokio::test]
async fn login_posts_the_oauth2_form_and_adopts_the_identity() {
    let server = login_server().await;
    let c = common::client(&server.base_url());
    let r = c.login("alice", PASSWORD).await.unwrap();
    assert_eq!(
        (
            r.user_id.as_str(),
            r.username.as_str(),
            r.super_user,
            r.level,
            r.token_type.as_str()
        ),
        ("3", "alice", true, 2, "bearer")
    );
    assert_eq!(r.permissions, json!({"discovery": true}));
    let claims = verify_token(SECRET, r.token.expose(), now_epoch()).unwrap();
    assert_eq!(claims.sub, "3");
    assert_eq!(r.expires_at, Some(claims.exp));
    assert!(
        !format!("{r:?}").contains(r.token.expose()),
        "LoginResult's Debug hides the token"
    );

    let seen = server.take();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].request_line(), "POST /api/v1/login/access-token");
    assert_eq!(
        seen[0].header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert!(seen[0].header("authorization").is_none());
    assert_eq!(
        form(&seen[0].body),
        BTreeMap::from([
            ("password".to_owned(), PASSWORD.to_owned()),
            ("username".to_owned(), "alice".to_owned())
        ])
    );
}

#[tokio::test]
async fn wrong_password_and_unknown_user_are_the_same_error() {
    let server = login_server().await;
    let c = common::client(&server.base_url());
    let wrong = c.login("alice", "guess").await.unwrap_err();
    let unknown = c.login("mallory", "guess").await.unwrap_err();
    assert!(matches!(wrong, GatewayError::LoginRejected));
    assert_eq!(wrong.to_string(), unknown.to_string());
    assert_eq!(format!("{wrong:?}"), format!("{unknown:?}"));
    assert_eq!(
        wrong.to_string(),
        "MoviePilot did not accept this username and password / MoviePilot 用户名或密码不正确"
    );
    for e in [&wrong, &unknown] {
        assert!(
            !format!("{e}{e:?}").contains("guess"),
            "no password in errors"
        );
    }
    let disabled = c.login("carol", "right").await.unwrap_err();
    assert!(
        matches!(disabled, GatewayError::AccountDisabled),
        "{disabled:?}"
    );

    // A MoviePilot that is down: not sent, and the password is nowhere in the error.
    let down = common::dead_addr().await;
    let dead = common::client(&format!("http://{down}"));
    let e = dead.login("alice", PASSWORD).await.unwrap_err();
    assert!(
        matches!(e, GatewayError::NotSent { ref operation_id, .. } if operation_id == "login"),
        "{e:?}"
    );
    assert!(!format!("{e}{e:?}").contains(PASSWORD));
}

#[tokio::test]
async fn no_error_shows_the_token() {
    let token = mint_token(SECRET, "3", "alice", true, 2, Duration::from_secs(3600)).unwrap();
    let mut ctx = common::ctx();
    ctx.token = token.clone();
    let list = mpa_gateway::catalogue()
        .get("subscription.list")
        .unwrap()
        .prepare(
            &serde_json::Value::Null,
            &serde_json::Value::Null,
            &serde_json::Value::Null,
        )
        .unwrap();
    let forbidden = serve(Arc::new(|_| {
        common::status_response(403, json!({"detail": "token校验不通过"}))
    }))
    .await;
    let (dropping, _) = common::dropping_server().await;
    let stalling = common::stalling_server(b"").await;
    let mut errors = Vec::new();
    errors.push(
        common::client(&forbidden.base_url())
            .send(&list, &ctx)
            .await
            .unwrap_err(),
    );
    errors.push(
        common::client(&format!("http://{dropping}"))
            .send(&list, &ctx)
            .await
            .unwrap_err(),
    );
    errors.push(
        common::client_with_timeout(&format!("http://{stalling}"), Duration::from_millis(200))
            .send(&list, &ctx)
            .await
            .unwrap_err(),
    );
    let down = common::dead_addr().await;
    errors.push(
        common::client(&format!("http://{down}"))
            .send(&list, &ctx)
            .await
            .unwrap_err(),
    );
    let mut bad = ctx.clone();
    bad.token = mpa_gateway::BearerToken::new(format!("{}\n", token.expose()));
    errors.push(
        common::client(&forbidden.base_url())
            .send(&list, &bad)
            .await
            .unwrap_err(),
    );
    assert!(matches!(errors[4], GatewayError::InvalidIdentity { .. }));
    let signature = token.expose().rsplit('.').next().unwrap().to_owned();
    for e in &errors {
        let text = format!("{e} {e:?}");
        assert!(
            !text.contains(token.expose()) && !text.contains(&signature),
            "{text}"
        );
    }
    assert!(!format!("{token:?}").contains(&signature));
}

#[test]
fn login_answer_without_user_id_uses_sub() {
    let t = mint_token_at("k", "7", "bob", true, 2, Duration::from_secs(60), 100).unwrap();
    let body = serde_json::json!({"access_token": t.expose(), "token_type": "bearer"});
    let r = parse_login_answer(body.to_string().as_bytes(), "bob").unwrap();
    assert_eq!(
        (
            r.user_id.as_str(),
            r.username.as_str(),
            r.super_user,
            r.level,
            r.expires_at
        ),
        ("7", "bob", true, 2, Some(160))
    );
    assert!(matches!(
        parse_login_answer(b"{}", "x"),
        Err(GatewayError::LoginBadResponse { .. })
    ));
}

#[test]
fn refuses_non_numeric_ids_and_zero_ttl() {
    assert!(mint_token_at("k", "alice", "a", false, 1, Duration::from_secs(5), 0).is_err());
    assert!(mint_token_at("k", "1", "a", false, 1, Duration::ZERO, 0).is_err());
    assert!(mint_token_at("", "1", "a", false, 1, Duration::from_secs(5), 0).is_err());
}
