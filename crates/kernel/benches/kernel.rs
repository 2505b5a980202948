//! Kernel benchmarks (issue 32): cold start, warm cell round trip, one tool RPC round trip on
//! the host side, memory of an idle kernel. `cargo bench -p mpa-kernel --bench kernel`.
#![expect(
    clippy::unwrap_used,
    reason = "a benchmark's panic is its failure report"
)]

use async_trait::async_trait;
use mpa_kernel::{CellRequest, Helper, KernelConfig, KernelOwner, Kernels, RpcHandler, RpcOutcome};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

struct Echo;

#[async_trait]
impl RpcHandler for Echo {
    async fn call(&self, _tool: &str, args: Value) -> RpcOutcome {
        RpcOutcome {
            outcome: "succeeded".into(),
            text: json!({"success": true, "echo": args}).to_string(),
            error: None,
        }
    }
}

fn cell(scope: &str, code: &str) -> CellRequest {
    CellRequest {
        owner: KernelOwner {
            scope: scope.into(),
            user_key: mpa_redact::UserKey::for_user("bench"),
        },
        code: code.into(),
        reset: false,
        helpers: vec![Helper {
            name: "echo".into(),
            summary: "echo".into(),
            parameters: json!({"type": "object", "properties": {"v": {}}}),
        }],
        handler: Arc::new(Echo),
        cancel: CancellationToken::new(),
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let kernels = Kernels::new(KernelConfig {
        max_idle_kernels: 64,
        ..KernelConfig::new(dir.path(), dir.path().join("code"))
    });
    // Cold start: a new kernel and its first (empty) cell.
    let mut cold = Vec::new();
    for i in 0..20 {
        let t = Instant::now();
        kernels
            .execute(cell(&format!("cold{i}"), "pass"))
            .await
            .unwrap();
        cold.push(t.elapsed());
    }
    kernels.shutdown().await;
    let kernels = Kernels::new(KernelConfig::new(dir.path(), dir.path().join("code")));
    // Warm cell round trip.
    kernels.execute(cell("warm", "x = 0")).await.unwrap();
    let mut warm = Vec::new();
    for _ in 0..500 {
        let t = Instant::now();
        kernels.execute(cell("warm", "x += 1")).await.unwrap();
        warm.push(t.elapsed());
    }
    // Memory of the idle kernel.
    let pgid = kernels.live()[0];
    let status = std::fs::read_to_string(format!("/proc/{pgid}/status")).unwrap();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .unwrap()
        .to_string();
    // One RPC round trip on the host side: a client on the kernel's socket with its token while
    // a cell holds the window open (no Python in the measured path).
    let r = kernels
        .execute(cell(
            "warm",
            "import os\nprint(os.environ['MOVIEPILOT_RPC_SOCKET'])\nprint(os.environ['MOVIEPILOT_RPC_TOKEN'])",
        ))
        .await
        .unwrap();
    let mut lines = r.output.lines();
    let (socket, token) = (
        lines.next().unwrap().to_string(),
        lines.next().unwrap().to_string(),
    );
    let holder = {
        let kernels = kernels.clone();
        tokio::spawn(async move {
            kernels
                .execute(cell("warm", "import time\ntime.sleep(3)"))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rpc = tokio::task::spawn_blocking(move || {
        let s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let line = json!({"tool": "echo", "args": {"v": 1}, "token": token}).to_string() + "\n";
        let mut times = Vec::new();
        let mut reply = String::new();
        // The cell's budget is 50 calls; the rest are answered by the budget refusal, which
        // takes the same path up to the handler.
        for _ in 0..50 {
            let t = Instant::now();
            w.write_all(line.as_bytes()).unwrap();
            reply.clear();
            r.read_line(&mut reply).unwrap();
            times.push(t.elapsed());
        }
        times
    })
    .await
    .unwrap();
    holder.await.unwrap().unwrap();
    // Helper calls from Python, end to end.
    let t = Instant::now();
    kernels
        .execute(cell("warm", "for i in range(50):\n    echo(v=i)"))
        .await
        .unwrap();
    let python_50 = t.elapsed();
    kernels.shutdown().await;
    println!(
        "kernel cold start (new kernel + empty cell), median of 20: {:?}",
        median(cold)
    );
    println!("warm cell round trip, median of 500: {:?}", median(warm));
    println!(
        "RPC round trip, host side (Rust client on the socket), median of 50: {:?}",
        median(rpc)
    );
    println!("50 helper calls from Python, whole cell: {python_50:?}");
    println!("idle kernel memory: {rss}");
}
