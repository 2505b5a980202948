#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]
//! `browse_webpage` through the one call path on a real Chromium and real HTTP on 127.0.0.1:
//! the acceptance path (goto → snapshot → click_ref → get_content), a selector screenshot as an
//! image block, private networks refused without `allow_private_network` (literals, names that
//! resolve to them, a public URL redirecting to them), the admin-only actions, what a subagent
//! may do, a missing browser, and the conversation's close ending the browser process.

use async_trait::async_trait;
use mpa_core::capability::{Capability, SessionInfo};
use mpa_core::net_guard::{NetGuard, Resolve};
use mpa_core::tools::browse_webpage::{BrowserCapability, PublicOnly};
use mpa_core::tools::gate::Gates;
use mpa_core::tools::invoke::{Invoker, invoke};
use mpa_core::tools::policy::Origin;
use mpa_core::tools::recognize_captcha::OcrService;
use mpa_core::tools::registry::Tools;
use mpa_core::tools::{ToolContext, ToolOutput};
use mpa_core::{Capabilities, RegistryOptions, default_registry};
use mpa_protocol::{Actor, Outcome, ToolCall, UserId};
use serde_json::{Value, json};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The address the test's "public" site is served from: a loopback address the guard is told
/// to trust as public (`NetGuard::trusting`), so 127.0.0.1 itself stays private.
const PUBLIC_IP: [u8; 4] = [127, 0, 0, 2];

/// Names the test's DNS knows: `public.test` is public, `lan.test` is on the LAN.
struct Table;

#[async_trait]
impl Resolve for Table {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        let ip: IpAddr = match host {
            "public.test" => IpAddr::from(PUBLIC_IP),
            "lan.test" => "10.1.2.3".parse().unwrap(),
            "meta.test" => "169.254.169.254".parse().unwrap(),
            _ => return Err(std::io::Error::new(std::io::ErrorKind::NotFound, "unknown")),
        };
        Ok(vec![SocketAddr::new(ip, port)])
    }
}

const PAGE: &str = r#"<!doctype html><title>Fixture</title><style>body{margin:0}
#captcha{width:120px;height:40px;background:#36c}</style>
<button id="show" onclick="document.getElementById('status').textContent='BROWSER_OK'">显示结果</button>
<p id="status">PENDING</p><div id="captcha">X7Q2</div>"#;

/// `/fixture`, `/redirect?to=…` (302) and `/secret` (counted: a refused request never gets here),
/// on 127.0.0.1 (private) and on the same port of the public site's address.
async fn page_server() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let public = tokio::net::TcpListener::bind(SocketAddr::from((PUBLIC_IP, port)))
        .await
        .unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    for listener in [listener, public] {
        serve_pages(listener, hits.clone());
    }
    (port, hits)
}

fn serve_pages(listener: tokio::net::TcpListener, hits: Arc<AtomicUsize>) {
    let counted = hits;
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut got = 0;
                while !buf[..got].windows(4).any(|w| w == b"\r\n\r\n") && got < buf.len() {
                    match sock.read(&mut buf[got..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got += n,
                    }
                }
                let head = String::from_utf8_lossy(&buf[..got]).to_string();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let u = url::Url::parse(&format!("http://x{path}")).unwrap();
                let (status, extra, body) = match u.path() {
                    "/fixture" => (
                        "200 OK",
                        "Content-Type: text/html; charset=utf-8\r\n".to_string(),
                        PAGE,
                    ),
                    "/redirect" => {
                        let to = u
                            .query_pairs()
                            .find(|(k, _)| k == "to")
                            .map(|(_, v)| v.to_string())
                            .unwrap_or_default();
                        ("302 Found", format!("Location: {to}\r\n"), "")
                    }
                    "/secret" => {
                        counted.fetch_add(1, Ordering::SeqCst);
                        ("200 OK", String::new(), "SECRET")
                    }
                    _ => ("404 Not Found", String::new(), ""),
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
}

fn chromium() -> bool {
    mpa_test_support::external_program(
        "Chromium",
        std::path::Path::new("/usr/bin/chromium").exists(),
    )
}

struct Env {
    _dir: tempfile::TempDir,
    browsers: mpa_browser::Browsers,
    registry: Tools,
}

fn env_with(executable: Option<std::path::PathBuf>) -> Env {
    env_ocr(executable, None)
}

fn env_ocr(executable: Option<std::path::PathBuf>, ocr: Option<String>) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let browsers = mpa_browser::Browsers::new(
        mpa_browser::BrowserConfig {
            executable,
            profiles_root: dir.path().join("profiles"),
            idle_ttl: Duration::from_secs(600),
            extra_args: Vec::new(),
        },
        Arc::new(PublicOnly {
            guard: NetGuard::new(Arc::new(Table)).trusting(IpAddr::from(PUBLIC_IP)),
        }),
    );
    let caps = Capabilities::default().with(BrowserCapability {
        browsers: browsers.clone(),
        ocr: ocr.map(OcrService::new),
    });
    let registry = default_registry(&RegistryOptions::default(), caps)
        .unwrap()
        .into();
    Env {
        _dir: dir,
        browsers,
        registry,
    }
}

fn actor(id: &str, is_admin: bool) -> Actor {
    Actor {
        user_id: UserId(id.into()),
        user_name: id.into(),
        is_admin,
    }
}

async fn call_full(
    env: &Env,
    actor: &Actor,
    origin: Origin,
    tool: &str,
    args: Value,
) -> ToolOutput {
    let gates = Gates::standard();
    let inv = Invoker {
        tools: &env.registry,
        gates: &gates,
        timeout: Some(Duration::from_secs(120)),
        ledger: None,
        max_result_chars: mpa_core::result_cap::DEFAULT_TOOL_RESULT_MAX_CHARS,
    };
    let call = ToolCall {
        id: "call_1".into(),
        name: tool.into(),
        arguments: args.to_string(),
    };
    let mut ctx = ToolContext::detached(actor.clone(), "chat-1", "call_1");
    ctx.request_id = "request_1".into();
    invoke(inv, ctx, origin, &call, 1).await.output
}

async fn browse(env: &Env, args: Value) -> (Value, Outcome) {
    let out = call_full(
        env,
        &actor("root", true),
        Origin::Turn,
        "browse_webpage",
        args,
    )
    .await;
    (serde_json::from_str(&out.content).unwrap(), out.outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goto_snapshot_click_ref_get_content_returns_the_changed_text() {
    if !chromium() {
        return;
    }
    let (port, _) = page_server().await;
    let env = env_with(None);
    let url = format!("http://127.0.0.1:{port}/fixture");
    let (r, o) = browse(
        &env,
        json!({"action": "goto", "url": url, "allow_private_network": true}),
    )
    .await;
    assert_eq!(
        (r["success"].clone(), o),
        (json!(true), Outcome::Succeeded),
        "{r}"
    );
    assert_eq!(r["title"], "Fixture");
    let (snap, _) = browse(&env, json!({"action": "snapshot"})).await;
    let button = snap["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "显示结果")
        .unwrap()
        .clone();
    assert_eq!(button["tag"], "button");
    let (clicked, _) = browse(&env, json!({"action": "click_ref", "ref": button["ref"]})).await;
    assert_eq!(clicked["success"], true, "{clicked}");
    let (content, _) = browse(
        &env,
        json!({"action": "get_content", "content_type": "text"}),
    )
    .await;
    let text = content["content"].as_str().unwrap();
    assert!(
        text.contains("BROWSER_OK") && !text.contains("PENDING"),
        "{content}"
    );

    // A screenshot of one element: metadata for the model's text, the JPEG as an image block.
    let out = call_full(
        &env,
        &actor("root", true),
        Origin::Turn,
        "browse_webpage",
        json!({"action": "screenshot", "selector": "#captcha"}),
    )
    .await;
    let meta: Value = serde_json::from_str(&out.content).unwrap();
    assert_eq!(
        (
            meta["width"].clone(),
            meta["height"].clone(),
            meta["mime_type"].clone()
        ),
        (json!(120), json!(40), json!("image/jpeg"))
    );
    assert!(
        !out.content.contains("/9j/"),
        "image bytes leaked into the text"
    );
    assert_eq!(out.images().len(), 1);
    assert_eq!(
        mpa_browser::jpeg_size(&out.images()[0].data),
        Some((120, 40))
    );
    assert!(out.images()[0].data.len() <= mpa_browser::SCREENSHOT_MAX_BYTES);
    env.browsers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goto_without_allow_private_network_refuses_private_targets() {
    if !chromium() {
        return;
    }
    let (port, secret_hits) = page_server().await;
    let env = env_with(None);
    let secret = format!("http://127.0.0.1:{port}/secret");
    let redirect = format!(
        "http://public.test:{port}/redirect?to={}",
        url::form_urlencoded::byte_serialize(secret.as_bytes()).collect::<String>()
    );
    for url in [
        secret.clone(),
        "http://10.0.0.1/".into(),
        "http://169.254.169.254/latest/meta-data/".into(),
        "http://[::1]/".into(),
        format!("http://lan.test:{port}/secret"),
        "http://meta.test/".into(),
        redirect.clone(),
    ] {
        let (r, o) = browse(&env, json!({"action": "goto", "url": url})).await;
        assert_eq!(
            (r["error"].clone(), o),
            (json!("unsafe_url"), Outcome::Failed),
            "{url}: {r}"
        );
        assert!(
            r["message"]
                .as_str()
                .unwrap()
                .contains("allow_private_network"),
            "{r}"
        );
    }
    assert_eq!(
        secret_hits.load(Ordering::SeqCst),
        0,
        "a refused request reached the server"
    );
    // The public page itself is fine, and the same redirect is followed when allowed.
    let (r, _) = browse(
        &env,
        json!({"action": "goto", "url": format!("http://public.test:{port}/fixture")}),
    )
    .await;
    assert_eq!(r["success"], true, "{r}");
    let (r, _) = browse(
        &env,
        json!({"action": "goto", "url": redirect, "allow_private_network": true}),
    )
    .await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(secret_hits.load(Ordering::SeqCst), 1);
    env.browsers.shutdown().await;
}

/// A public page's WebSocket and fetch aimed at 127.0.0.1 go through the profile's egress
/// proxy, whose check is the host's `NetGuard`: the loopback server sees no request (before the
/// proxy, WebSockets were not intercepted at all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_pages_websocket_and_fetch_to_loopback_reach_nothing() {
    if !chromium() {
        return;
    }
    let (port, secret_hits) = page_server().await;
    let env = env_with(None);
    let (r, _) = browse(
        &env,
        json!({"action": "goto", "url": format!("http://public.test:{port}/fixture")}),
    )
    .await;
    assert_eq!(r["success"], true, "{r}");
    let script = format!(
        r#"Promise.all([
  fetch('http://127.0.0.1:{port}/secret', {{mode: 'no-cors'}}).then(() => 'fetch:answered', () => 'fetch:error'),
  new Promise(r => {{ const w = new WebSocket('ws://127.0.0.1:{port}/secret'); w.onopen = () => r('ws:open'); w.onerror = () => r('ws:error'); }}),
]).then(a => a.join(','))"#
    );
    let (r, _) = browse(&env, json!({"action": "evaluate", "expression": script})).await;
    assert_eq!(r["success"], true, "{r}");
    assert!(r.to_string().contains("fetch:error,ws:error"), "{r}");
    assert_eq!(
        secret_hits.load(Ordering::SeqCst),
        0,
        "a public page reached the loopback server"
    );
    env.browsers.shutdown().await;
}

/// What the browser's egress proxy is told for each connection: exactly the checked addresses,
/// or the refusal (private names and literals, IPv6 included; unknown names).
#[tokio::test]
async fn each_browser_connection_gets_the_checked_addresses_or_a_refusal() {
    use mpa_browser::RequestGuard;
    let guard = PublicOnly {
        guard: NetGuard::new(Arc::new(Table)).trusting(IpAddr::from(PUBLIC_IP)),
    };
    assert_eq!(
        guard.addresses("public.test", 443, false).await.unwrap(),
        vec![SocketAddr::from((PUBLIC_IP, 443))]
    );
    for host in [
        "lan.test",
        "meta.test",
        "127.0.0.1",
        "::1",
        "::ffff:10.0.0.1",
    ] {
        let why = guard.addresses(host, 80, false).await.unwrap_err();
        assert!(why.contains("public addresses"), "{host}: {why}");
    }
    let why = guard.addresses("nowhere.test", 80, true).await.unwrap_err();
    assert!(why.contains("could not be resolved"), "{why}");
    // Allowed by the action: the private address itself, still resolved once by the host.
    assert_eq!(
        guard.addresses("lan.test", 8080, true).await.unwrap(),
        vec![SocketAddr::from(([10, 1, 2, 3], 8080))]
    );
}

#[tokio::test]
async fn evaluate_and_get_cookies_are_admin_only_and_subagents_only_observe() {
    let env = env_with(Some("/nonexistent/chromium".into()));
    for action in ["evaluate", "get_cookies"] {
        let out = call_full(
            &env,
            &actor("ann", false),
            Origin::Turn,
            "browse_webpage",
            json!({"action": action, "expression": "1"}),
        )
        .await;
        let v: Value = serde_json::from_str(&out.content).unwrap();
        assert_eq!(v["error"], "permission_denied", "{action}: {v}");
    }
    for action in ["goto", "click_ref", "fill", "evaluate", "close_session"] {
        let out = call_full(
            &env,
            &actor("root", true),
            Origin::Subagent,
            "browse_webpage",
            json!({"action": action, "url": "https://public.test/"}),
        )
        .await;
        let v: Value = serde_json::from_str(&out.content).unwrap();
        assert_eq!(v["error"], "subagent_read_only", "{action}: {v}");
    }
    // An argument the tool does not have (cookies, user agent) is refused, never ignored.
    let out = call_full(
        &env,
        &actor("root", true),
        Origin::Turn,
        "browse_webpage",
        json!({"action": "goto", "url": "https://public.test/", "user_agent": "x"}),
    )
    .await;
    let v: Value = serde_json::from_str(&out.content).unwrap();
    assert_eq!(v["success"], false, "{v}");
}

#[tokio::test]
async fn a_missing_browser_answers_browser_unavailable_and_the_rest_works() {
    let env = env_with(Some("/nonexistent/chromium".into()));
    let (r, o) = browse(
        &env,
        json!({"action": "goto", "url": "https://public.test/"}),
    )
    .await;
    assert_eq!(
        (r["error"].clone(), o),
        (json!("browser_unavailable"), Outcome::Failed),
        "{r}"
    );
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/chromium"),
        "{r}"
    );
    // Other tools are unaffected.
    let out = call_full(
        &env,
        &actor("root", true),
        Origin::Turn,
        "update_plan",
        json!({"objective": "Look around", "steps": [{"step": "look", "status": "in_progress"}]}),
    )
    .await;
    assert_eq!(out.outcome, Outcome::Succeeded, "{}", out.content);
}

#[tokio::test]
async fn bad_timeouts_and_foreign_session_keys_change_nothing() {
    let env = env_with(Some("/nonexistent/chromium".into()));
    let (r, _) = browse(&env, json!({"action": "wait", "timeout": 0})).await;
    assert_eq!(r["error"], "invalid_input", "{r}");
    let (r, _) = browse(&env, json!({"action": "wait", "timeout": 301})).await;
    assert_eq!(r["error"], "invalid_input", "{r}");
    let (r, _) = browse(
        &env,
        json!({"action": "snapshot", "session_key": "someone-elses"}),
    )
    .await;
    assert_eq!(r["error"], "invalid_session_key", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_conversation_ends_its_browser() {
    if !chromium() {
        return;
    }
    let env = env_with(None);
    let (r, _) = browse(&env, json!({"action": "list_tabs"})).await;
    assert_eq!(r["tabs"].as_array().unwrap().len(), 1, "{r}");
    let key = mpa_browser::SessionKey {
        user_key: mpa_core::UserKey::for_user("root").as_str().to_string(),
        session_id: "chat-1".into(),
    };
    let pid = env.browsers.existing(&key).await.unwrap().pid().unwrap();
    let cap = BrowserCapability {
        browsers: env.browsers.clone(),
        ocr: None,
    };
    let state = mpa_core::tools::SessionState::default();
    cap.close_session(
        SessionInfo {
            session_id: "chat-1",
            owner: &UserId("root".into()),
        },
        &state,
    )
    .await;
    assert!(env.browsers.existing(&key).await.is_none());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the browser process outlived the conversation"
    );
}

#[test]
fn browse_webpage_spec_snapshot() {
    let env = env_with(Some("/nonexistent/chromium".into()));
    let tool = env.registry.get("browse_webpage").unwrap();
    insta::assert_json_snapshot!("browse_webpage_spec", tool.spec);
}

/// A fake OCR service (MoviePilot's protocol) that reads every image as `X7Q2` and records the
/// images it was sent.
async fn ocr_server() -> (String, Arc<std::sync::Mutex<Vec<Vec<u8>>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let keep = keep.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len: usize = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if body.len() < len {
                            continue;
                        }
                        assert!(head.starts_with("POST /captcha/base64 "), "{head}");
                        let v: Value = serde_json::from_str(body).unwrap();
                        use base64::Engine as _;
                        let img = base64::engine::general_purpose::STANDARD
                            .decode(v["base64_img"].as_str().unwrap())
                            .unwrap();
                        keep.lock().unwrap().push(img);
                        let reply = r#"{"result": "X7Q2"}"#;
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                            reply.len()
                        );
                        let _ = sock.write_all(resp.as_bytes()).await;
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recognize_captcha_reads_the_shown_element_and_stops_after_three_attempts() {
    if !chromium() {
        return;
    }
    let (port, _) = page_server().await;
    let (ocr, seen) = ocr_server().await;
    let env = env_ocr(None, Some(ocr));
    let (r, _) = browse(&env, json!({"action": "goto", "url": format!("http://127.0.0.1:{port}/fixture"), "allow_private_network": true})).await;
    assert_eq!(r["success"], true, "{r}");
    let admin = actor("root", true);
    // One turn: the attempts are counted in the turn's slots.
    let turn = Arc::new(mpa_core::Slots::default());
    let mut answers = Vec::new();
    for _ in 0..4 {
        let gates = Gates::standard();
        let inv = Invoker {
            tools: &env.registry,
            gates: &gates,
            timeout: Some(Duration::from_secs(120)),
            ledger: None,
            max_result_chars: mpa_core::result_cap::DEFAULT_TOOL_RESULT_MAX_CHARS,
        };
        let call = ToolCall {
            id: "c".into(),
            name: "recognize_captcha".into(),
            arguments: json!({"selector": "#captcha"}).to_string(),
        };
        let mut ctx = ToolContext::detached(admin.clone(), "chat-1", "c");
        ctx.turn = turn.clone();
        let out = invoke(inv, ctx, Origin::Turn, &call, 1).await.output;
        answers.push(serde_json::from_str::<Value>(&out.content).unwrap());
    }
    assert_eq!(answers[0]["text"], "X7Q2", "{}", answers[0]);
    assert_eq!(answers[2]["attempts_left"], 0, "{}", answers[2]);
    assert_eq!(
        answers[3]["error"], "captcha_attempts_exhausted",
        "{}",
        answers[3]
    );
    let images = seen.lock().unwrap().clone();
    assert_eq!(
        images.len(),
        3,
        "the fourth attempt must not reach the service"
    );
    assert_eq!(
        mpa_browser::jpeg_size(&images[0]),
        Some((120, 40)),
        "the captcha element itself"
    );
    env.browsers.shutdown().await;
}

#[tokio::test]
async fn recognize_captcha_without_ocr_says_never_guess() {
    let env = env_with(Some("/nonexistent/chromium".into()));
    let out = call_full(
        &env,
        &actor("root", true),
        Origin::Turn,
        "recognize_captcha",
        json!({"selector": "#captcha"}),
    )
    .await;
    let v: Value = serde_json::from_str(&out.content).unwrap();
    assert_eq!(v["error"], "ocr_unconfigured", "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("Do not guess"),
        "{v}"
    );
}
