//! `MPA_AUTH=moviepilot` end to end: `mpagent serve` as a real process signs users in at the fake
//! MoviePilot's real login endpoint over real HTTP, adopts MoviePilot's user id and superuser
//! flag, and makes each user's gateway calls with that user's own token — checked by the fake,
//! which accepts nothing but valid JWT bearers. Expired tokens are re-minted with
//! `MOVIEPILOT_SECRET_KEY` and answered "sign in again" without it; no token reaches a log, a
//! chat snapshot or evidence.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's panic is its failure report"
)]

use common::demo_world as world;
use mpa_eval::{Attempt, FakeConfig, FakeHandle, FakeMoviePilot};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::process::Child;

use crate::common;

const SECRET: &str = "fake-moviepilot-secret-for-tests";
const WAIT: Duration = Duration::from_secs(60);

async fn fake(token_ttl: Duration) -> FakeHandle {
    let mut cfg = FakeConfig::new(SECRET);
    cfg.token_ttl = token_ttl;
    FakeMoviePilot::start(cfg, world()).await.unwrap()
}

struct Serve {
    child: Child,
    base: String,
    stderr: Arc<Mutex<String>>,
    http: reqwest::Client,
}

/// `mpagent serve` with `MPA_AUTH=moviepilot` against `fake` (debug logs, so a token in any log
/// line would show).
async fn serve(data: &Path, mock: &MockModelServer, fake: &FakeHandle, secret: bool) -> Serve {
    let mut cmd = common::mpagent(data, mock);
    cmd.env("MPA_LISTEN", "127.0.0.1:0")
        .env("MPA_LOG", "debug")
        .env("MOVIEPILOT_URL", fake.url())
        .env("MPA_AUTH", "moviepilot");
    if secret {
        cmd.env("MOVIEPILOT_SECRET_KEY", SECRET);
    }
    let srv = common::serve(cmd).await;
    Serve {
        child: srv.child,
        base: format!("http://{}", srv.addr),
        stderr: srv.stderr,
        http: reqwest::Client::builder().no_proxy().build().unwrap(),
    }
}

impl Serve {
    async fn login(&self, name: &str, password: &str) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}/api/v1/login", self.base))
            .json(&json!({"username": name, "password": password}))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap())
    }

    async fn token(&self, name: &str, password: &str) -> String {
        let (status, v) = self.login(name, password).await;
        assert_eq!(status, 200, "{v}");
        v["token"].as_str().unwrap().to_string()
    }

    async fn me(&self, token: &str) -> Value {
        let r = self
            .http
            .get(format!("{}/api/v1/me", self.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json().await.unwrap()
    }

    /// One chat turn over the SSE API; returns its frames.
    async fn chat(&self, token: &str, text: &str) -> Vec<Value> {
        let r = self
            .http
            .post(format!("{}/api/v1/agent/stream", self.base))
            .bearer_auth(token)
            .json(&json!({"text": text}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let body = tokio::time::timeout(WAIT, r.text())
            .await
            .expect("the turn never ended")
            .unwrap();
        body.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

/// The tool results the model was shown, by tool call id, from the model requests received.
fn tool_results(mock: &MockModelServer) -> std::collections::HashMap<String, Value> {
    let mut out = std::collections::HashMap::new();
    for req in mock.requests() {
        for m in req["messages"].as_array().into_iter().flatten() {
            if m["role"] == "tool" {
                let content = m["content"].as_str().unwrap_or_default();
                out.insert(
                    m["tool_call_id"].as_str().unwrap().to_string(),
                    serde_json::from_str(content).unwrap_or(Value::String(content.into())),
                );
            }
        }
    }
    out
}

fn api_call(id: &str, args: Value) -> (String, String, Value) {
    (id.to_string(), "moviepilot_api".to_string(), args)
}

fn push_calls(mock: &MockModelServer, calls: &[(String, String, Value)], answer: &str) {
    let borrowed: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.clone()))
        .collect();
    mock.push(MockReply::tool_calls(&borrowed));
    mock.push(MockReply::text(answer));
}

fn rest_calls(fake: &FakeHandle) -> Vec<Attempt> {
    fake.ledger()
        .into_iter()
        .filter(|a| a.operation_id.is_some())
        .collect()
}

fn logins(fake: &FakeHandle) -> usize {
    fake.ledger()
        .iter()
        .filter(|a| a.path == mpa_eval::LOGIN_PATH)
        .count()
}

/// The MoviePilot token the host stored for `name`.
fn stored_token(data: &Path, name: &str) -> String {
    let c = rusqlite::Connection::open(data.join("agent.db")).unwrap();
    c.query_row(
        "SELECT moviepilot_token FROM users WHERE name = ?1",
        [name],
        |r| r.get(0),
    )
    .unwrap()
}

/// No `secret` anywhere under the data directory — files, and every text cell of every table of
/// the main database (chat snapshots, the write ledger, …) — except the one column where the
/// host keeps the MoviePilot token.
fn assert_nowhere_but_the_token_column(data: &Path, secret: &str) {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(data, &mut files);
    let needle = secret.as_bytes();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy();
        // The main database's own pages hold the token column; its cells are checked below.
        if name.starts_with("agent.db") {
            continue;
        }
        let bytes = std::fs::read(f).unwrap();
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "a MoviePilot token is in {}",
            f.display()
        );
    }
    let c = rusqlite::Connection::open(data.join("agent.db")).unwrap();
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut cells = 0;
    for t in tables {
        let cols: Vec<String> = c
            .prepare(&format!("SELECT name FROM pragma_table_info('{t}')"))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for col in cols {
            if t == "users" && col == "moviepilot_token" {
                continue;
            }
            let hits: i64 = c
                .query_row(
                    &format!(
                        "SELECT count(*) FROM \"{t}\" WHERE instr(CAST(\"{col}\" AS TEXT), ?1) > 0"
                    ),
                    [secret],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(hits, 0, "a MoviePilot token is in {t}.{col}");
            cells += 1;
        }
    }
    assert!(
        cells > 10,
        "the main database was scanned ({cells} columns)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sign_in_with_moviepilot_acts_as_each_user_with_their_own_token() {
    let fake = fake(Duration::from_secs(24 * 3600)).await;
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // No secret key: the host cannot mint, so every call that works used a login's own token.
    let srv = serve(&data, &mock, &fake, false).await;

    // MoviePilot's identity is adopted: its user id and its superuser flag.
    let (status, alice) = srv.login("alice", "alice-demo").await;
    assert_eq!(status, 200, "{alice}");
    assert_eq!(alice["user"]["name"], "alice");
    assert_eq!(alice["user"]["is_admin"], false);
    let alice_token = alice["token"].as_str().unwrap().to_string();
    let admin_token = srv.token("admin", "admin-demo").await;
    assert_eq!(srv.me(&admin_token).await["is_admin"], true);
    // Signing in again is the same account (MoviePilot's id, not a new one).
    let again = srv.token("alice", "alice-demo").await;
    assert_eq!(srv.me(&again).await["id"], srv.me(&alice_token).await["id"]);
    assert_eq!(logins(&fake), 3, "each login was checked by MoviePilot");

    // A wrong password and an unknown user: the same answer, byte for byte.
    let wrong = srv.login("alice", "not-her-password").await;
    let unknown = srv.login("nobody", "whatever-password").await;
    assert_eq!(wrong.0, 401);
    assert_eq!(wrong, unknown);
    assert_eq!(wrong.1["error"]["code"], "invalid_credentials");

    // Alice's call carries her own token (the fake names her); her admin operation is refused
    // by the host before any request.
    push_calls(
        &mock,
        &[
            api_call(
                "c_search",
                json!({"operation_id": "media.search", "query": {"title": "三体"}}),
            ),
            api_call(
                "c_add",
                json!({"operation_id": "subscription.add",
                       "body": {"name": "三体", "media_source": "themoviedb", "media_id": "204541"}}),
            ),
        ],
        "找到了《三体》；订阅需要管理员。",
    );
    let before = rest_calls(&fake).len();
    let frames = srv.chat(&alice_token, "搜索三体并订阅").await;
    assert_eq!(frames.last().unwrap()["status"], "completed", "{frames:?}");
    let calls = rest_calls(&fake);
    let new: Vec<&Attempt> = calls[before..].iter().collect();
    assert_eq!(new.len(), 1, "only the search reached MoviePilot: {new:?}");
    assert_eq!(new[0].operation_id.as_deref(), Some("media.search"));
    assert_eq!(new[0].status, Some(200));
    let user = new[0]
        .user
        .as_ref()
        .expect("the fake authenticated the call");
    assert_eq!(
        (user.id, user.name.as_str(), user.super_user),
        (2, "alice", false)
    );
    let results = tool_results(&mock);
    assert_eq!(results["c_search"]["success"], true);
    assert_eq!(
        results["c_add"],
        json!({"success": false, "error": "permission_denied",
               "message": "the MoviePilot operation subscription.add (role system_admin) is available to \
administrators only; moviepilot_api itself stays available for the operations your role allows — ask an \
administrator for this one"})
    );
    assert!(
        fake.snapshot().subscriptions.len() == fake.initial_snapshot().subscriptions.len(),
        "nothing was subscribed"
    );

    // The superuser's call is made as the superuser.
    push_calls(
        &mock,
        &[api_call(
            "c_jobs",
            json!({"operation_id": "scheduler.list"}),
        )],
        "这些是定时任务。",
    );
    srv.chat(&admin_token, "列出定时任务").await;
    let last = rest_calls(&fake).pop().unwrap();
    assert_eq!(last.operation_id.as_deref(), Some("scheduler.list"));
    let user = last.user.unwrap();
    assert_eq!(
        (user.id, user.name.as_str(), user.super_user),
        (1, "admin", true)
    );
    assert_eq!(tool_results(&mock)["c_jobs"]["success"], true);

    // Tokens: kept for the user only, in the 0600 database; in no log, snapshot or evidence.
    let tokens = [stored_token(&data, "alice"), stored_token(&data, "admin")];
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(data.join("agent.db"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let log = srv.log();
    assert!(
        log.contains("login") && log.contains("moviepilot api call"),
        "the debug log was captured: {log}"
    );
    for t in &tokens {
        assert!(t.len() > 40);
        assert!(!log.contains(t.as_str()), "a MoviePilot token was logged");
        assert_nowhere_but_the_token_column(&data, t);
        for req in mock.requests() {
            assert!(
                !req.to_string().contains(t.as_str()),
                "the model saw a token"
            );
        }
    }
    drop(srv.child);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_login_limiter_stands_in_front_of_moviepilot() {
    let fake = fake(Duration::from_secs(3600)).await;
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let srv = serve(&dir.path().join("data"), &mock, &fake, false).await;
    for _ in 0..5 {
        assert_eq!(srv.login("alice", "guess-guess").await.0, 401);
    }
    assert_eq!(logins(&fake), 5);
    // Over the limit: refused here, MoviePilot never asked — not even with the right password.
    let (status, v) = srv.login("alice", "alice-demo").await;
    assert_eq!(status, 429, "{v}");
    assert_eq!(v["error"]["code"], "too_many_login_attempts");
    assert_eq!(logins(&fake), 5);
    drop(srv.child);
}

/// A MoviePilot token that has expired: minted anew for the same recorded user with the secret
/// key (the fake would refuse the old one), "sign in again" without it — and nothing sent.
#[tokio::test(flavor = "multi_thread")]
async fn an_expired_moviepilot_token_is_reminted_with_the_secret_key_or_asks_to_sign_in_again() {
    let fake = fake(Duration::from_secs(2)).await;
    for secret in [true, false] {
        let mock = MockModelServer::start().await;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let srv = serve(&data, &mock, &fake, secret).await;
        let token = srv.token("alice", "alice-demo").await;
        let mp_token = stored_token(&data, "alice");
        // Past its `exp` on the fake's clock: MoviePilot (and the fake) refuse it now. The host
        // already treats it as expired (it keeps a minute's margin on its own clock).
        fake.advance_clock(Duration::from_secs(3));
        push_calls(
            &mock,
            &[api_call("c1", json!({"operation_id": "subscription.list"}))],
            "done",
        );
        let before = rest_calls(&fake).len();
        srv.chat(&token, "我的订阅").await;
        let result = &tool_results(&mock)["c1"];
        let calls = rest_calls(&fake);
        if secret {
            assert_eq!(result["success"], true, "{result}");
            let [call] = &calls[before..] else {
                panic!("one call: {:?}", &calls[before..])
            };
            assert_eq!(call.status, Some(200));
            let user = call.user.as_ref().unwrap();
            assert_eq!(
                (user.id, user.super_user),
                (2, false),
                "same user, no rights added"
            );
        } else {
            assert_eq!(
                *result,
                json!({"success": false, "error": "moviepilot_sign_in_again", "operation_id": "subscription.list",
                       "message": "the MoviePilot sign-in of this account has expired; sign in again / MoviePilot 登录已过期，请重新登录; nothing was sent"})
            );
            assert_eq!(calls.len(), before, "nothing was sent");
        }
        assert!(!srv.log().contains(&mp_token));
        assert_nowhere_but_the_token_column(&data, &mp_token);
        drop(srv.child);
    }
}

/// `/healthz` says what the host knows of MoviePilot: its routes read and how many operations
/// it offers, or — for a server without an OpenAPI — the catalogue alone and why, which the log
/// says once.
#[tokio::test(flavor = "multi_thread")]
async fn healthz_says_what_is_known_of_moviepilot() {
    let mock = MockModelServer::start().await;
    for serving in [
        mpa_eval::OpenApiServing::Catalogue,
        mpa_eval::OpenApiServing::NotServed,
    ] {
        let mut cfg = FakeConfig::new(SECRET);
        cfg.openapi = serving.clone();
        let fake = FakeMoviePilot::start(cfg, world()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let srv = serve(&dir.path().join("data"), &mock, &fake, true).await;
        let v: Value = srv
            .http
            .get(format!("{}/healthz", srv.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["status"], "ok");
        let mp = &v["moviepilot"];
        match serving {
            mpa_eval::OpenApiServing::Catalogue => {
                assert_eq!(mp["routes"], "reconciled", "{v}");
                assert_eq!(mp["operations"]["available"], 229, "{v}");
                assert_eq!(mp["version"], "catalogue", "{v}");
            }
            _ => {
                assert_eq!(mp["routes"], "catalogue_only", "{v}");
                assert!(
                    mp["note"]
                        .as_str()
                        .unwrap()
                        .starts_with("MoviePilot serves no usable OpenAPI (GET /api/v1/openapi.json answered HTTP 404)"),
                    "{v}"
                );
                let said = srv
                    .log()
                    .matches("using the operation catalogue alone")
                    .count();
                assert_eq!(said, 1, "{}", srv.log());
            }
        }
        drop(srv.child);
    }
}
