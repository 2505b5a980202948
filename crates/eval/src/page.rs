//! The `browser_navigation` scenario's page (evaluation spec): an HTTP server on
//! `127.0.0.1:<random>` that serves only `/fixture` — a "显示结果" button and a paragraph reading
//! `PENDING`, which the button's script turns into `BROWSER_OK`. The button comes first in the
//! document, so it is the first element a snapshot lists.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

const FIXTURE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Evaluation fixture</title></head>
<body>
<button id="show" type="button" onclick="document.getElementById('result').textContent='BROWSER_OK'">显示结果</button>
<p id="result">PENDING</p>
</body></html>"#;

/// The running page server; stops when dropped.
pub struct PageServer {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl PageServer {
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/fixture", listener.local_addr()?);
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve(sock));
            }
        });
        Ok(Self { url, task })
    }

    /// `http://127.0.0.1:PORT/fixture`.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut sock: tokio::net::TcpStream) {
    let mut buf = vec![0u8; 8192];
    let mut got = 0;
    while !buf[..got].windows(4).any(|w| w == b"\r\n\r\n") {
        if got == buf.len() {
            return;
        }
        match sock.read(&mut buf[got..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => got += n,
        }
    }
    let head = String::from_utf8_lossy(&buf[..got]);
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let (status, kind, body) = if method == "GET" && path == "/fixture" {
        ("200 OK", "text/html; charset=utf-8", FIXTURE)
    } else {
        ("404 Not Found", "text/plain", "not found")
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = sock.write_all(reply.as_bytes()).await;
    let _ = sock.shutdown().await;
}
