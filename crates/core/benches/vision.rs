//! The host's cost of the agent's eyes (issue 31): `view_image` from Base64, from a file and
//! from a loopback HTTP server (address check, client built for the checked address, fetch,
//! header probe), and the projection of tool images into one model request (the scan of a
//! transcript without images, and one with a 700 KiB image: the Base64 data URL is built per
//! request). Model time is not included.
//! Run: `cargo bench -p mpa-core --bench vision`.
#![expect(clippy::unwrap_used, reason = "a bench's panic is its failure report")]

use base64::Engine;
use divan::Bencher;
use mpa_core::file_boundary::FileBoundary;
use mpa_core::net_guard::NetGuard;
use mpa_core::tools::{Tool, ToolContext, typed, view_image};
use mpa_core::vision::projection::project;
use mpa_protocol::{Actor, ImageBlock, ImageDetail, ImageMime, Message, Outcome, ToolCall, UserId};
use serde_json::json;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn main() {
    divan::main();
}

/// A PNG header claiming 1000×700 pixels, padded to `len` bytes (the probe reads the header).
fn png_of(len: usize) -> Vec<u8> {
    let mut b = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13];
    b.extend_from_slice(b"IHDR");
    b.extend_from_slice(&1000u32.to_be_bytes());
    b.extend_from_slice(&700u32.to_be_bytes());
    b.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    b.resize(len, 0);
    b
}

fn actor() -> Actor {
    Actor {
        user_id: UserId("bench".into()),
        user_name: "bench".into(),
        is_admin: true,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn tool(net: NetGuard, dir: &std::path::Path) -> Arc<dyn Tool> {
    typed(view_image::ViewImage {
        files: FileBoundary::new(dir, dir),
        net,
    })
}

async fn run(tool: &Arc<dyn Tool>, args: serde_json::Value) {
    let out = tool
        .prepare(args)
        .unwrap()
        .run(ToolContext::detached(actor(), "s", "c"))
        .await;
    assert_eq!(out.images().len(), 1, "{}", out.content);
}

#[divan::bench(args = [16 * 1024, 700 * 1024])]
fn view_image_from_base64(b: Bencher, len: usize) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let tool = tool(NetGuard::default(), dir.path());
    let data = base64::engine::general_purpose::STANDARD.encode(png_of(len));
    b.bench(|| rt.block_on(run(&tool, json!({"image_data": data}))));
}

#[divan::bench(args = [16 * 1024, 700 * 1024])]
fn view_image_from_file(b: Bencher, len: usize) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("poster.png");
    std::fs::write(&path, png_of(len)).unwrap();
    let tool = tool(NetGuard::default(), dir.path());
    b.bench(|| rt.block_on(run(&tool, json!({"file_path": path}))));
}

/// A server on 127.0.0.2 (trusted as public for the bench) answering every request with the image.
async fn serve(body: Vec<u8>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let body = Arc::new(body);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let body = Arc::clone(&body);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let h = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(h.as_bytes()).await;
                let _ = sock.write_all(&body).await;
            });
        }
    });
    addr
}

#[divan::bench(args = [16 * 1024, 700 * 1024])]
fn view_image_from_loopback_url(b: Bencher, len: usize) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let addr = rt.block_on(serve(png_of(len)));
    let net = NetGuard::default().trusting(addr.ip());
    let tool = tool(net, dir.path());
    let url = format!("http://{addr}/poster.png");
    b.bench(|| rt.block_on(run(&tool, json!({"url": url}))));
}

/// A conversation of `n` messages: user, then batches of one call and its result; the last
/// result carries an image of `image` bytes (none when 0).
fn transcript(n: usize, image: usize) -> Vec<Message> {
    let mut out = vec![Message::user("look at the release posters")];
    let mut i = 0;
    while out.len() + 2 <= n {
        out.push(Message::assistant(
            "",
            vec![ToolCall {
                id: format!("c{i}"),
                name: "view_image".into(),
                arguments: "{}".into(),
            }],
        ));
        out.push(Message::tool(
            format!("c{i}"),
            "view_image",
            r#"{"success":true,"mime_type":"image/png","width":1000,"height":700}"#,
            Outcome::Succeeded,
        ));
        i += 1;
    }
    if image > 0
        && let Some(last) = out.last_mut()
    {
        last.images.push(ImageBlock::new(
            png_of(image),
            ImageMime::Png,
            ImageDetail::Auto,
        ));
    }
    out
}

#[divan::bench(args = [(200, 0), (200, 700 * 1024), (2000, 0), (2000, 700 * 1024)])]
fn projection_per_request(b: Bencher, (n, image): (usize, usize)) {
    let messages = transcript(n, image);
    b.bench(|| {
        let p = project(&messages, None);
        assert_eq!(p.observed, image > 0);
        p
    });
}
