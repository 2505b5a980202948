//! Accepting connections with hyper's HTTP/1 server directly (axum's `serve` cannot set hyper's
//! header read timeout): the header read timeout also closes a keep-alive connection that sits
//! idle between requests; each client address may hold at most
//! [`ServerConfig::max_connections_per_ip`] connections at once, and one more is answered 429
//! `too_many_connections` and closed; shutdown stops accepting and lets every connection finish
//! its request ([`hyper_util::server::graceful`]). Dropping the future drops every connection.

use crate::error::ApiError;
use crate::state::ServerConfig;
use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::IntoResponse;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// Open connections per client address.
#[derive(Default)]
struct PerAddress {
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One counted connection; uncounted when dropped (the connection ended, failed or was dropped
/// at shutdown).
struct Slot {
    table: Arc<PerAddress>,
    ip: IpAddr,
}

impl PerAddress {
    fn take(self: &Arc<Self>, ip: IpAddr, limit: usize) -> Option<Slot> {
        let mut open = self.open.lock().ok()?;
        let n = open.entry(ip).or_insert(0);
        if *n >= limit {
            return None;
        }
        *n += 1;
        Some(Slot {
            table: Arc::clone(self),
            ip,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut open) = self.table.open.lock()
            && let Some(n) = open.get_mut(&self.ip)
        {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// Serves `app` on `listener` until `stop` is cancelled, then waits for open connections to
/// finish their requests.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    cfg: Arc<ServerConfig>,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(cfg.header_read_timeout)
        .keep_alive(true);
    let mut refuse = http1::Builder::new();
    refuse
        .timer(TokioTimer::new())
        .header_read_timeout(cfg.header_read_timeout)
        .keep_alive(false);
    let graceful = GracefulShutdown::new();
    let table = Arc::new(PerAddress::default());
    let mut conns = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        match table.take(peer.ip(), cfg.max_connections_per_ip) {
            Some(slot) => {
                // Handlers read the client address as axum's `ConnectInfo`.
                let svc = app.clone().map_request(move |mut req: Request<Incoming>| {
                    req.extensions_mut().insert(ConnectInfo(peer));
                    req
                });
                let conn =
                    http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(svc));
                let watched = graceful.watch(conn);
                conns.spawn(async move {
                    let _slot = slot;
                    if let Err(e) = watched.await {
                        tracing::debug!(peer = %peer, error = %e, "connection ended");
                    }
                });
            }
            None => {
                tracing::warn!(peer = %peer.ip(), "too many connections from one address");
                conns.spawn(refused(refuse.clone(), stream));
            }
        }
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Answers the one request of a connection over the per-address limit, then closes it.
async fn refused(http: http1::Builder, stream: TcpStream) {
    let svc = hyper::service::service_fn(|_req: Request<Incoming>| async {
        let mut resp = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_connections",
            "too many open connections from this address; close some and try again",
        )
        .into_response();
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        Ok::<_, Infallible>(resp)
    });
    let _ = http.serve_connection(TokioIo::new(stream), svc).await;
}
