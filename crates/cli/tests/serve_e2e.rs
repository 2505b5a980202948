//! End-to-end tests of `mpagent serve` as a real process: SIGTERM during a turn, the official
//! `openai` Python client, and the web page in headless Chromium (playwright-core). Tests that need
//! an external program skip with a notice when it is missing, unless `MPA_REQUIRE_ALL_TESTS=1`.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's panic is its failure report"
)]

use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::common;
use common::{ADMIN_TOKEN, API_KEY, Serve, chat_messages, next_frame, request};

fn mpagent(data: &Path, mock: &MockModelServer) -> Command {
    common::serve_command(data, mock)
}

/// Starts `mpagent serve` and waits for its "listening on" line.
async fn serve(data: &Path, mock: &MockModelServer) -> Serve {
    common::serve(mpagent(data, mock)).await
}

use mpa_test_support::external_program as available;

fn runs(program: &str, args: &[&str]) -> bool {
    std::process::Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_during_a_turn_exits_and_snapshots_received_and_unknown() {
    let mock = MockModelServer::start().await;
    mock.push(MockReply::tool_calls(&[
        ("call_echo", "test_echo", json!({"text": "kept"})),
        ("call_sleep", "test_sleep", json!({"ms": 600_000})),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let mut srv = serve(dir.path(), &mock).await;
    assert!(
        srv.stderr
            .lock()
            .unwrap()
            .contains("mpagent user add NAME --admin"),
        "first start explains how to create a user"
    );
    let mut r = request(
        &srv.addr,
        "POST",
        "/api/v1/agent/stream",
        ADMIN_TOKEN,
        &json!({"text": "echo and sleep", "session_id": "term"}),
    )
    .await;
    let (mut echo_done, mut sleep_running) = (false, false);
    while !(echo_done && sleep_running) {
        let f = next_frame(&mut r).await.expect("stream ended early");
        if f["type"] == "tool" {
            echo_done |= f["tool_id"] == "call_echo" && f["status"] == "done";
            sleep_running |= f["tool_id"] == "call_sleep" && f["status"] == "running";
        }
    }
    common::send_signal(&srv.child, libc::SIGTERM);
    // The contract: the process is gone within 10 s of SIGTERM.
    let status = tokio::time::timeout(Duration::from_secs(10), srv.child.wait())
        .await
        .expect("serve did not exit within 10 s of SIGTERM")
        .unwrap();
    assert!(status.success(), "exit status {status:?}");
    let mut last = None;
    while let Some(f) = next_frame(&mut r).await {
        last = Some(f);
    }
    assert_eq!(
        last.unwrap()["type"],
        "done",
        "the stream was closed with done"
    );

    // Stored under the id derived for the static admin token's user (issue 12, item 2).
    let stored_id =
        mpa_core::server_session_id(&mpa_protocol::UserId("admin-token".into()), "term");
    let msgs = chat_messages(dir.path(), &stored_id);
    let outcome = |id: &str| {
        msgs.iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .map(|m| m["outcome"].clone())
    };
    assert_eq!(outcome("call_echo"), Some(json!("succeeded")), "{msgs:#?}");
    assert_eq!(outcome("call_sleep"), Some(json!("unknown")), "{msgs:#?}");
    // Regression (issue 12, item 6): the interruption notice names the shutdown, not the user.
    let notice = msgs.last().unwrap()["content"].as_str().unwrap_or_default();
    assert!(
        notice.contains("stopped because the host was shutting down"),
        "{msgs:#?}"
    );
    assert!(!notice.contains("by the user"), "{notice}");
    let log = srv.stderr.lock().unwrap().clone();
    assert!(log.contains("request"), "request logs present: {log}");
    assert!(
        !log.contains(ADMIN_TOKEN) && !log.contains(API_KEY),
        "no secrets in logs"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openai_python_client_gets_the_agents_answer() {
    let ok = runs("python3", &["-c", "import openai"]);
    if !available("python3 with the `openai` package", ok) {
        return;
    }
    let mock = MockModelServer::start().await;
    mock.push(MockReply::tool_calls(&[(
        "call_1",
        "test_echo",
        json!({"text": "x"}),
    )]));
    mock.push(MockReply::text("Answer one from the agent."));
    mock.push(MockReply::text("Answer two, streamed."));
    let dir = tempfile::tempdir().unwrap();
    let mut srv = serve(dir.path(), &mock).await;
    let script = r#"
import json, os, openai
c = openai.OpenAI(base_url=os.environ["BASE"] + "/v1", api_key=os.environ["KEY"], max_retries=0)
models = [m.id for m in c.models.list()]
r = c.chat.completions.create(model="mpagent", user="py-conv",
    messages=[{"role": "user", "content": "first question"}])
parts = []
for ch in c.chat.completions.create(model="mpagent", user="py-conv", stream=True,
        messages=[{"role": "user", "content": "second question"}]):
    if ch.choices and ch.choices[0].delta.content:
        parts.append(ch.choices[0].delta.content)
print(json.dumps({"models": models, "plain": r.choices[0].message.content,
                  "role": r.choices[0].message.role, "streamed": "".join(parts)}))
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .env("BASE", format!("http://{}", srv.addr))
        .env("KEY", ADMIN_TOKEN)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v,
        json!({"models": ["mpagent"], "plain": "Answer one from the agent.", "role": "assistant",
               "streamed": "Answer two, streamed."})
    );
    // Both calls continued one session: the second model request carries the first exchange.
    let reqs = mock.requests();
    let last = reqs.last().unwrap().to_string();
    assert!(last.contains("first question") && last.contains("Answer one from the agent."));
    srv.child.start_kill().unwrap();
}

fn artifacts_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("artifacts");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Chromium and playwright-core for the page scripts, or `None` (with the skip notice) when one
/// is missing.
fn browser() -> Option<(String, String)> {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let modules = std::env::var("MPA_NODE_MODULES")
        .unwrap_or_else(|_| "/var/cache/mpa-node/node_modules".into());
    let ready = available("node", runs("node", &["--version"]))
        && available("chromium", Path::new(&chromium).exists())
        && available(
            "playwright-core (npm, in MPA_NODE_MODULES)",
            Path::new(&modules).join("playwright-core").exists(),
        );
    ready.then_some((chromium, modules))
}

/// Runs `crates/server/tests/browser/SCRIPT` against the page `srv` serves, signed in as
/// alice, and returns its report once it says `ok` (the test fails with the report otherwise).
async fn page_script(
    (chromium, modules): &(String, String),
    script: &str,
    srv: &Serve,
    shot: &Path,
    extra: &[(&str, &str)],
) -> Value {
    // Runtime first: a build cache shared between checkouts may hold a test compiled elsewhere.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or(env!("CARGO_MANIFEST_DIR").into());
    let script = Path::new(&manifest)
        .join("../server/tests/browser")
        .join(script);
    let mut node = Command::new("node");
    node.arg(&script)
        .env("MPA_URL", format!("http://{}/", srv.addr))
        .env("MPA_USER", "alice")
        .env("MPA_PASS", "alice-password-1")
        .env("MPA_SCREENSHOT", shot)
        .env("MPA_NODE_MODULES", modules)
        .env("CHROMIUM", chromium)
        .envs(extra.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(180), node.output())
        .await
        .expect("browser test hung")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "no report: {stdout} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert_eq!(report["ok"], true, "browser test failed: {report:#}");
    report
}

#[tokio::test(flavor = "multi_thread")]
async fn the_web_page_logs_in_streams_runs_tools_stops_and_reloads_in_chromium() {
    let Some(browser) = browser() else { return };
    let mock = MockModelServer::start().await;
    mock.push(MockReply::tool_calls(&[(
        "call_echo",
        "test_echo",
        json!({"text": "hello"}),
    )]));
    mock.push(
        MockReply::text(
            "The echo tool answered hello, with **bold** emphasis and a list:\n\n- one\n- two",
        )
        .chunk_delay(Duration::from_millis(150)),
    );
    mock.push(MockReply::tool_calls(&[(
        "call_long",
        "test_sleep",
        json!({"ms": 600_000}),
    )]));
    let dir = tempfile::tempdir().unwrap();
    common::add_user(mpagent(dir.path(), &mock), "alice", "alice-password-1").await;

    let mut srv = serve(dir.path(), &mock).await;
    let shot = artifacts_dir().join("web-chat.png");
    let _ = std::fs::remove_file(&shot);
    page_script(&browser, "chat.mjs", &srv, &shot, &[]).await;
    assert!(shot.exists());
    eprintln!("screenshot of the chat: {}", shot.display());
    let mut body = Vec::new();
    let mut r = request(&srv.addr, "GET", "/healthz", ADMIN_TOKEN, &json!({})).await;
    r.read_to_end(&mut body).await.unwrap();
    assert!(String::from_utf8_lossy(&body).contains("\"ok\""));
    srv.child.start_kill().unwrap();
}

/// The markdown answer of the page test: everything people write, and payloads that must stay
/// text.
const MARKDOWN_ANSWER: &str = "Here are your subscriptions, see https://example.org/docs: details below.\n\n\
| Title | Year | Status |\n|---|---:|---|\n| 星际穿越 | 2014 | ~~paused~~ active |\n| The Matrix | 1999 | pending |\n\n\
- Movies\n  - Interstellar\n  - The Matrix\n- [x] checked the list\n- [ ] download the missing ones\n\n\
```json\n{\"subscriptions\": 2}\n```\n\n\
<img src=x onerror=window.__pwned=true> and [click](javascript:window.__pwned=true)\n\n\
<script>window.__pwned = true</script>\n";

/// axe-core for the accessibility checks: `MPA_AXE`, else `axe-core` next to playwright-core.
fn axe_core(modules: &str) -> Option<String> {
    let path =
        std::env::var("MPA_AXE").unwrap_or_else(|_| format!("{modules}/axe-core/axe.min.js"));
    available(
        "axe-core (npm, in MPA_NODE_MODULES or MPA_AXE)",
        Path::new(&path).exists(),
    )
    .then_some(path)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_web_page_shows_the_plan_a_table_and_copyable_code_safely_after_reload_in_en_and_zh_with_no_serious_axe_violation()
 {
    let Some(browser) = browser() else { return };
    let Some(axe) = axe_core(&browser.1) else {
        return;
    };
    let mock = MockModelServer::start().await;
    let payload = "<img src=x onerror=window.__pwned=true><script>window.__pwned=true</script>";
    mock.push(MockReply::tool_calls(&[
        (
            "call_plan",
            "update_plan",
            json!({"objective": "List the subscriptions <b>now</b>", "steps": [
                {"step": "Read the subscription list", "status": "completed",
                 "evidence": "2 subscriptions returned"},
                {"step": "Summarise them", "status": "in_progress"}]}),
        ),
        (
            "call_list",
            "test_result",
            json!({"content": {"success": true, "data": [{"name": payload}, {"name": "The Matrix"}]}}),
        ),
    ]));
    mock.push(MockReply::text(MARKDOWN_ANSWER).chunk_delay(Duration::from_millis(40)));
    mock.push(MockReply::tool_calls(&[(
        "call_long",
        "test_sleep",
        json!({"ms": 600_000}),
    )]));
    let dir = tempfile::tempdir().unwrap();
    common::add_user(mpagent(dir.path(), &mock), "alice", "alice-password-1").await;
    let mut srv = serve(dir.path(), &mock).await;
    let shot = artifacts_dir().join("web-answer.png");
    let _ = std::fs::remove_file(&shot);
    let report = page_script(&browser, "answer.mjs", &srv, &shot, &[("MPA_AXE", &axe)]).await;
    assert!(shot.exists());
    eprintln!(
        "page load: {} ; axe: {} ; screenshots: {}",
        report["load"],
        report["axe"],
        shot.display()
    );
    srv.child.start_kill().unwrap();
}

/// Every file under `dir` named `name`, recursively.
fn files_named(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_named(&p, name));
        } else if p.file_name().is_some_and(|n| n == name) {
            out.push(p);
        }
    }
    out
}

/// The text of a model request's messages, content parts included.
fn request_text(req: &Value) -> String {
    req["messages"].to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_web_page_sends_attachments_approves_memory_and_only_an_admin_switches_the_persona_in_chromium()
 {
    let Some(browser) = browser() else { return };
    let Some(axe) = axe_core(&browser.1) else {
        return;
    };
    let mock = MockModelServer::start().await;
    mock.push(MockReply::text("A poster and a text file."));
    let dir = tempfile::tempdir().unwrap();
    common::add_user(mpagent(dir.path(), &mock), "alice", "alice-password-1").await;
    let (code, _, err) = user_cmd(
        dir.path(),
        &mock,
        &["add", "root", "--admin", "--password-stdin"],
        "root-password-1\n",
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let mut cmd = mpagent(dir.path(), &mock);
    cmd.env("LLM_SUPPORT_IMAGE_INPUT", "true");
    let mut srv = common::serve(cmd).await;

    // A USER.md entry, and a background review's proposal to rewrite it (staged as the review
    // stages it: a file in the user's `.pending` directory, whose format is stable).
    let (old, new) = ("Prefers 1080p releases", "Prefers 4K releases");
    let token = login(&srv.addr, "alice", "alice-password-1").await.unwrap();
    let (status, v) = call(
        &srv.addr,
        "POST",
        "/api/v1/agent/memory/user",
        &token,
        &json!({"action": "add", "content": old}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let user_md = files_named(dir.path(), "USER.md")
        .into_iter()
        .find(|p| std::fs::read_to_string(p).unwrap().contains(old))
        .expect("the entry is in a USER.md");
    let pending = user_md.parent().unwrap().join(".pending");
    std::fs::create_dir_all(&pending).unwrap();
    let id = "0123456789abcdef0123456789abcdef";
    std::fs::write(
        pending.join(format!("{id}.json")),
        json!({"id": id, "target": "user", "batch": false, "review_id": "review-1",
               "created_at": "2026-12-03T22:00:00Z", "previous": [old],
               "operations": [{"action": "replace", "old_text": old, "content": new}]})
        .to_string(),
    )
    .unwrap();

    // A personal skill of alice's, written by hand (no ownership record): the page pins it.
    let key = user_md.parent().unwrap().file_name().unwrap();
    let data_root = user_md.ancestors().nth(5).unwrap();
    let skill_md = data_root
        .join("agent/runtime/learning/users")
        .join(key)
        .join("skills/kept/SKILL.md");
    std::fs::create_dir_all(skill_md.parent().unwrap()).unwrap();
    std::fs::write(
        &skill_md,
        "---\nname: kept\ndescription: How this household names its shows\n---\n# kept\n\n1. check the library\n",
    )
    .unwrap();

    let shot = artifacts_dir().join("web-views.png");
    let _ = std::fs::remove_file(&shot);
    let report = page_script(
        &browser,
        "views.mjs",
        &srv,
        &shot,
        &[
            ("MPA_AXE", &axe),
            ("MPA_ROLE", "user"),
            ("MPA_PROPOSAL_OLD", old),
            ("MPA_PROPOSAL_NEW", new),
            ("MPA_SKILL", "kept"),
        ],
    )
    .await;
    eprintln!("axe: {}", report["axe"]);
    // The click reached the host: the skill is pinned (the background review's refusal of a
    // pinned skill is shown over HTTP in mpa-server's settings tests).
    let (_, skills) = call(
        &srv.addr,
        "GET",
        "/api/v1/agent/skills",
        &token,
        &json!(null),
    )
    .await;
    let kept = skills["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "kept")
        .cloned()
        .unwrap_or_else(|| panic!("{skills}"));
    assert_eq!(kept["pinned"], true, "{kept} / {}", report["pinStatus"]);
    // The image reached the model as an image part, the text file as a note naming it.
    let reqs = mock.requests();
    let asked = reqs
        .iter()
        .find(|r| request_text(r).contains("What is in these files?"))
        .expect("the model was asked");
    let text = request_text(asked);
    assert!(text.contains("image_url"), "{text}");
    assert!(text.contains(".txt"), "{text}");
    assert!(
        std::fs::read_to_string(&user_md).unwrap().contains(new),
        "the approval reached USER.md"
    );

    // An admin creates and switches the persona on the page.
    let (name, style) = (
        "Harbour pilot",
        "Answer briefly, like a harbour pilot on the radio.",
    );
    let admin_shot = artifacts_dir().join("web-persona-admin.png");
    page_script(
        &browser,
        "views.mjs",
        &srv,
        &admin_shot,
        &[
            ("MPA_AXE", &axe),
            ("MPA_ROLE", "admin"),
            ("MPA_USER", "root"),
            ("MPA_PASS", "root-password-1"),
            ("MPA_PERSONA_NAME", name),
            ("MPA_PERSONA_STYLE", style),
        ],
    )
    .await;

    // alice's next session: the approved entry and the persona are in its system prompt.
    mock.clear_requests();
    mock.push(MockReply::text("ok"));
    let mut r = request(
        &srv.addr,
        "POST",
        "/api/v1/agent/stream",
        &token,
        &json!({"text": "hello again", "session_id": "next"}),
    )
    .await;
    while let Some(f) = next_frame(&mut r).await {
        if f["type"] == "done" {
            break;
        }
    }
    let system = mock.requests()[0]["messages"][0]["content"].to_string();
    assert!(system.contains(new) && !system.contains(old), "{system}");
    assert!(system.contains(style), "{system}");
    srv.child.start_kill().unwrap();
}

const SUMMARY: &str = "The user asked numbered questions; each got a long answer.";

/// A summariser request (the host's compaction) starts with the summariser's instructions.
fn is_summariser(req: &Value) -> bool {
    req["messages"][0]["content"] == mpa_core::SUMMARY_PROMPT
}

#[tokio::test(flavor = "multi_thread")]
async fn the_web_page_marks_a_compaction_while_streaming_and_keeps_every_line_in_chromium() {
    let Some(browser) = browser() else { return };
    let mock = MockModelServer::start().await;
    // The host's summariser request is the one whose first message is the summariser's
    // instructions; every other request is answered "answer N: " and ≈ 2,500 tokens, so six
    // turns outgrow a 16 K window.
    mock.set_responder(|req| {
        if is_summariser(req) {
            return MockReply::text(SUMMARY);
        }
        let question = mpa_test_support::last_user_text(req);
        let n = question.trim_start_matches("question ");
        MockReply::text(&format!("answer {n}: {}", "长".repeat(2500)))
            .chunk_delay(Duration::from_millis(5))
    });
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = mpagent(dir.path(), &mock);
    // Not in the model catalogue: the 16 K window from LLM_MAX_CONTEXT_TOKENS applies.
    cmd.env("LLM_MODEL", "house-model-x")
        .env("LLM_MAX_CONTEXT_TOKENS", "16");
    common::add_user(mpagent(dir.path(), &mock), "alice", "alice-password-1").await;
    let mut srv = common::serve(cmd).await;
    let shot = artifacts_dir().join("web-compaction-zh.png");
    let _ = std::fs::remove_file(&shot);
    let report = page_script(
        &browser,
        "compaction.mjs",
        &srv,
        &shot,
        &[("MPA_TURNS", "6"), ("MPA_SUMMARY", SUMMARY)],
    )
    .await;
    let summariser_calls = mock.requests().iter().filter(|r| is_summariser(r)).count();
    assert!(summariser_calls >= 1, "the conversation outgrew the window");
    // The page showed as many markers as the stored chat has context lines.
    let token = login(&srv.addr, "alice", "alice-password-1").await.unwrap();
    let (status, list) = call(
        &srv.addr,
        "GET",
        "/api/v1/agent/sessions",
        &token,
        &json!({}),
    )
    .await;
    assert_eq!(status, 200, "{list}");
    let id = list["sessions"][0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/api/v1/agent/sessions/{id}");
    let (status, detail) = call(&srv.addr, "GET", &path, &token, &json!({})).await;
    assert_eq!(status, 200, "{detail}");
    let stored = detail["display_messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["role"] == "context")
        .count();
    assert!(stored >= 1, "{detail:#}");
    assert_eq!(report["markers_shown"], stored, "{report:#}");
    eprintln!(
        "screenshot of the compacted chat in Chinese: {}",
        shot.display()
    );
    srv.child.start_kill().unwrap();
}

/// One HTTP exchange over a raw socket: status and JSON body (`Null` when there is none).
async fn call(addr: &str, method: &str, path: &str, token: &str, body: &Value) -> (u16, Value) {
    let mut r = request(addr, method, path, token, body).await;
    let mut raw = String::new();
    r.read_to_string(&mut raw).await.unwrap();
    let status = raw
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = raw
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    (status, body)
}

async fn login(addr: &str, name: &str, password: &str) -> Option<String> {
    let (status, v) = call(
        addr,
        "POST",
        "/api/v1/login",
        "none",
        &json!({"username": name, "password": password}),
    )
    .await;
    (status == 200).then(|| v["token"].as_str().unwrap().to_string())
}

async fn me(addr: &str, token: &str) -> u16 {
    call(addr, "GET", "/api/v1/me", token, &json!({})).await.0
}

/// `mpagent user …` with `stdin` as its standard input; (exit code, stdout, stderr).
async fn user_cmd(
    data: &Path,
    mock: &MockModelServer,
    args: &[&str],
    stdin: &str,
) -> (i32, String, String) {
    let mut cmd = mpagent(data, mock);
    cmd.arg("user").args(args).stdin(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .await
        .unwrap();
    let out = child.wait_with_output().await.unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Regression (issue 12, item 4): `mpagent user passwd` left every token valid, and there was no
/// way to delete a user or log out their sessions. A password change now logs the user out
/// everywhere unless `--keep-sessions`; `user revoke` and `user delete` exist.
#[tokio::test(flavor = "multi_thread")]
async fn user_passwd_revokes_sessions_unless_kept_and_revoke_and_delete_log_out() {
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (code, _, err) = user_cmd(
        d,
        &mock,
        &["add", "alice", "--password-stdin"],
        "first-password\n",
    )
    .await;
    assert_eq!(code, 0, "{err}");
    user_cmd(
        d,
        &mock,
        &["add", "bob", "--password-stdin"],
        "bobs-password\n",
    )
    .await;
    let mut srv = serve(d, &mock).await;
    let a = &srv.addr;
    let t1 = login(a, "alice", "first-password").await.unwrap();
    let bob = login(a, "bob", "bobs-password").await.unwrap();

    // A too-short password changes nothing.
    let (code, _, err) = user_cmd(
        d,
        &mock,
        &["passwd", "alice", "--password-stdin"],
        "short\n",
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("at least 8 characters"), "{err}");
    assert_eq!(me(a, &t1).await, 200);

    let (code, out, err) = user_cmd(
        d,
        &mock,
        &["passwd", "alice", "--password-stdin", "--keep-sessions"],
        "second-password\n",
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("existing sessions kept"), "{out}");
    assert_eq!(me(a, &t1).await, 200, "kept");
    assert!(login(a, "alice", "first-password").await.is_none());
    let t2 = login(a, "alice", "second-password").await.unwrap();

    let (code, out, _) = user_cmd(
        d,
        &mock,
        &["passwd", "alice", "--password-stdin"],
        "third-password\n",
    )
    .await;
    assert_eq!(code, 0);
    assert!(out.contains("2 session(s) logged out"), "{out}");
    assert_eq!((me(a, &t1).await, me(a, &t2).await), (401, 401));
    assert_eq!(me(a, &bob).await, 200, "other users keep their sessions");

    let t3 = login(a, "alice", "third-password").await.unwrap();
    let (code, out, _) = user_cmd(d, &mock, &["revoke", "alice"], "").await;
    assert_eq!(code, 0);
    assert!(out.contains("1 session(s) of alice logged out"), "{out}");
    assert_eq!(me(a, &t3).await, 401);

    let t4 = login(a, "alice", "third-password").await.unwrap();
    let (code, out, _) = user_cmd(d, &mock, &["delete", "alice"], "").await;
    assert_eq!(code, 0);
    assert!(out.contains("deleted user alice"), "{out}");
    assert_eq!(me(a, &t4).await, 401);
    assert!(login(a, "alice", "third-password").await.is_none());
    let (_, list, _) = user_cmd(d, &mock, &["list"], "").await;
    assert!(!list.contains("alice") && list.contains("bob"), "{list}");
    for args in [
        &["delete", "alice"][..],
        &["revoke", "alice"],
        &["passwd", "alice", "--password-stdin"],
    ] {
        let (code, _, err) = user_cmd(d, &mock, args, "fourth-password\n").await;
        assert_ne!(code, 0, "{args:?}");
        assert!(err.contains("no such user: alice"), "{args:?}: {err}");
    }
    assert_eq!(me(a, &bob).await, 200);
    srv.child.start_kill().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_web_page_steers_a_running_task_and_keeps_the_order_after_a_reload_in_chromium() {
    let Some(browser) = browser() else { return };
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    // The running command waits on this FIFO until the page script writes to it.
    let fifo = dir.path().join("release.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    mock.push(MockReply::text_and_tool_calls(
        "Looking at the new releases.",
        &[(
            "call_wait",
            "execute_command",
            json!({"action": "run", "command": format!("cat {}", fifo.display())}),
        )],
    ));
    mock.push(MockReply::text(
        "Only the 4K releases are left: two titles.",
    ));
    // An admin: `execute_command` is admin-only.
    let mut add = mpagent(dir.path(), &mock);
    add.args(["user", "add", "alice", "--admin", "--password-stdin"])
        .stdin(Stdio::piped());
    let mut child = add.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"alice-password-1\n").await.unwrap();
    drop(stdin);
    assert!(child.wait().await.unwrap().success());

    let mut srv = serve(dir.path(), &mock).await;
    let shot = artifacts_dir().join("web-steering.png");
    let _ = std::fs::remove_file(&shot);
    let fifo_path = fifo.display().to_string();
    let report = page_script(
        &browser,
        "steering.mjs",
        &srv,
        &shot,
        &[("MPA_FIFO", fifo_path.as_str())],
    )
    .await;
    assert!(shot.exists(), "{report}");
    eprintln!("screenshots of steering: {}", shot.display());
    // The model saw the message in the request right after the command's result.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    let last = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let block: Value = serde_json::from_str(last["content"].as_str().unwrap()).unwrap();
    assert_eq!(block["message"], "只要 4K 的");
    srv.child.start_kill().unwrap();
}
