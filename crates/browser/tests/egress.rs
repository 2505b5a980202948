//! The profile's egress proxy on a real Chromium and real loopback sockets: a name that passed
//! the URL check but resolves to 127.0.0.1 when the browser connects (DNS rebinding) is refused
//! at the connection, and a public page's `<img>`, `fetch` and `WebSocket` aimed at a loopback
//! server reach nothing — unless the action allowed private networks.

#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::{PageServer, browsers, chromium, key};
use mpa_browser::BrowserError;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const T: Duration = Duration::from_secs(30);

/// A loopback server that counts every connection it accepts (any protocol) and answers 404.
async fn counting_server() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let _ = sock
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    )
                    .await;
            });
        }
    });
    (port, seen)
}

/// Loads an `<img>`, a `fetch` and a `WebSocket` from `base` and waits until each one ended
/// (loaded, failed or closed), answering what each did.
fn reach_script(port: u16) -> String {
    format!(
        r#"Promise.all([
  new Promise(r => {{ const i = new Image(); i.onload = () => r('img:loaded'); i.onerror = () => r('img:error'); i.src = 'http://127.0.0.1:{port}/img.png'; document.body.appendChild(i); }}),
  fetch('http://127.0.0.1:{port}/data', {{mode: 'no-cors'}}).then(() => 'fetch:answered', () => 'fetch:error'),
  new Promise(r => {{ const w = new WebSocket('ws://127.0.0.1:{port}/socket'); w.onopen = () => r('ws:open'); w.onerror = () => r('ws:error'); w.onclose = () => r('ws:closed'); }}),
]).then(a => a.join(','))"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_resolves_to_loopback_when_the_browser_connects_is_refused() {
    if !chromium() {
        return;
    }
    let server = PageServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let b = browsers(dir.path(), server.port, Duration::from_secs(600));
    let s = b.session(&key("rebind")).await.unwrap();
    // The URL check passes (the name looked public); the connection is what is refused.
    let r = s
        .goto(
            &format!("http://rebind.test:{}/secret", server.port),
            false,
            T,
        )
        .await;
    assert!(
        matches!(r, Err(BrowserError::NavigationRefused(ref why)) if why.contains("rebind.test")),
        "{r:?}"
    );
    assert_eq!(r.unwrap_err().code(), "unsafe_url");
    assert_eq!(
        server.secret_hits.load(Ordering::SeqCst),
        0,
        "the loopback server was reached"
    );
    // Asked for explicitly, the same name reaches the loopback page.
    let ok = s
        .goto(
            &format!("http://rebind.test:{}/fixture", server.port),
            true,
            T,
        )
        .await
        .unwrap();
    assert_eq!(ok.title, "Fixture");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_pages_image_fetch_and_websocket_get_nothing_from_loopback() {
    if !chromium() {
        return;
    }
    let server = PageServer::start().await;
    let (private_port, seen) = counting_server().await;
    let dir = tempfile::tempdir().unwrap();
    let b = browsers(dir.path(), server.port, Duration::from_secs(600));
    let s = b.session(&key("subresources")).await.unwrap();
    let public = format!("http://public.test:{}/fixture", server.port);
    s.goto(&public, false, T).await.unwrap();
    let outcome = s.evaluate(&reach_script(private_port), T).await.unwrap();
    assert_eq!(outcome, "img:error,fetch:error,ws:error", "{outcome}");
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "a public page's request reached the loopback server"
    );
    // The same page with private networks allowed does reach it (so the zero above is the
    // proxy's doing, not a script that never ran).
    s.goto(&public, true, T).await.unwrap();
    let outcome = s.evaluate(&reach_script(private_port), T).await.unwrap();
    assert!(
        outcome.as_str().unwrap().contains("fetch:answered"),
        "{outcome}"
    );
    assert!(seen.load(Ordering::SeqCst) >= 2, "{seen:?}");
    b.shutdown().await;
}
