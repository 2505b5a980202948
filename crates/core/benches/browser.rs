//! The browser's host costs (issue 31) on a real Chromium and a loopback page:
//! - cold start to first `goto`: `browse_webpage goto` on a session without a browser, through
//!   the one call path (Chromium start with its egress proxy, first tab attached, navigation,
//!   load), and the same split into `Browsers::session` and `Browser::goto`; a warm `goto`;
//! - warm action host overhead: `get_content` and `snapshot` through the tool, through
//!   `Browser` and — Chromium's own time plus the pipe — the same DOM work as one bare
//!   `Runtime.evaluate`; the difference is what the host adds;
//! - screenshot encode: what the host does with Chromium's capture (the DevTools message parsed,
//!   Base64 decoded, the JPEG's size read), timed alone on a real capture, next to the whole
//!   `screenshot` action;
//! - idle memory: RSS and PSS of the profile's whole process group, read from /proc;
//! - the idle TTL: a browser left alone with a 2 s TTL, polled until its process group is gone.
//!
//! Run: `cargo bench -p mpa-core --bench browser` (`MPA_BENCH_ROUNDS`, default 200 warm rounds).
//! Without Chromium it prints a notice and measures nothing.
#![expect(clippy::unwrap_used, reason = "a bench's panic is its failure report")]

use mpa_browser::{BrowserConfig, Browsers, SessionKey};
use mpa_core::net_guard::NetGuard;
use mpa_core::tools::browse_webpage::{BrowserCapability, PublicOnly};
use mpa_core::tools::gate::Gates;
use mpa_core::tools::invoke::{Invoker, invoke};
use mpa_core::tools::policy::Origin;
use mpa_core::tools::registry::Tools;
use mpa_core::tools::{ToolContext, ToolOutput};
use mpa_core::{Capabilities, RegistryOptions, default_registry};
use mpa_protocol::{Actor, ToolCall, UserId};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A forum-like page: a heading, a few paragraphs, a form, a captcha box, a list of links.
fn page() -> String {
    let mut rows = String::new();
    for i in 0..40 {
        rows.push_str(&format!(
            "<li><a href=\"/t/{i}\">Release thread {i}: Some.Movie.2026.2160p.WEB-DL</a> \
             <span>reply {i}</span></li>"
        ));
    }
    format!(
        r#"<!doctype html><html><head><title>Bench page</title><style>
body{{margin:0;font:15px sans-serif}} #captcha{{width:200px;height:80px;background:#c33;color:#fff;font:40px monospace}}
</style></head><body><h1>Forum</h1><p id="status">PENDING</p>
<button id="show" onclick="document.getElementById('status').textContent='BROWSER_OK'">Show</button>
<form><input id="user" name="user" placeholder="user"><input id="pass" type="password">
<select id="pick"><option value="a">Alpha</option><option value="b">Beta</option></select></form>
<div id="captcha">AB12</div><ul>{rows}</ul>
<p>{}</p></body></html>"#,
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(40)
    )
}

async fn page_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = Arc::new(page());
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut got = 0;
                while !buf[..got].windows(4).any(|w| w == b"\r\n\r\n") && got < buf.len() {
                    match sock.read(&mut buf[got..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got += n,
                    }
                }
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    port
}

struct Env {
    browsers: Browsers,
    registry: Tools,
    gates: Gates,
}

fn env(profiles: &std::path::Path, ttl: Duration) -> Env {
    let browsers = Browsers::new(
        BrowserConfig {
            executable: None,
            profiles_root: profiles.to_path_buf(),
            idle_ttl: ttl,
            extra_args: Vec::new(),
        },
        Arc::new(PublicOnly {
            guard: NetGuard::default(),
        }),
    );
    let caps = Capabilities::default().with(BrowserCapability {
        browsers: browsers.clone(),
        ocr: None,
    });
    Env {
        browsers,
        registry: default_registry(&RegistryOptions::default(), caps)
            .unwrap()
            .into(),
        gates: Gates::standard(),
    }
}

fn actor() -> Actor {
    Actor {
        user_id: UserId("bench".into()),
        user_name: "bench".into(),
        is_admin: true,
    }
}

/// The tool's key for the bench actor's `session`.
fn key(session: &str) -> SessionKey {
    SessionKey {
        user_key: mpa_redact::UserKey::for_user(&UserId("bench".into()))
            .as_str()
            .to_string(),
        session_id: session.into(),
    }
}

async fn tool(env: &Env, session: &str, args: Value) -> ToolOutput {
    let inv = Invoker {
        tools: &env.registry,
        gates: &env.gates,
        timeout: Some(Duration::from_secs(120)),
        ledger: None,
        max_result_chars: mpa_core::result_cap::DEFAULT_TOOL_RESULT_MAX_CHARS,
    };
    let call = ToolCall {
        id: "call_1".into(),
        name: "browse_webpage".into(),
        arguments: args.to_string(),
    };
    let out = invoke(
        inv,
        ToolContext::detached(actor(), session, "call_1"),
        Origin::Turn,
        &call,
        1,
    )
    .await
    .output;
    assert!(out.error.is_none(), "{}", out.content);
    out
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Median and 90th percentile, in milliseconds.
fn stats(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    (
        ms(v[v.len() / 2]),
        ms(v[(v.len() * 9 / 10).min(v.len() - 1)]),
    )
}

async fn timed<F: std::future::Future>(n: usize, mut f: impl FnMut() -> F) -> (f64, f64) {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f().await;
        v.push(t.elapsed());
    }
    stats(v)
}

fn report(what: &str, (median, p90): (f64, f64)) {
    println!("{what:<58} median {median:>8.3} ms   p90 {p90:>8.3} ms");
}

/// The live processes of process group `pgid`: `(pid, VmRSS kB, PSS kB)`.
fn group(pgid: u32) -> Vec<(u32, u64, u64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some((_, after)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = after.split_whitespace().collect();
        if f.len() < 3 || f[2] != pgid.to_string() || f[0] == "Z" {
            continue;
        }
        let field = |file: &str, name: &str| {
            std::fs::read_to_string(e.path().join(file))
                .unwrap_or_default()
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .unwrap_or(0)
        };
        out.push((
            pid,
            field("status", "VmRSS:"),
            field("smaps_rollup", "Pss:"),
        ));
    }
    out
}

fn main() {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .any(|n| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .any(|d| d.join(n).is_file())
        });
    if !found {
        eprintln!("browser bench skipped: no Chromium on PATH (install `chromium`)");
        return;
    }
    let rounds: usize = std::env::var("MPA_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(rounds));
}

async fn run(rounds: usize) {
    let port = page_server().await;
    let url = format!("http://127.0.0.1:{port}/");
    let dir = tempfile::tempdir().unwrap();
    let env = env(dir.path(), Duration::from_secs(600));

    // ---- the egress proxy's owner check of one accepted connection ----
    {
        use mpa_browser::peer::{owner_by_netlink, owner_by_proc};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(server).await.unwrap();
        let (_accepted, peer) = listener.accept().await.unwrap();
        let sockets = std::fs::read_to_string("/proc/net/tcp")
            .map(|t| t.lines().count().saturating_sub(1))
            .unwrap_or(0);
        let netlink = timed(rounds, || async { owner_by_netlink(peer, server).unwrap() }).await;
        report(
            "owner check per proxy connection: sock_diag netlink",
            netlink,
        );
        let proc = timed(rounds, || async { owner_by_proc(peer, server).unwrap() }).await;
        report(
            &format!("owner check fallback: /proc/net/tcp ({sockets} sockets)"),
            proc,
        );
    }

    // ---- cold start ----
    let mut cold = Vec::new();
    let (mut start, mut nav) = (Vec::new(), Vec::new());
    for i in 0..7 {
        let session = format!("cold-{i}");
        let t = Instant::now();
        tool(
            &env,
            &session,
            json!({"action": "goto", "url": url, "allow_private_network": true}),
        )
        .await;
        cold.push(t.elapsed());
        env.browsers.close(&key(&session)).await;
        let t = Instant::now();
        let b = env.browsers.session(&key(&session)).await.unwrap();
        start.push(t.elapsed());
        let t = Instant::now();
        b.goto(&url, true, Duration::from_secs(30)).await.unwrap();
        nav.push(t.elapsed());
        env.browsers.close(&key(&session)).await;
    }
    println!(
        "cold starts in order (ms): {:?}",
        cold.iter().map(|d| ms(*d).round()).collect::<Vec<_>>()
    );
    report("cold start to first goto (tool, 7 browsers)", stats(cold));
    report(
        "  of which Browsers::session (start, first tab)",
        stats(start),
    );
    report("  of which Browser::goto (navigate, load)", stats(nav));

    // ---- warm actions ----
    let s = "warm";
    tool(
        &env,
        s,
        json!({"action": "goto", "url": url, "allow_private_network": true}),
    )
    .await;
    let b = env.browsers.existing(&key(s)).await.unwrap();
    let raw_content =
        "({url: location.href, title: document.title, content: document.body.innerText})";
    for _ in 0..20 {
        tool(&env, s, json!({"action": "get_content"})).await;
        b.evaluate(raw_content, Duration::from_secs(30))
            .await
            .unwrap();
    }
    let goto = json!({"action": "goto", "url": url, "allow_private_network": true});
    let warm_goto = timed(rounds.min(30), || tool(&env, s, goto.clone())).await;
    report("goto of the same page in a warm browser (tool)", warm_goto);
    let t_tool = timed(rounds, || tool(&env, s, json!({"action": "get_content"}))).await;
    let t_browser = timed(rounds, || b.content(false)).await;
    let t_raw = timed(rounds, || b.evaluate(raw_content, Duration::from_secs(30))).await;
    let t_noop = timed(rounds, || b.evaluate("1", Duration::from_secs(30))).await;
    report(&format!("get_content through the tool ({rounds})"), t_tool);
    report("get_content through Browser::content", t_browser);
    report("the same DOM read as one bare Runtime.evaluate", t_raw);
    report("a bare Runtime.evaluate of `1` (pipe round trip)", t_noop);
    println!(
        "  host overhead of get_content (tool − bare evaluate): {:.3} ms median",
        t_tool.0 - t_raw.0
    );
    let s_tool = timed(rounds, || tool(&env, s, json!({"action": "snapshot"}))).await;
    let s_browser = timed(rounds, || b.snapshot(150, 2000)).await;
    report(&format!("snapshot through the tool ({rounds})"), s_tool);
    report("snapshot through Browser::snapshot", s_browser);
    println!(
        "  tool-layer overhead of snapshot (tool − Browser): {:.3} ms median",
        s_tool.0 - s_browser.0
    );

    // ---- screenshots ----
    let n = rounds.min(50);
    let shot_tool = timed(n, || {
        tool(
            &env,
            s,
            json!({"action": "screenshot", "selector": "#captcha"}),
        )
    })
    .await;
    let shot_view = timed(n, || tool(&env, s, json!({"action": "screenshot"}))).await;
    report(
        &format!("screenshot of #captcha through the tool ({n})"),
        shot_tool,
    );
    report("screenshot of the viewport through the tool", shot_view);
    // The host's part alone, on a real capture: the DevTools answer as it arrives (JSON with
    // the Base64 JPEG), parsed, decoded and measured.
    let view = b.screenshot(None).await.unwrap();
    let message = serde_json::to_vec(&json!({"id": 7, "result": {"data":
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &view.jpeg)}}))
    .unwrap();
    let mut host = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let v: Value = serde_json::from_slice(&message).unwrap();
        let data = v["result"]["data"].as_str().unwrap();
        let jpeg =
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, data).unwrap();
        let size = mpa_browser::jpeg_size(&jpeg).unwrap();
        host.push(t.elapsed());
        assert_eq!(size, (view.width, view.height));
    }
    report(
        &format!(
            "screenshot host work ({} KiB viewport JPEG, q{})",
            view.jpeg.len() / 1024,
            view.quality
        ),
        stats(host),
    );

    // ---- idle memory ----
    let pid = b.pid().unwrap();
    drop(b);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let members = group(pid);
    let rss: u64 = members.iter().map(|m| m.1).sum();
    let pss: u64 = members.iter().map(|m| m.2).sum();
    println!(
        "idle browser (one profile, one loaded tab): {} processes, RSS sum {:.1} MiB, \
         PSS sum {:.1} MiB",
        members.len(),
        rss as f64 / 1024.0,
        pss as f64 / 1024.0
    );
    env.browsers.shutdown().await;

    // ---- idle TTL ----
    let ttl = Duration::from_secs(2);
    let short = self::env(dir.path(), ttl);
    tool(
        &short,
        "ttl",
        json!({"action": "goto", "url": url, "allow_private_network": true}),
    )
    .await;
    let pid = short
        .browsers
        .existing(&key("ttl"))
        .await
        .unwrap()
        .pid()
        .unwrap();
    let idle_since = Instant::now();
    while !group(pid).is_empty() {
        assert!(
            idle_since.elapsed() < Duration::from_secs(60),
            "never closed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "idle TTL {} s: the process group was gone {:.2} s after the last action",
        ttl.as_secs(),
        idle_since.elapsed().as_secs_f64()
    );
    short.browsers.shutdown().await;
}
