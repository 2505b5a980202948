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

/// Admits every host and answers `127.0.0.1:<port>` for it.
struct ToLoopback(u16);

#[async_trait::async_trait]
impl mpa_browser::RequestGuard for ToLoopback {
    async fn admit(&self, _url: &str) -> Result<(), String> {
        Ok(())
    }

    async fn addresses(
        &self,
        _host: &str,
        _port: u16,
        _allow_private: bool,
    ) -> Result<Vec<std::net::SocketAddr>, String> {
        Ok(vec![std::net::SocketAddr::from(([127, 0, 0, 1], self.0))])
    }
}

/// A `CONNECT` through the proxy on `proxy` by a bash process running as `uid` (`None`: ours);
/// what the proxy answered (empty when it closed the connection without a word).
fn connect_as(uid: Option<u32>, proxy: u16, target: u16) -> String {
    use std::os::unix::process::CommandExt;
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{proxy} || exit 9; \
         printf 'CONNECT 127.0.0.1:{target} HTTP/1.1\\r\\nHost: 127.0.0.1:{target}\\r\\n\\r\\n' >&3; \
         timeout 5 head -c 12 <&3"
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["-c", &script]);
    if let Some(uid) = uid {
        cmd.uid(uid).gid(uid);
    }
    let out = cmd.output().unwrap();
    assert_ne!(
        out.status.code(),
        Some(9),
        "bash could not connect: {out:?}"
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_local_account_cannot_relay_through_a_profiles_proxy() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !mpa_test_support::external_program("root (to connect as a second local account)", root) {
        return;
    }
    let (target, seen) = counting_server().await;
    let proxy = mpa_browser::egress::Egress::start(Arc::new(ToLoopback(target)))
        .await
        .unwrap();
    let port = proxy.port();
    // The host's own account (the Chromium it starts) is served: the tunnel opens.
    let ours = tokio::task::spawn_blocking(move || connect_as(None, port, target))
        .await
        .unwrap();
    assert_eq!(ours, "HTTP/1.1 200", "{ours:?}");
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    // `nobody` gets the connection closed without a word, and nothing reaches the target.
    let theirs = tokio::task::spawn_blocking(move || connect_as(Some(65534), port, target))
        .await
        .unwrap();
    assert_eq!(theirs, "", "another account was served");
    // The proxy closed that connection before reading a byte of it, so nothing can follow.
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "another account reached the target"
    );
}

#[cfg(target_endian = "little")]
#[test]
fn the_owner_of_a_client_socket_is_read_from_the_kernels_table() {
    let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0\n\
   1: 0100007F:A1B2 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 222 1 0 20 4 30 10 -1\n\
   2: 0100007F:1F90 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0 20 4 30 10 -1\n\
   3: 0100007F:A1B3 0100007F:1F90 06 00000000:00000000 03:00000F9B 00000000     0        0 0 3 0000000000000000\n";
    let (client, server) = (
        "127.0.0.1:41394".parse().unwrap(),
        "127.0.0.1:8080".parse().unwrap(),
    );
    let owner = mpa_browser::peer::owner_in_table(table, client, server);
    assert_eq!(owner, Some(1000), "the client's row, not the server's");
    let unknown = "127.0.0.1:41396".parse().unwrap();
    assert_eq!(
        mpa_browser::peer::owner_in_table(table, unknown, server),
        None
    );
    // A client that already closed (TIME_WAIT, row 3) has no owner; its "0" is not root's.
    let closed = "127.0.0.1:41395".parse().unwrap();
    assert_eq!(
        mpa_browser::peer::owner_in_table(table, closed, server),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kernel_names_the_owner_of_a_loopback_connection_by_netlink_and_by_proc() {
    use mpa_browser::peer::{own_uid, owner_by_netlink, owner_by_proc, socket_owner};
    for host in ["127.0.0.1", "::1"] {
        let Ok(listener) = tokio::net::TcpListener::bind((host, 0)).await else {
            continue; // no IPv6 loopback on this machine
        };
        let server = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(server).await.unwrap();
        let (_accepted, peer) = listener.accept().await.unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        assert_eq!(owner_by_netlink(peer, server), Some(own_uid()), "{host}");
        assert_eq!(owner_by_proc(peer, server), Some(own_uid()), "{host}");
        assert_eq!(socket_owner(peer, server), Some(own_uid()), "{host}");
        // The server's own end, or a port nobody connected from, is not the client's socket.
        let mut elsewhere = peer;
        elsewhere.set_port(if peer.port() == 1 { 2 } else { 1 });
        assert_eq!(owner_by_netlink(elsewhere, server), None, "{host}");
        assert_eq!(socket_owner(elsewhere, server), None, "{host}");
        // The client closes first, so its end waits in TIME_WAIT — an ownerless record the
        // kernel reports as user 0, which must not pass for root's.
        drop(client);
        drop(_accepted);
        let closed = mpa_test_support::eventually(Duration::from_secs(10), || {
            owner_by_netlink(peer, server).is_none()
        })
        .await;
        assert!(closed, "{host}: a closed client still has an owner");
        assert_eq!(socket_owner(peer, server), None, "{host}");
    }
}
