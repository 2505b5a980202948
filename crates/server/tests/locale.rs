//! Both languages on the HTTP surface (issue 29 item 6): error envelopes follow
//! `Accept-Language` unless the page's own choice (`X-MoviePilot-Locale`) says otherwise, SSE
//! error frames carry both texts and `retryable`, a missing model is named by what to set, and a
//! stored stop notice carries a code the page renders in its language.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::{Env, Frames};
use mpa_test_support::MockReply;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn get_in(
    env: &Env,
    token: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut r = env.http.get(env.url(path)).bearer_auth(token);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let r = r.send().await.unwrap();
    let s = r.status();
    (s, r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn http_errors_follow_accept_language_and_the_pages_choice_wins() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    let missing = "/api/v1/agent/sessions/nope";
    let (s, v) = get_in(
        &env,
        &token,
        missing,
        &[("accept-language", "zh-CN,zh;q=0.9,en;q=0.8")],
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(v["error"]["code"], "session_not_found");
    assert_eq!(v["error"]["message"], "会话不存在");
    let (_, v) = get_in(&env, &token, missing, &[]).await;
    assert_eq!(v["error"]["message"], "session not found");
    let (_, v) = get_in(
        &env,
        &token,
        missing,
        &[("accept-language", "zh-CN"), ("x-moviepilot-locale", "en")],
    )
    .await;
    assert_eq!(v["error"]["message"], "session not found");
    let (_, v) = get_in(
        &env,
        &token,
        missing,
        &[
            ("accept-language", "en-US"),
            ("x-moviepilot-locale", "zh-CN"),
        ],
    )
    .await;
    assert_eq!(v["error"]["message"], "会话不存在");
    // Errors made below the handlers (no route, no token) too.
    let (s, v) = get_in(
        &env,
        &token,
        "/api/v1/agent/nothing-here",
        &[("accept-language", "zh")],
    )
    .await;
    assert_eq!(
        (s, v["error"]["message"].as_str()),
        (StatusCode::NOT_FOUND, Some("没有这个接口"))
    );
    let (s, v) = get_in(
        &env,
        "wrong",
        "/api/v1/agent/sessions",
        &[("accept-language", "zh-CN")],
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(
        v["error"]["message"],
        "未登录、令牌无效或已过期，请重新登录"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn no_model_server_names_llm_base_url_and_llm_model_and_is_retryable() {
    // A port nothing listens on: the first thing a user meets before configuring a model.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let env = Env::start_agent(|c| c.model.base_url = format!("http://127.0.0.1:{port}/v1")).await;
    let token = env.user("alice", "password", false).await;
    let r = env
        .http
        .post(env.url("/api/v1/agent/stream"))
        .bearer_auth(&token)
        .header("accept-language", "zh-CN")
        .json(&json!({"text": "你好", "session_id": "nomodel"}))
        .send()
        .await
        .unwrap();
    let frames = Frames::new(r).all().await;
    let error = frames
        .iter()
        .find(|f| f["type"] == "error")
        .unwrap_or_else(|| panic!("no error frame: {frames:?}"));
    assert_eq!(error["code"], "model_unreachable", "{error}");
    assert_eq!(error["retryable"], true);
    let zh = error["message"].as_str().unwrap();
    assert!(
        zh.contains("LLM_BASE_URL") && zh.contains("LLM_MODEL") && zh.contains("无法连接"),
        "{zh}"
    );
    let en = error["message_i18n"]["en"].as_str().unwrap();
    assert!(
        en.contains("LLM_BASE_URL") && en.contains("LLM_MODEL"),
        "{en}"
    );
    assert!(
        !zh.contains("os error") && !zh.contains("tcp connect"),
        "{zh}"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stored_stop_notice_carries_its_code() {
    let env = Env::start().await;
    let token = env.user("alice", "password", false).await;
    env.mock
        .push(MockReply::text("never finishes").stall_after(1));
    let mut frames = Frames::new(
        env.stream(&token, json!({"text": "long job", "session_id": "stopme"}))
            .await,
    );
    frames.until("start").await;
    assert!(env.mock.wait_for_requests(1, crate::common::WAIT).await);
    let (s, v) = env
        .send(
            reqwest::Method::POST,
            &token,
            "/api/v1/agent/sessions/stopme/stop",
        )
        .await;
    assert_eq!((s, v["stopped"].as_bool()), (StatusCode::OK, Some(true)));
    frames.until("done").await;
    let detail = env.wait_idle(&token, "stopme").await;
    let notice = detail["display_messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["notice"] == true)
        .unwrap_or_else(|| panic!("no notice: {detail}"))
        .clone();
    assert_eq!(notice["notice_code"], "turn_stopped_by_user", "{notice}");
    env.shutdown().await;
}

/// One turn's reply text, sent with `headers`.
async fn reply_in(env: &Env, token: &str, text: &str, headers: &[(&str, &str)]) -> String {
    let mut r = env
        .http
        .post(env.url("/api/v1/agent/stream"))
        .bearer_auth(token);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let r = r
        .json(&json!({"text": text, "session_id": "commands"}))
        .send()
        .await
        .unwrap();
    crate::common::text_of(&Frames::new(r).all().await)
}

/// Regression: `/memory`, `/skills` and `/persona` answered in English inside the Chinese page,
/// and the page's skill and proposal buttons showed those English replies too.
#[tokio::test(flavor = "multi_thread")]
async fn command_replies_were_english_in_the_chinese_page() {
    let env = Env::start_learning().await;
    let token = env.user("alice", "password", false).await;
    let zh = [("x-moviepilot-locale", "zh-CN")];
    let en = [("accept-language", "zh-CN"), ("x-moviepilot-locale", "en")];
    let accept_zh = [("accept-language", "zh-CN,zh;q=0.9")];
    for (command, zh_text, en_text) in [
        (
            "/memory pending",
            "没有待处理的记忆提议",
            "No pending memory proposals",
        ),
        (
            "/skills pin nosuch",
            "没有名为 'nosuch' 的个人技能",
            "No personal skill named 'nosuch'",
        ),
        ("/persona list", "尚未定义人设", "No personas defined"),
        (
            "/persona use someone",
            "只有系统管理员可以执行此操作",
            "administrator",
        ),
        (
            "/memory nonsense",
            "用法：/memory pending",
            "Usage: /memory",
        ),
    ] {
        let reply = reply_in(&env, &token, command, &zh).await;
        assert!(reply.contains(zh_text), "{command}: {reply}");
        let reply = reply_in(&env, &token, command, &accept_zh).await;
        assert!(reply.contains(zh_text), "{command}: {reply}");
        let reply = reply_in(&env, &token, command, &en).await;
        assert!(reply.contains(en_text), "{command}: {reply}");
        assert!(
            !reply
                .chars()
                .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
            "{reply}"
        );
    }
    // The page's buttons run the same commands: their messages follow the request too.
    for (headers, expected) in [
        (&zh[..], "没有名为 'nosuch' 的个人技能"),
        (&en[..], "No personal skill named 'nosuch'"),
    ] {
        let mut r = env
            .http
            .post(env.url("/api/v1/agent/skills/nosuch/pin"))
            .bearer_auth(&token);
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        let v: Value = r
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["ok"], false, "{v}");
        assert!(v["message"].as_str().unwrap().contains(expected), "{v}");
    }
    env.shutdown().await;
}
