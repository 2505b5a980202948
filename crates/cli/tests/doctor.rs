//! `mpagent doctor` as a real process: its whole output for the five situations a user meets —
//! all good, no URL, a wrong secret key, MoviePilot down, and a MoviePilot without an OpenAPI —
//! and its exit code. Addresses and document fingerprints vary per run and are filtered.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common;
use mpa_eval::{FakeConfig, FakeHandle, FakeMoviePilot, OpenApiServing};

const SECRET: &str = "fake-moviepilot-secret-for-doctor";

async fn fake(openapi: OpenApiServing) -> FakeHandle {
    let mut cfg = FakeConfig::new(SECRET);
    cfg.openapi = openapi;
    FakeMoviePilot::start(cfg, common::demo_world())
        .await
        .unwrap()
}

/// `mpagent doctor` with exactly these MoviePilot settings: (exit code, stdout).
async fn doctor(url: Option<&str>, key: Option<&str>) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mpagent"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .arg("--data-dir")
        .arg(dir.path())
        .arg("doctor");
    if let Some(u) = url {
        cmd.env("MOVIEPILOT_URL", u);
    }
    if let Some(k) = key {
        cmd.env("MOVIEPILOT_SECRET_KEY", k);
    }
    let out = cmd.output().await.unwrap();
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "doctor opens nothing in the data directory"
    );
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

/// The output with what varies per run replaced: loopback ports and document fingerprints.
fn stable(out: &str) -> String {
    let mut s = String::new();
    let mut rest = out;
    loop {
        let port = rest.find("http://127.0.0.1:");
        let print = rest.find("OpenAPI ");
        let next = [port, print].into_iter().flatten().min();
        let Some(at) = next else {
            s.push_str(rest);
            return s;
        };
        s.push_str(&rest[..at]);
        if Some(at) == port {
            let after = &rest[at + "http://127.0.0.1:".len()..];
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            s.push_str("http://127.0.0.1:[port]");
            rest = &after[digits..];
        } else {
            let after = &rest[at + "OpenAPI ".len()..];
            let hex = after.bytes().take_while(u8::is_ascii_hexdigit).count();
            if hex == 12 {
                s.push_str("OpenAPI [fingerprint]");
                rest = &after[hex..];
            } else {
                s.push_str("OpenAPI ");
                rest = after;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_all_good() {
    let f = fake(OpenApiServing::Catalogue).await;
    let (code, out) = doctor(Some(&f.url()), Some(SECRET)).await;
    assert_eq!(code, 0, "{out}");
    insta::assert_snapshot!(stable(&out));
    assert!(
        f.ledger()
            .iter()
            .all(|a| a.operation_id.as_deref() == Some("dashboard.cpu"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_no_url() {
    let (code, out) = doctor(None, Some(SECRET)).await;
    assert_eq!(code, 1, "{out}");
    insta::assert_snapshot!(stable(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_wrong_key() {
    let f = fake(OpenApiServing::Catalogue).await;
    let (code, out) = doctor(Some(&f.url()), Some("not-the-secret")).await;
    assert_eq!(code, 1, "{out}");
    insta::assert_snapshot!(stable(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_moviepilot_down() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (code, out) = doctor(Some(&url), Some(SECRET)).await;
    assert_eq!(code, 1, "{out}");
    insta::assert_snapshot!(stable(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_no_openapi() {
    let f = fake(OpenApiServing::NotServed).await;
    let (code, out) = doctor(Some(&f.url()), Some(SECRET)).await;
    assert_eq!(code, 0, "usable with warnings: {out}");
    insta::assert_snapshot!(stable(&out));
}
