//! The OpenAI-compatible endpoint: content parts, earlier turns as context, a session per caller.

use axum::http::HeaderMap;
use mpa_protocol::Actor;
use mpa_server::openai::*;
use serde_json::json;

#[test]
fn content_parts_split_into_text_and_images() {
    let (t, i) = split_content(&json!([
        {"type": "text", "text": "a"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,xx"}},
        {"type": "text", "text": "b"}
    ]));
    assert_eq!(t, "a\nb");
    assert_eq!(i, vec!["data:image/png;base64,xx".to_string()]);
}

#[test]
fn earlier_turns_and_system_text_become_real_context() {
    let one = [json!({"role": "user", "content": "q"})];
    assert_eq!(client_context(&one), None);
    let many = [
        json!({"role": "system", "content": "be brief"}),
        json!({"role": "user", "content": "a"}),
        json!({"role": "assistant", "content": "b"}),
        json!({"role": "tool", "content": "ignored"}),
        json!({"role": "user", "content": "c"}),
    ];
    let ctx = client_context(&many).unwrap();
    assert_eq!(ctx.system.as_deref(), Some("be brief"));
    assert_eq!(
        ctx.messages,
        vec![
            mpa_protocol::Message::user("a"),
            mpa_protocol::Message::assistant("b", vec![])
        ]
    );
}

#[test]
fn user_field_maps_to_a_per_caller_session() {
    let a = Actor {
        user_id: mpa_protocol::UserId("u1".into()),
        user_name: "a".into(),
        is_admin: false,
    };
    let b = Actor {
        user_id: mpa_protocol::UserId("u2".into()),
        ..a.clone()
    };
    let h = HeaderMap::new();
    assert_eq!(
        session_for(&a, &h, Some("x")),
        session_for(&a, &h, Some("x"))
    );
    assert_ne!(
        session_for(&a, &h, Some("x")),
        session_for(&b, &h, Some("x"))
    );
    assert!(mpa_core::valid_session_id(&session_for(&a, &h, None)));
}
