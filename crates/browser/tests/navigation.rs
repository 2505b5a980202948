//! The acceptance path on a real Chromium: navigate, snapshot, act by ref, read; screenshots;
//! refused requests; closing.

#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::{PageServer, browsers, chromium, key};
use mpa_browser::{BrowserError, Target, jpeg_size};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goto_snapshot_click_ref_get_content_shows_the_changed_text() {
    if !chromium() {
        return;
    }
    let server = PageServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let b = browsers(dir.path(), server.port, Duration::from_secs(600));
    let s = b.session(&key("s1")).await.unwrap();
    let page = s
        .goto(&format!("{}/fixture", server.base), true, T)
        .await
        .unwrap();
    assert_eq!(page.title, "Fixture");
    let snap = s.snapshot(200, 2000).await.unwrap();
    let button = snap["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "显示结果")
        .unwrap_or_else(|| panic!("no button in {snap}"));
    let r = button["ref"].as_str().unwrap().to_string();
    // A second snapshot keeps the element's ref.
    let again = s.snapshot(200, 2000).await.unwrap();
    assert!(
        again["elements"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["ref"] == r.as_str() && e["name"] == "显示结果")
    );
    assert!(
        s.content(false).await.unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("PENDING")
    );
    s.click(Target::Ref(&r)).await.unwrap();
    let text = s.content(false).await.unwrap();
    let text = text["content"].as_str().unwrap();
    assert!(
        text.contains("BROWSER_OK") && !text.contains("PENDING"),
        "{text}"
    );
    // fill and select by selector, read back by script.
    s.fill(Target::Selector("#name"), "Ann").await.unwrap();
    s.select(Target::Selector("#pick"), "Beta").await.unwrap();
    let v = s
        .evaluate(
            "[document.querySelector('#name').value, document.querySelector('#pick').value]",
            T,
        )
        .await
        .unwrap();
    assert_eq!(v, serde_json::json!(["Ann", "b"]));
    // Unknown refs and ambiguous selectors are named, not guessed.
    assert!(matches!(
        s.click(Target::Ref("e999")).await,
        Err(BrowserError::UnknownRef(_))
    ));
    assert!(matches!(
        s.click(Target::Selector(".twin")).await,
        Err(BrowserError::AmbiguousSelector { count: 2, .. })
    ));
    assert!(matches!(
        s.click(Target::Selector("#nope")).await,
        Err(BrowserError::ElementNotFound(_))
    ));
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screenshot_of_a_selector_is_a_jpeg_of_the_elements_size() {
    if !chromium() {
        return;
    }
    let server = PageServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let b = browsers(dir.path(), server.port, Duration::from_secs(600));
    let s = b.session(&key("s1")).await.unwrap();
    s.goto(&format!("{}/fixture", server.base), true, T)
        .await
        .unwrap();
    let shot = s.screenshot(Some("#captcha")).await.unwrap();
    assert_eq!((shot.width, shot.height), (200, 80));
    assert_eq!(jpeg_size(&shot.jpeg), Some((200, 80)));
    assert!(shot.jpeg.len() <= mpa_browser::SCREENSHOT_MAX_BYTES);
    let view = s.screenshot(None).await.unwrap();
    assert_eq!((view.width, view.height), (1280, 720));
    // A selector that is not unique is refused (no fallback to another element).
    assert!(matches!(
        s.screenshot(Some(".twin")).await,
        Err(BrowserError::AmbiguousSelector { .. })
    ));
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_sessions_browser_process_is_gone() {
    if !chromium() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let b = browsers(dir.path(), 0, Duration::from_secs(600));
    let s = b.session(&key("s1")).await.unwrap();
    let opened = s.open_tab(None).await.unwrap();
    assert_eq!(s.list_tabs().await.unwrap().len(), 2);
    s.close_tab(&opened.tab_id).await.unwrap();
    assert_eq!(s.list_tabs().await.unwrap().len(), 1);
    let pid = s.pid().unwrap() as i32;
    assert!(!live_members(pid).is_empty());
    assert!(b.close(&key("s1")).await);
    assert!(
        !process_group_alive(pid),
        "the browser's processes outlived the session"
    );
    assert!(s.is_closed());
    assert!(matches!(s.list_tabs().await, Ok(_) | Err(_)));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "the profile was not removed"
    );
    // The next use starts a fresh browser.
    let again = b.session(&key("s1")).await.unwrap();
    assert_ne!(again.pid(), Some(pid as u32));
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_browser_is_closed_after_its_ttl() {
    if !chromium() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let b = browsers(dir.path(), 0, Duration::from_millis(400));
    let s = b.session(&key("idle")).await.unwrap();
    let pid = s.pid().unwrap() as i32;
    assert!(
        mpa_test_support::eventually(Duration::from_secs(30), || !process_group_alive(pid)).await
    );
    assert!(b.existing(&key("idle")).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_the_guard_refuses_never_leave_including_redirects() {
    if !chromium() {
        return;
    }
    let server = PageServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let b = browsers(dir.path(), server.port, Duration::from_secs(600));
    let s = b.session(&key("s1")).await.unwrap();
    // The page itself is public (public.test maps to the loopback server in Chromium).
    let public = format!("http://public.test:{}", server.port);
    s.goto(&format!("{public}/fixture"), false, T)
        .await
        .unwrap();
    // Directly: refused before Chromium is asked.
    let direct = s.goto(&format!("{}/secret", server.base), false, T).await;
    assert!(
        matches!(direct, Err(BrowserError::NavigationRefused(_))),
        "{direct:?}"
    );
    // Through a public redirect: refused at the hop.
    let to = format!("{}/secret", server.base);
    let via = s
        .goto(
            &format!(
                "{public}/redirect?to={}",
                url::form_urlencoded::byte_serialize(to.as_bytes()).collect::<String>()
            ),
            false,
            T,
        )
        .await;
    assert!(
        matches!(via, Err(BrowserError::NavigationRefused(ref w)) if w.contains("127.0.0.1")),
        "{via:?}"
    );
    // A page script's fetch is refused the same way.
    let fetched = s
        .evaluate(
            &format!("fetch('{to}').then(r => 'reached', e => 'blocked')"),
            T,
        )
        .await
        .unwrap();
    assert_eq!(fetched, "blocked");
    assert_eq!(
        server.secret_hits.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    // Other schemes are never navigated to.
    assert!(matches!(
        s.goto("file:///etc/passwd", true, T).await,
        Err(BrowserError::NavigationRefused(_))
    ));
    // Allowed explicitly, the same redirect is followed.
    let ok = s
        .goto(
            &format!(
                "{public}/redirect?to={}",
                url::form_urlencoded::byte_serialize(to.as_bytes()).collect::<String>()
            ),
            true,
            T,
        )
        .await
        .unwrap();
    assert!(ok.url.ends_with("/secret"));
    assert_eq!(
        server.secret_hits.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    b.shutdown().await;
}

#[tokio::test]
async fn a_missing_browser_is_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let b = mpa_browser::Browsers::new(
        mpa_browser::BrowserConfig {
            executable: Some(dir.path().join("no-such-chromium")),
            profiles_root: dir.path().join("profiles"),
            idle_ttl: Duration::from_secs(60),
            extra_args: Vec::new(),
        },
        std::sync::Arc::new(crate::common::TestGuard),
    );
    let err = b.session(&key("s")).await.err().unwrap();
    assert_eq!(err.code(), "browser_unavailable");
    assert!(err.to_string().contains("no-such-chromium"), "{err}");
}

/// Whether a live (not zombie) process of the group remains, waiting a little for the killed
/// ones to be reaped by whoever adopted them.
fn process_group_alive(pgid: i32) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let live = live_members(pgid);
        if live.is_empty() || std::time::Instant::now() > deadline {
            if !live.is_empty() {
                eprintln!("live members of group {pgid}: {live:?}");
            }
            return !live.is_empty();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn live_members(pgid: i32) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...
        let Some(after) = stat.rsplit_once(')').map(|(_, a)| a.to_string()) else {
            continue;
        };
        let f: Vec<&str> = after.split_whitespace().collect();
        if f.len() > 2 && f[2] == pgid.to_string() && f[0] != "Z" {
            out.push(stat.chars().take(60).collect());
        }
    }
    out
}
