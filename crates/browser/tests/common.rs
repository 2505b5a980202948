//! A real Chromium and real HTTP on 127.0.0.1: a small page server, a request guard that
//! refuses what a table names private, and the browsers under test.

#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use async_trait::async_trait;
use mpa_browser::{BrowserConfig, Browsers, RequestGuard};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The fixture page: a button that turns `PENDING` into `BROWSER_OK`, a 200×80 box, a form.
pub const FIXTURE: &str = r#"<!doctype html><html><head><title>Fixture</title>
<style>body{margin:0;font:16px sans-serif} #captcha{width:200px;height:80px;background:#c33;margin:10px}</style>
</head><body>
<h1>Fixture page</h1>
<p id="status">PENDING</p>
<button id="show" onclick="document.getElementById('status').textContent='BROWSER_OK'">显示结果</button>
<div id="captcha">AB12</div>
<input id="name" name="name" placeholder="your name">
<select id="pick"><option value="a">Alpha</option><option value="b">Beta</option></select>
<p class="twin">one</p><p class="twin">two</p>
</body></html>"#;

/// Serves `/fixture` and `/redirect?to=<url>` (a 302 to that URL) on 127.0.0.1; counts hits
/// of `/secret` (which a refused request must never reach).
pub struct PageServer {
    pub base: String,
    pub port: u16,
    pub secret_hits: Arc<std::sync::atomic::AtomicUsize>,
}

impl PageServer {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let secret_hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let hits = secret_hits.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let hits = hits.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let mut got = 0;
                    loop {
                        let Ok(n) = sock.read(&mut buf[got..]).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        got += n;
                        if buf[..got].windows(4).any(|w| w == b"\r\n\r\n") || got == buf.len() {
                            break;
                        }
                    }
                    let head = String::from_utf8_lossy(&buf[..got]).to_string();
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let (status, extra, body) = if path == "/fixture" {
                        (
                            "200 OK",
                            "Content-Type: text/html; charset=utf-8\r\n".to_string(),
                            FIXTURE.to_string(),
                        )
                    } else if path.starts_with("/redirect?") {
                        let u = url::Url::parse(&format!("http://x{path}")).unwrap();
                        let to = u
                            .query_pairs()
                            .find(|(k, _)| k == "to")
                            .map(|(_, v)| v.to_string())
                            .unwrap_or_default();
                        ("302 Found", format!("Location: {to}\r\n"), String::new())
                    } else if path == "/secret" {
                        hits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        (
                            "200 OK",
                            "Content-Type: text/plain\r\n".into(),
                            "SECRET".into(),
                        )
                    } else {
                        ("404 Not Found", String::new(), String::new())
                    };
                    let resp = format!(
                        "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Self {
            base: format!("http://127.0.0.1:{port}"),
            port,
            secret_hits,
        }
    }
}

/// The test's world: `public.test` is a public site (served from the loopback page server);
/// `rebind.test` looks public when a URL is checked but resolves to 127.0.0.1 when the browser
/// connects (DNS rebinding); everything else is private.
pub struct TestGuard;

#[async_trait]
impl RequestGuard for TestGuard {
    async fn admit(&self, url: &str) -> Result<(), String> {
        let host = url::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string));
        match host.as_deref() {
            Some("public.test" | "rebind.test") => Ok(()),
            other => Err(format!("{other:?} is private")),
        }
    }

    async fn addresses(
        &self,
        host: &str,
        port: u16,
        allow_private: bool,
    ) -> Result<Vec<std::net::SocketAddr>, String> {
        let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        match host {
            "public.test" => Ok(vec![loopback]),
            _ if !allow_private => Err(format!("{host} resolves to 127.0.0.1, a private address")),
            "rebind.test" => Ok(vec![loopback]),
            _ => tokio::net::lookup_host((host, port))
                .await
                .map(Iterator::collect)
                .map_err(|e| e.to_string()),
        }
    }
}

/// Whether Chromium is installed (otherwise the test is skipped with a notice).
pub fn chromium() -> bool {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .any(|p| std::path::Path::new(p).exists());
    mpa_test_support::external_program("Chromium", found)
}

/// Browsers whose `public.test` is the page server (the guard's addresses send it there).
pub fn browsers(profiles: &std::path::Path, port: u16, ttl: Duration) -> Browsers {
    let _ = port;
    Browsers::new(
        BrowserConfig {
            executable: None,
            profiles_root: profiles.to_path_buf(),
            idle_ttl: ttl,
            extra_args: Vec::new(),
        },
        Arc::new(TestGuard),
    )
}

pub fn key(session: &str) -> mpa_browser::SessionKey {
    mpa_browser::SessionKey {
        user_key: "u1".into(),
        session_id: session.into(),
    }
}
