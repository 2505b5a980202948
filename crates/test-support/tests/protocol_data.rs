//! `mpa-protocol`'s plain data as it goes over the wire (names, empty fields, content parts). The
//! leaf crate has no test binary of its own: its tests run in this workspace-wide binary.

// From crates/protocol/src/lib.rs.
use mpa_protocol::*;

#[test]
fn effect_classes_roundtrip_by_name() {
    for e in EffectClass::ALL {
        assert_eq!(EffectClass::parse(e.as_str()), Some(e));
        assert_eq!(serde_json::to_value(e).unwrap(), e.as_str());
    }
    assert_eq!(EffectClass::parse("write"), None);
    assert!(EffectClass::SensitiveRead.is_read() && !EffectClass::Unknown.is_read());
}

#[test]
fn turn_statuses_roundtrip_by_name() {
    for t in TurnStatus::ALL {
        assert_eq!(TurnStatus::parse(t.as_str()), Some(t));
        assert_eq!(serde_json::to_value(t).unwrap(), t.as_str());
    }
    assert_eq!(TurnStatus::parse("done"), None);
}

#[test]
fn message_roundtrip_skips_empty_fields() {
    let m = Message::user("hi");
    let v = serde_json::to_value(&m).unwrap();
    assert_eq!(v, serde_json::json!({"role": "user", "content": "hi"}));
    let back: Message = serde_json::from_value(v).unwrap();
    assert_eq!(back, m);
}

#[test]
fn content_parts_text_leaves_images_out() {
    let c = Content::Parts(vec![
        ContentPart::Text { text: "a".into() },
        ContentPart::ImageUrl {
            image_url: ImageUrl::new("data:x"),
        },
    ]);
    assert_eq!(c.text(), "a");
    assert_eq!(c.image_count(), 1);
}

#[test]
fn debug_never_prints_image_bytes() {
    let b = mpa_protocol::ImageBlock::new(
        vec![0xAB; 64],
        mpa_protocol::ImageMime::Png,
        mpa_protocol::ImageDetail::Low,
    );
    assert_eq!(
        format!("{b:?}"),
        "ImageBlock(image/png, 64 bytes, detail low)"
    );
}
