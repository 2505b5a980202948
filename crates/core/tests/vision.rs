//! The agent's eyes (issue 31): `view_image` refuses every route into the host's own network
//! (private addresses, names resolving to them, redirects to them, DNS rebinding), tool images
//! reach a model that can see as one observation message after the tool-reply batch and a model
//! that cannot as a "not received" note, a provider's refusal of image input retries once in
//! text mode, and no snapshot or evidence keeps image bytes. `read_file` stays inside the
//! caller's roots and pages a 2 GB file; `search_web` asks a SearXNG on loopback.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::TestHost;
use async_trait::async_trait;
use mpa_core::Capabilities;
use mpa_core::capability::Recall;
use mpa_core::eyes::Eyes;
use mpa_core::file_boundary::FileBoundary;
use mpa_core::net_guard::{NetGuard, Resolve};
use mpa_core::tools::search_web::SearchConfig;
use mpa_core::tools::{Tool, ToolContext, ToolOutput, read_file, search_web, typed, view_image};
use mpa_protocol::{Actor, Event, UserId};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A 1×1 PNG.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

fn png() -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(PNG_B64)
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// A tiny HTTP site on a loopback address, counting what reaches it.

#[derive(Clone)]
struct Page {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Page {
    fn ok(content_type: &str, body: Vec<u8>) -> Self {
        Page {
            status: 200,
            headers: vec![("Content-Type".into(), content_type.into())],
            body,
        }
    }

    fn redirect(to: &str) -> Self {
        Page {
            status: 302,
            headers: vec![("Location".into(), to.into())],
            body: Vec::new(),
        }
    }
}

struct Site {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    paths: Arc<Mutex<Vec<String>>>,
}

impl Site {
    async fn start(ip: &str, pages: Vec<(&str, Page)>) -> Site {
        Self::start_at(ip, 0, pages).await.unwrap()
    }

    async fn start_at(ip: &str, port: u16, pages: Vec<(&str, Page)>) -> Option<Site> {
        let listener = tokio::net::TcpListener::bind((ip, port)).await.ok()?;
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let pages: HashMap<String, Page> = pages
            .into_iter()
            .map(|(p, page)| (p.to_string(), page))
            .collect();
        let (h, seen) = (Arc::clone(&hits), Arc::clone(&paths));
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                h.fetch_add(1, Ordering::SeqCst);
                let pages = pages.clone();
                let seen = Arc::clone(&seen);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).to_string();
                    let target = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                    seen.lock().unwrap().push(target.clone());
                    let path = target.split('?').next().unwrap_or("/");
                    let page = pages.get(path).cloned().unwrap_or(Page {
                        status: 404,
                        headers: vec![],
                        body: b"not found".to_vec(),
                    });
                    let mut out = format!("HTTP/1.1 {} X\r\n", page.status);
                    for (k, v) in &page.headers {
                        out.push_str(&format!("{k}: {v}\r\n"));
                    }
                    out.push_str(&format!(
                        "Content-Length: {}\r\nConnection: close\r\n\r\n",
                        page.body.len()
                    ));
                    let _ = sock.write_all(out.as_bytes()).await;
                    let _ = sock.write_all(&page.body).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Some(Site { addr, hits, paths })
    }

    fn url(&self, path: &str) -> String {
        match self.addr.ip() {
            IpAddr::V6(ip) => format!("http://[{ip}]:{}{path}", self.addr.port()),
            IpAddr::V4(ip) => format!("http://{ip}:{}{path}", self.addr.port()),
        }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A resolver from a table: each name answers its queued answers in turn, the last one forever.
#[derive(Default)]
struct Table {
    names: Mutex<HashMap<String, VecDeque<Vec<IpAddr>>>>,
    calls: AtomicUsize,
}

impl Table {
    fn with(self, name: &str, answers: &[&[&str]]) -> Self {
        let list = answers
            .iter()
            .map(|a| a.iter().map(|ip| ip.parse().unwrap()).collect())
            .collect();
        self.names.lock().unwrap().insert(name.into(), list);
        self
    }
}

#[async_trait]
impl Resolve for Table {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut names = self.names.lock().unwrap();
        let answers = names
            .get_mut(host)
            .ok_or_else(|| std::io::Error::other("unknown name"))?;
        let ips = if answers.len() > 1 {
            answers.pop_front().unwrap()
        } else {
            answers[0].clone()
        };
        Ok(ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }
}

fn actor(admin: bool) -> Actor {
    Actor {
        user_id: UserId("u-vision".into()),
        user_name: "mei".into(),
        is_admin: admin,
    }
}

async fn call(tool: &Arc<dyn Tool>, actor: Actor, args: Value) -> ToolOutput {
    let prepared = match tool.prepare(args) {
        Ok(p) => p,
        Err(out) => return out,
    };
    prepared
        .run(ToolContext::detached(actor, "s-vision", "c1"))
        .await
}

fn json_of(out: &ToolOutput) -> Value {
    serde_json::from_str(&out.content).unwrap()
}

fn viewer(net: NetGuard, work: &Path, data: &Path) -> Arc<dyn Tool> {
    typed(view_image::ViewImage {
        files: FileBoundary::new(work, data),
        net,
    })
}

async fn view_url(tool: &Arc<dyn Tool>, url: &str) -> Value {
    json_of(&call(tool, actor(false), json!({"url": url})).await)
}

// ---------------------------------------------------------------------------------------------
// view_image: no route into the host's own network.

#[tokio::test]
async fn view_image_refuses_loopback_private_and_metadata_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let inside = Site::start("127.0.0.1", vec![("/a.png", Page::ok("image/png", png()))]).await;
    let inside6 = Site::start("::1", vec![("/a.png", Page::ok("image/png", png()))]).await;
    let tool = viewer(NetGuard::default(), dir.path(), dir.path());
    for url in [
        inside.url("/a.png"),
        inside6.url("/a.png"),
        "http://10.0.0.5/a.png".to_string(),
        "http://10.255.255.1:8080/a.png".to_string(),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[::ffff:127.0.0.1]:1/a.png".to_string(),
        "http://2130706433/a.png".to_string(),
    ] {
        let v = view_url(&tool, &url).await;
        assert_eq!(v["error"], "unsafe_url", "{url}: {v}");
        assert_eq!(v["success"], false);
    }
    assert_eq!(
        inside.hits() + inside6.hits(),
        0,
        "nothing reached the host's network"
    );
}

#[tokio::test]
async fn view_image_refuses_a_name_that_resolves_to_a_private_address() {
    let dir = tempfile::tempdir().unwrap();
    let inside = Site::start("127.0.0.1", vec![("/a.png", Page::ok("image/png", png()))]).await;
    let port = inside.addr.port();
    let table = Table::default()
        .with("loopback.example", &[&["127.0.0.1"]])
        .with("lan.example", &[&["10.1.2.3"]])
        .with("metadata.example", &[&["169.254.169.254"]])
        .with("v6.example", &[&["::1"]])
        // One private address among public ones refuses the name.
        .with("mixed.example", &[&["93.184.216.34", "127.0.0.1"]]);
    let tool = viewer(NetGuard::new(Arc::new(table)), dir.path(), dir.path());
    for host in [
        "loopback.example",
        "lan.example",
        "metadata.example",
        "v6.example",
        "mixed.example",
    ] {
        let v = view_url(&tool, &format!("http://{host}:{port}/a.png")).await;
        assert_eq!(v["error"], "unsafe_url", "{host}: {v}");
    }
    assert_eq!(inside.hits(), 0);
}

#[tokio::test]
async fn view_image_refuses_a_public_url_that_redirects_into_the_host_network() {
    let dir = tempfile::tempdir().unwrap();
    let inside = Site::start(
        "127.0.0.1",
        vec![("/secret.png", Page::ok("image/png", png()))],
    )
    .await;
    let public = Site::start(
        "127.0.0.2",
        vec![
            ("/to-loopback", Page::redirect(&inside.url("/secret.png"))),
            (
                "/to-metadata",
                Page::redirect("http://169.254.169.254/latest/"),
            ),
            ("/to-name", Page::redirect("http://metadata.example/x.png")),
            ("/to-v6", Page::redirect("http://[::1]/x.png")),
        ],
    )
    .await;
    let table = Table::default().with("metadata.example", &[&["169.254.169.254"]]);
    // The test's "public" server is on 127.0.0.2: the guard trusts exactly that address.
    let net = NetGuard::new(Arc::new(table)).trusting("127.0.0.2".parse().unwrap());
    let tool = viewer(net, dir.path(), dir.path());
    for path in ["/to-loopback", "/to-metadata", "/to-name", "/to-v6"] {
        let v = view_url(&tool, &public.url(path)).await;
        assert_eq!(v["error"], "unsafe_url", "{path}: {v}");
    }
    assert_eq!(public.hits(), 4, "every first hop was fetched");
    assert_eq!(inside.hits(), 0, "no redirect reached the host's network");
}

#[tokio::test]
async fn view_image_connects_to_the_checked_address_when_the_name_rebinds() {
    let dir = tempfile::tempdir().unwrap();
    // The same port on both addresses: a second lookup would connect to the loopback site.
    let (public, inside) = loop {
        let public = Site::start("127.0.0.2", vec![("/a.png", Page::ok("image/png", png()))]).await;
        let inside = Page::ok("image/png", b"inside".to_vec());
        if let Some(inside) =
            Site::start_at("127.0.0.1", public.addr.port(), vec![("/a.png", inside)]).await
        {
            break (public, inside);
        }
    };
    // First answer public, every later one loopback (a rebinding name).
    let table =
        Arc::new(Table::default().with("rebind.example", &[&["127.0.0.2"], &["127.0.0.1"]]));
    let net = NetGuard::new(Arc::clone(&table) as Arc<dyn Resolve>)
        .trusting("127.0.0.2".parse().unwrap());
    let tool = viewer(net, dir.path(), dir.path());
    let url = format!("http://rebind.example:{}/a.png", public.addr.port());
    let out = call(&tool, actor(false), json!({"url": url, "detail": "low"})).await;
    let v = json_of(&out);
    assert_eq!(v["success"], true, "{v}");
    assert_eq!(v["source_type"], "url");
    assert_eq!(
        (v["width"].clone(), v["height"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(out.images().len(), 1);
    assert_eq!(&*out.images()[0].data, &png()[..]);
    assert_eq!(
        table.calls.load(Ordering::SeqCst),
        1,
        "the name is resolved once"
    );
    assert_eq!(public.hits(), 1);
    assert_eq!(inside.hits(), 0);
}

#[tokio::test]
async fn view_image_limits_redirects_size_and_checks_the_content() {
    let dir = tempfile::tempdir().unwrap();
    let big = {
        let mut b = png();
        b.resize(800 * 1024, 0);
        b
    };
    let site = Site::start(
        "127.0.0.2",
        vec![
            ("/r1", Page::redirect("/r2")),
            ("/r2", Page::redirect("/r3")),
            ("/r3", Page::redirect("/r4")),
            ("/r4", Page::redirect("/a.png")),
            ("/three", Page::redirect("/r3")),
            ("/a.png", Page::ok("image/png", png())),
            ("/big.png", Page::ok("image/png", big)),
            ("/lying.jpg", Page::ok("image/jpeg", png())),
            (
                "/page.html",
                Page::ok("text/html", b"<html></html>".to_vec()),
            ),
        ],
    )
    .await;
    let net = NetGuard::default().trusting("127.0.0.2".parse().unwrap());
    let tool = viewer(net, dir.path(), dir.path());
    let cases = [
        ("/three", None),
        ("/r1", Some("image_redirect_failed")),
        ("/big.png", Some("image_too_large")),
        ("/lying.jpg", Some("invalid_image")),
        ("/page.html", Some("invalid_image")),
        ("/missing.png", Some("image_download_failed")),
    ];
    for (path, error) in cases {
        let v = view_url(&tool, &site.url(path)).await;
        match error {
            None => assert_eq!(v["success"], true, "{path}: {v}"),
            Some(code) => assert_eq!(v["error"], code, "{path}: {v}"),
        }
    }
    for (args, code) in [
        (
            json!({"url": "http://user:pw@example.com/a.png"}),
            "invalid_url",
        ),
        (json!({"url": "ftp://example.com/a.png"}), "invalid_url"),
        (json!({}), "invalid_source"),
        (
            json!({"url": "https://e.com/a.png", "image_data": PNG_B64}),
            "invalid_source",
        ),
        (json!({"image_data": "bm90IGFuIGltYWdl"}), "invalid_image"),
        (
            json!({"image_data": "x".repeat(1_048_577)}),
            "image_too_large",
        ),
    ] {
        let v = json_of(&call(&tool, actor(false), args.clone()).await);
        assert_eq!(v["error"], code, "{args}: {v}");
    }
    let ok = call(
        &tool,
        actor(false),
        json!({"image_data": format!("data:image/png;base64,{PNG_B64}")}),
    )
    .await;
    assert_eq!(json_of(&ok)["source_type"], "content");
    assert_eq!(ok.images().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Projection into the model request.

/// A host whose admin user sees `work` (where the image file is) and whose tools include the
/// eyes, talking to `mock` as `model`.
async fn eyes_host(
    mock: &MockModelServer,
    model: &str,
    work: &Path,
    image_input: bool,
) -> TestHost {
    let work = work.to_path_buf();
    TestHost::builder(mock, model)
        .admin()
        .config(move |c| c.support_image_input = image_input)
        .caps(move |data| {
            Capabilities::default()
                .with(Recall::new(mpa_history::History::new(
                    mpa_history::HistoryConfig::new(data.to_path_buf()),
                )))
                .with(Eyes::new(work, data))
        })
        .build()
        .await
}

fn poster_dir() -> (tempfile::TempDir, String) {
    let work = tempfile::tempdir().unwrap();
    let path = work.path().join("poster.png");
    std::fs::write(&path, png()).unwrap();
    (work, path.to_string_lossy().into_owned())
}

fn view_call(id: &str, path: &str, detail: &str) -> (String, String, Value) {
    (
        id.to_string(),
        "view_image".to_string(),
        json!({"file_path": path, "detail": detail}),
    )
}

fn script(calls: &[(String, String, Value)]) -> MockReply {
    let c: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(a, b, v)| (a.as_str(), b.as_str(), v.clone()))
        .collect();
    MockReply::tool_calls(&c)
}

fn messages_of(req: &Value) -> Vec<Value> {
    req["messages"].as_array().unwrap().clone()
}

fn image_parts(m: &Value) -> Vec<Value> {
    m["content"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter(|p| p["type"] == "image_url")
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

fn data_url() -> String {
    format!("data:image/png;base64,{PNG_B64}")
}

/// Every file under `dir`, read as bytes: none may hold the image's Base64.
fn assert_no_image_data_under(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                let text = String::from_utf8_lossy(&bytes);
                assert!(
                    !text.contains(PNG_B64),
                    "{} holds the image's Base64",
                    p.display()
                );
                assert!(
                    !text.contains("data:image/png;base64"),
                    "{} holds a data URL",
                    p.display()
                );
            }
        }
    }
}

#[tokio::test]
async fn a_vision_model_gets_one_observation_message_after_the_tool_reply_batch() {
    let mock = MockModelServer::start().await;
    let (work, poster) = poster_dir();
    let h = eyes_host(&mock, "gpt-4o", work.path(), true).await;
    mock.push(script(&[
        view_call("c1", &poster, "high"),
        view_call("c2", &poster, "low"),
    ]));
    mock.push(MockReply::text("A small poster."));
    let turn = h.turn("s1", "look at the poster").await;
    assert_eq!(turn.final_text, "A small poster.");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    // The first request had no images.
    assert!(
        messages_of(&reqs[0])
            .iter()
            .all(|m| image_parts(m).is_empty())
    );
    let msgs = messages_of(&reqs[1]);
    let call_at = msgs
        .iter()
        .position(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .unwrap();
    let roles: Vec<&str> = msgs[call_at..]
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["assistant", "tool", "tool", "user"],
        "one observation after the batch"
    );
    let with_images: Vec<usize> = msgs
        .iter()
        .enumerate()
        .filter(|(_, m)| !image_parts(m).is_empty())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        with_images,
        [call_at + 3],
        "exactly one message carries images, after the batch"
    );
    let obs = &msgs[call_at + 3];
    let parts = obs["content"].as_array().unwrap();
    assert_eq!(parts[0]["type"], "text");
    let text = parts[0]["text"].as_str().unwrap();
    assert!(
        text.contains("\"tool_call_id\":\"c1\"") && text.contains("\"tool_call_id\":\"c2\""),
        "{text}"
    );
    assert!(text.contains("external data"), "{text}");
    assert_eq!(
        image_parts(obs),
        [
            json!({"type": "image_url", "image_url": {"url": data_url(), "detail": "high"}}),
            json!({"type": "image_url", "image_url": {"url": data_url(), "detail": "low"}}),
        ]
    );
    // The tool messages themselves carry text only, and no host metadata goes out.
    for m in &msgs[call_at + 1..call_at + 3] {
        assert!(m["content"].is_string(), "{m}");
        assert!(!m["content"].as_str().unwrap().contains("did not receive"));
    }
    assert!(obs.get("metadata").is_none());

    // Persisted: the note, never the bytes (chat snapshot, journal and evidence alike).
    let stored = h.messages("s1").await;
    let tools: Vec<_> = stored
        .iter()
        .filter(|m| m.name.as_deref() == Some("view_image"))
        .collect();
    assert_eq!(tools.len(), 2);
    for m in tools {
        assert!(m.images.is_empty());
        assert!(
            m.text().contains(mpa_core::vision::HISTORICAL_IMAGE_NOTE),
            "{}",
            m.text()
        );
    }
    assert!(
        stored.iter().all(|m| m.content.image_count() == 0),
        "no observation is stored"
    );
    h.agent.shutdown().await;
    assert_no_image_data_under(&h.data);
    drop(work);
}

#[tokio::test]
async fn a_text_only_model_reads_that_it_did_not_receive_the_image() {
    for (model, switch) in [("deepseek-chat", true), ("gpt-4o", false)] {
        let mock = MockModelServer::start().await;
        let (work, poster) = poster_dir();
        let h = eyes_host(&mock, model, work.path(), switch).await;
        mock.push(script(&[view_call("c1", &poster, "auto")]));
        mock.push(MockReply::text("I could not see it."));
        h.turn("s1", "look at the poster").await;
        let msgs = messages_of(&mock.requests()[1]);
        assert!(
            msgs.iter().all(|m| image_parts(m).is_empty()),
            "{model}: no image sent"
        );
        let tool = msgs.iter().find(|m| m["role"] == "tool").unwrap();
        let text = tool["content"].as_str().unwrap();
        assert!(
            text.contains("did not receive this tool image"),
            "{model}: {text}"
        );
        assert!(text.contains("image input is off"), "{model}: {text}");
        assert!(
            text.contains("\"success\":true"),
            "{model}: the result itself is kept: {text}"
        );
        assert_eq!(
            msgs.last().unwrap()["role"],
            "tool",
            "{model}: no observation message"
        );
    }
}

#[tokio::test]
async fn a_provider_refusing_image_input_gets_one_text_retry_without_rerunning_tools() {
    let mock = MockModelServer::start().await;
    let (work, poster) = poster_dir();
    let h = eyes_host(&mock, "gpt-4o", work.path(), true).await;
    mock.push(script(&[view_call("c1", &poster, "auto")]));
    mock.push(MockReply::status(
        400,
        r#"{"error":{"message":"Invalid content type. image_url is only supported by certain models: this model does not support image input","type":"invalid_request_error"}}"#,
    ));
    mock.push(script(&[view_call("c2", &poster, "auto")]));
    mock.push(MockReply::text("done"));
    let turn = h.turn("s1", "look twice").await;
    assert_eq!(turn.final_text, "done");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 4, "the refused call was retried once");
    let images = |i: usize| -> usize {
        messages_of(&reqs[i])
            .iter()
            .map(|m| image_parts(m).len())
            .sum()
    };
    assert_eq!(
        images(1),
        1,
        "the first request after the tool showed the image"
    );
    assert_eq!(images(2), 0, "the retry is text-only");
    assert_eq!(images(3), 0, "the rest of the turn is text-only");
    for i in [2, 3] {
        let msgs = messages_of(&reqs[i]);
        let notes = msgs
            .iter()
            .filter(|m| m["role"] == "tool")
            .filter(|m| {
                m["content"]
                    .as_str()
                    .unwrap()
                    .contains("refused image input")
            })
            .count();
        assert_eq!(notes, if i == 2 { 1 } else { 2 }, "request {i}");
    }
    // The retry resent the same conversation: no tool ran again for it.
    let started: Vec<&str> = turn
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ToolStarted { tool_id, .. } => Some(tool_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ["c1", "c2"]);
    assert_eq!(
        messages_of(&reqs[2]).len(),
        messages_of(&reqs[1]).len() - 1,
        "the retry is the same request without the observation"
    );
    // The next turn starts with vision again (reset per user request); its old images are gone.
    mock.push(script(&[view_call("c3", &poster, "auto")]));
    mock.push(MockReply::text("seen"));
    h.turn("s1", "and once more").await;
    let reqs = mock.requests();
    let last: usize = messages_of(&reqs[5])
        .iter()
        .map(|m| image_parts(m).len())
        .sum();
    assert_eq!(last, 1, "only the new image is shown");
    let old = messages_of(&reqs[5])
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter(|m| {
            m["content"]
                .as_str()
                .unwrap()
                .contains("historical image not kept")
        })
        .count();
    assert_eq!(old, 2, "earlier images are notes");
}

// ---------------------------------------------------------------------------------------------
// read_file

fn reader(work: &Path, data: &Path) -> Arc<dyn Tool> {
    typed(read_file::ReadFile {
        files: FileBoundary::new(work, data),
    })
}

#[tokio::test]
async fn read_file_refuses_outside_dot_dot_and_symlinks_out_identically() {
    let root = tempfile::tempdir().unwrap();
    let (work, data) = (root.path().join("work"), root.path().join("data"));
    let key = mpa_redact::UserKey::for_user(&actor(false).user_id);
    let own = data
        .join("agent/runtime/code/users")
        .join(key.as_str())
        .join("output");
    let other = data.join("agent/runtime/code/users/someone-else/output");
    for d in [&work, &own, &other] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(own.join("spill.txt"), "line one\nline two\nline three\n").unwrap();
    std::fs::write(other.join("theirs.txt"), "secret\n").unwrap();
    std::fs::write(data.join("agent.db-notes.txt"), "host file\n").unwrap();
    std::fs::write(root.path().join("outside.txt"), "outside\n").unwrap();
    std::os::unix::fs::symlink(root.path().join("outside.txt"), own.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&other, own.join("dir-link")).unwrap();
    let tool = reader(&work, &data);

    let ok = json_of(
        &call(
            &tool,
            actor(false),
            json!({"file_path": own.join("spill.txt"), "start_line": 2}),
        )
        .await,
    );
    assert_eq!(ok["success"], true, "{ok}");
    assert_eq!(ok["content"], "     2\tline two\n     3\tline three\n");
    assert_eq!(ok["has_more"], false);

    let refusals = [
        root.path()
            .join("outside.txt")
            .to_string_lossy()
            .into_owned(),
        other.join("theirs.txt").to_string_lossy().into_owned(),
        data.join("agent.db-notes.txt")
            .to_string_lossy()
            .into_owned(),
        format!("{}/../../someone-else/output/theirs.txt", own.display()),
        "../../../../../../outside.txt".to_string(),
        own.join("link.txt").to_string_lossy().into_owned(),
        own.join("dir-link/theirs.txt")
            .to_string_lossy()
            .into_owned(),
        "/etc/passwd".to_string(),
    ];
    let mut answers = Vec::new();
    for path in &refusals {
        let out = call(&tool, actor(false), json!({"file_path": path})).await;
        assert_eq!(
            out.error.as_deref(),
            Some("local_path_access_denied"),
            "{path}: {}",
            out.content
        );
        answers.push(out.content);
    }
    answers.dedup();
    assert_eq!(
        answers.len(),
        1,
        "every refusal reads the same: {answers:?}"
    );
    // An administrator reads the working and data directories.
    std::fs::write(work.join("notes.txt"), "admin notes\n").unwrap();
    let admin = json_of(&call(&tool, actor(true), json!({"file_path": "notes.txt"})).await);
    assert_eq!(admin["content"], "     1\tadmin notes\n");
    let admin_data = call(
        &tool,
        actor(true),
        json!({"file_path": data.join("agent.db-notes.txt")}),
    )
    .await;
    assert_eq!(json_of(&admin_data)["success"], true);
    // Binary files are refused.
    std::fs::write(own.join("blob.bin"), [0x89, b'P', 0, 1, 2]).unwrap();
    let bin = call(
        &tool,
        actor(false),
        json!({"file_path": own.join("blob.bin")}),
    )
    .await;
    assert_eq!(bin.error.as_deref(), Some("binary_file"));
}

#[tokio::test]
async fn read_file_pages_a_2_gb_file_without_loading_it() {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("huge.log");
    {
        let f = std::fs::File::create(&path).unwrap();
        let lines: String = (1..=3000).map(|i| format!("log line {i}\n")).collect();
        std::io::Write::write_all(&mut &f, lines.as_bytes()).unwrap();
        // Sparse: 2 GiB long, a few blocks on disk.
        f.set_len(2 << 30).unwrap();
    }
    let tool = reader(root.path(), root.path());
    let first = json_of(&call(&tool, actor(true), json!({"file_path": &path})).await);
    assert_eq!(first["start_line"], 1);
    assert_eq!(first["end_line"], 2000);
    assert_eq!(first["has_more"], true);
    assert_eq!(first["next_start_line"], 2001);
    let next = json_of(
        &call(
            &tool,
            actor(true),
            json!({"file_path": &path, "start_line": 2999, "end_line": 3000}),
        )
        .await,
    );
    assert_eq!(
        next["content"],
        "  2999\tlog line 2999\n  3000\tlog line 3000\n"
    );
    assert_eq!(next["has_more"], true);
}

// ---------------------------------------------------------------------------------------------
// search_web

#[tokio::test]
async fn search_web_asks_searxng_first_then_brave_and_says_when_nothing_is_configured() {
    let searx = Site::start(
        "127.0.0.1",
        vec![(
            "/searxng/search",
            Page::ok(
                "application/json",
                json!({"results": [
                    {"title": "Dune Part Two", "url": "https://example.org/dune", "content": "Release group FLUX"},
                    {"title": "no url"},
                    {"title": "Second", "url": "https://example.org/2", "content": "x"},
                ]})
                .to_string()
                .into_bytes(),
            ),
        )],
    )
    .await;
    let tool = typed(search_web::SearchWeb::new(
        SearchConfig::from_settings(Some(&searx.url("/searxng/")), None).unwrap(),
    ));
    let v = json_of(
        &call(
            &tool,
            actor(false),
            json!({"query": "dune 2024 FLUX", "limit": 5}),
        )
        .await,
    );
    assert_eq!(v["provider"], "searxng");
    assert_eq!(
        v["results"],
        json!([
            {"title": "Dune Part Two", "url": "https://example.org/dune", "snippet": "Release group FLUX"},
            {"title": "Second", "url": "https://example.org/2", "snippet": "x"},
        ])
    );
    let asked = searx.paths.lock().unwrap().clone();
    assert_eq!(asked, ["/searxng/search?q=dune+2024+FLUX&format=json"]);

    // SearXNG down: Brave answers.
    let down = Site::start("127.0.0.1", vec![]).await;
    let brave = Site::start(
        "127.0.0.1",
        vec![(
            "/brave",
            Page::ok(
                "application/json",
                json!({"web": {"results": [{"title": "B", "url": "https://b.example", "description": "from brave"}]}})
                    .to_string()
                    .into_bytes(),
            ),
        )],
    )
    .await;
    let mut cfg = SearchConfig::from_settings(Some(&down.url("/")), Some("key-123")).unwrap();
    cfg.brave_endpoint = Some(brave.url("/brave").parse().unwrap());
    let tool = typed(search_web::SearchWeb::new(cfg));
    let v = json_of(&call(&tool, actor(false), json!({"query": "x"})).await);
    assert_eq!(v["provider"], "brave", "{v}");
    assert_eq!(v["results"][0]["snippet"], "from brave");

    let none = typed(search_web::SearchWeb::new(SearchConfig::default()));
    let out = call(&none, actor(false), json!({"query": "x"})).await;
    assert_eq!(out.error.as_deref(), Some("search_unconfigured"));
    let empty = call(&none, actor(false), json!({"query": "  "})).await;
    assert_eq!(empty.error.as_deref(), Some("invalid_arguments"));
}

#[tokio::test]
async fn search_web_is_held_to_fifty_searches_per_turn() {
    let searx = Site::start(
        "127.0.0.1",
        vec![(
            "/search",
            Page::ok("application/json", br#"{"results": []}"#.to_vec()),
        )],
    )
    .await;
    let mock = MockModelServer::start().await;
    let search = SearchConfig::from_settings(Some(&searx.url("/")), None).unwrap();
    let h = TestHost::builder(&mock, "gpt-4o")
        .caps(move |data| {
            Capabilities::default().with(Eyes {
                search,
                ..Eyes::new(data, data)
            })
        })
        .build()
        .await;
    let batch = |from: usize, n: usize| -> Vec<(String, String, Value)> {
        (from..from + n)
            .map(|i| {
                (
                    format!("s{i}"),
                    "search_web".to_string(),
                    json!({"query": format!("q{i}")}),
                )
            })
            .collect()
    };
    mock.push(script(&batch(0, 50)));
    mock.push(script(&batch(50, 1)));
    mock.push(MockReply::text("enough"));
    h.turn("s1", "search a lot").await;
    assert_eq!(searx.hits(), 50, "the 51st search did not run");
    let last = messages_of(&mock.requests()[2]);
    let answer = last.iter().rev().find(|m| m["role"] == "tool").unwrap();
    assert!(
        answer["content"].as_str().unwrap().contains("not executed"),
        "{answer}"
    );
}

#[tokio::test]
async fn eyes_tool_specs_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let eyes = Eyes::new(dir.path(), dir.path());
    let mut registry = mpa_core::tools::ToolRegistry::new();
    mpa_core::capability::Capability::tools(&eyes, &mut registry);
    for name in ["view_image", "read_file", "search_web"] {
        insta::assert_json_snapshot!(format!("{name}_spec"), registry.get(name).unwrap().spec);
    }
}
