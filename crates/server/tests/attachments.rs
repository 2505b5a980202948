//! Attachments on the web API (issue 29 item 4, spec runtime.md §14.1): upload, owner-only
//! download, images reaching the model as image parts, files described to it, oversize and path
//! tricks refused or made harmless.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::{Env, Frames, assert_envelope, raw_exchange};
use mpa_test_support::MockReply;
use reqwest::StatusCode;
use serde_json::{Value, json};

const BOUNDARY: &str = "mpa-test-boundary-7c1d";
/// A PNG signature and a little more: what the sniff looks at.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01";

fn form(name: &str, bytes: &[u8]) -> Vec<u8> {
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"session_id\"\r\n\r\ns-att\r\n\
         --{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
         Content-Type: text/plain\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    body
}

async fn upload(env: &Env, token: &str, name: &str, bytes: &[u8]) -> (StatusCode, Value) {
    let r = env
        .http
        .post(env.url("/api/v1/agent/upload"))
        .bearer_auth(token)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(form(name, bytes))
        .send()
        .await
        .unwrap();
    let s = r.status();
    (s, r.json().await.unwrap_or(Value::Null))
}

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upload_is_typed_by_content_stored_safely_and_only_its_owner_fetches_it() {
    let env = Env::start().await;
    let alice = env.user("alice", "password", false).await;
    let bob = env.user("bob", "password", false).await;
    // A PNG sent with a text type and a name that climbs out of any directory.
    let (s, a) = upload(&env, &alice, "../../x", PNG).await;
    assert_eq!(s, StatusCode::OK, "{a}");
    assert_eq!(a["kind"], "image");
    assert_eq!(a["mime_type"], "image/png");
    assert_eq!(a["name"], "x");
    assert_eq!(a["status"], "ready");
    assert_eq!(a["size"], PNG.len());
    let id = a["id"].as_str().unwrap();
    assert_eq!(a["ref"], format!("attachment:{id}"));
    assert!(a.get("local_path").is_none(), "{a}");
    // Nothing was written under the name the client chose, anywhere near the data directory.
    let root = env.dir.path();
    assert!(!root.join("x").exists() && !root.parent().unwrap().join("x").exists());
    let stored = files_under(root);
    let file = stored
        .iter()
        .find(|p| p.file_name().unwrap().to_string_lossy() == id)
        .unwrap_or_else(|| panic!("no stored file named by its id: {stored:?}"));
    assert!(file.starts_with(root.join("agent/runtime/attachments")));

    let r = env
        .http
        .get(env.url(a["url"].as_str().unwrap()))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    assert_eq!(r.bytes().await.unwrap().as_ref(), PNG);

    // Another user: exactly a missing file.
    let (s, v) = env.get(&bob, &format!("/api/v1/agent/file/{id}")).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["error"]["code"], "attachment_not_found");
    // …and it cannot be sent to the model in bob's name either.
    let r = env
        .stream(&bob, json!({"text": "what is this", "images": [a.clone()]}))
        .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(env.mock.request_count(), 0);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_attached_image_reaches_the_model_as_an_image_part_and_a_file_as_a_note() {
    let env = Env::start().await;
    let alice = env.user("alice", "password", false).await;
    let (_, image) = upload(&env, &alice, "poster.png", PNG).await;
    let (s, text) = upload(
        &env,
        &alice,
        "subs.srt",
        "1\n00:00:01 --> 00:00:02\n你好\n".as_bytes(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(text["kind"], "file");
    assert_eq!(text["mime_type"], "text/plain");
    env.mock.push(MockReply::text("A poster."));
    let frames = Frames::new(
        env.stream(
            &alice,
            json!({"text": "what is this", "session_id": "s-att",
                   "images": [image], "files": [text["ref"]]}),
        )
        .await,
    )
    .all()
    .await;
    assert_eq!(frames.last().unwrap()["status"], "completed", "{frames:?}");
    let req = &env.mock.requests()[0];
    let user = req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap();
    let parts = user["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{user}"));
    let url = parts
        .iter()
        .find(|p| p["type"] == "image_url")
        .unwrap_or_else(|| panic!("no image part: {user}"))["image_url"]["url"]
        .as_str()
        .unwrap();
    assert!(url.starts_with("data:image/png;base64,"), "{url}");
    let said = parts
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect::<String>();
    assert!(
        said.contains("what is this") && said.contains("subs.srt"),
        "{said}"
    );
    assert!(said.contains(text["ref"].as_str().unwrap()), "{said}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_image_input_the_model_gets_a_note_instead_of_the_image() {
    let env = Env::start_agent(|c| c.support_image_input = false).await;
    let alice = env.user("alice", "password", false).await;
    let (_, image) = upload(&env, &alice, "poster.png", PNG).await;
    env.mock.push(MockReply::text("ok"));
    Frames::new(
        env.stream(&alice, json!({"text": "look", "images": [image["ref"]]}))
            .await,
    )
    .all()
    .await;
    let said = mpa_test_support::last_user_text(&env.mock.requests()[0]);
    assert!(said.contains("image(s) attached but not sent"), "{said}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn oversize_uploads_get_413_with_the_limit_named() {
    let env = Env::start().await;
    let alice = env.user("alice", "password", false).await;
    // Declared too large: refused before the body is read.
    let head = format!(
        "POST /api/v1/agent/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alice}\r\n\
         Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: 40000000\r\n\r\n"
    );
    let answer = raw_exchange(&env, head.as_bytes()).await;
    assert_envelope(&answer, 413, "attachment_too_large");
    assert!(answer.2.contains("32 MiB"), "{}", answer.2);
    // A file one byte over, inside a body the framing allowance lets through: counted and refused.
    let big = vec![b'a'; 32 * 1024 * 1024 + 1];
    let (s, v) = upload(&env, &alice, "big.txt", &big).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(v["error"]["code"], "attachment_too_large");
    assert!(files_under(&env.dir.path().join("agent/runtime/attachments")).is_empty());
    // An empty form field and a form without a file.
    let (s, v) = upload(&env, &alice, "empty.txt", b"").await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("empty_file"))
    );
    env.shutdown().await;
}

/// The image part of the last user message of a model request, or `None`; and its text.
fn user_image(req: &Value) -> (Option<String>, String) {
    let user = req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user" && m["content"].is_array())
        .cloned()
        .unwrap_or_else(|| panic!("no user message with parts: {req}"));
    let parts = user["content"].as_array().unwrap();
    let url = parts
        .iter()
        .find(|p| p["type"] == "image_url")
        .map(|p| p["image_url"]["url"].as_str().unwrap().to_string());
    let text = parts.iter().filter_map(|p| p["text"].as_str()).collect();
    (url, text)
}

/// Regression: an attached image was turned into a data URL before the turn, so the chat row
/// (transcript and display) held the image bytes. Now the chat keeps the reference, every model
/// request carries the image itself, the page shows the attachment after a reload, and once the
/// file is gone the model reads a note instead.
#[tokio::test(flavor = "multi_thread")]
async fn attached_images_were_stored_as_data_urls_in_the_chat_row() {
    let env = Env::start().await;
    let alice = env.user("alice", "password", false).await;
    let (_, image) = upload(&env, &alice, "poster.png", PNG).await;
    let reference = image["ref"].as_str().unwrap().to_string();
    let say =
        |text: &str, images: Value| json!({"text": text, "session_id": "s-img", "images": images});
    env.mock.push(MockReply::text("A poster."));
    Frames::new(
        env.stream(&alice, say("what is this", json!([image])))
            .await,
    )
    .all()
    .await;
    env.mock.push(MockReply::text("Still a poster."));
    Frames::new(env.stream(&alice, say("and now?", json!([]))).await)
        .all()
        .await;
    let detail = env.wait_idle(&alice, "s-img").await;
    let reqs = env.mock.requests();
    for req in &reqs {
        let (url, _) = user_image(req);
        assert!(
            url.as_deref()
                .is_some_and(|u| u.starts_with("data:image/png;base64,")),
            "every request carries the image: {url:?}"
        );
    }
    // The stored chat: the reference, never the bytes.
    let rows = env.chat_rows();
    let (_, _, transcript, display) = rows
        .iter()
        .find(|r| r.0.ends_with("s-img"))
        .unwrap_or_else(|| panic!("no chat row: {rows:?}"));
    for stored in [transcript, display] {
        assert!(
            !stored.contains("data:image")
                && !stored.contains("base64")
                && !stored.contains("iVBORw0KGgo"),
            "{stored}"
        );
    }
    assert!(transcript.contains(&reference), "{transcript}");
    // After a reload the page gets the attachment to show.
    let first = &detail["display_messages"][0];
    assert_eq!(first["attachments"][0]["url"], image["url"], "{detail}");
    let (s, _) = env.get(&alice, image["url"].as_str().unwrap()).await;
    assert_eq!(s, StatusCode::OK);

    // The file is gone: the model reads a note where the image was.
    for f in files_under(&env.dir.path().join("agent/runtime/attachments")) {
        std::fs::remove_file(f).unwrap();
    }
    env.mock.clear_requests();
    env.mock.push(MockReply::text("I cannot see it any more."));
    Frames::new(env.stream(&alice, say("look again", json!([]))).await)
        .all()
        .await;
    let (url, text) = user_image(&env.mock.requests()[0]);
    assert_eq!(url, None);
    assert!(text.contains("no longer available"), "{text}");

    // An image a client sends inline is stored as an attachment and kept by reference too.
    env.mock.push(MockReply::text("Another poster."));
    let inline = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB";
    Frames::new(
        env.stream(
            &alice,
            json!({"text": "and this", "session_id": "s-inline", "images": [inline]}),
        )
        .await,
    )
    .all()
    .await;
    env.wait_idle(&alice, "s-inline").await;
    let rows = env.chat_rows();
    let (_, _, transcript, _) = rows.iter().find(|r| r.0.ends_with("s-inline")).unwrap();
    assert!(!transcript.contains("data:image"), "{transcript}");
    assert!(transcript.contains("attachment:"), "{transcript}");
    env.shutdown().await;
}
