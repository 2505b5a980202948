//! HS256 tokens: a round trip, and every way a token is refused.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use mpa_gateway::jwt::{JwtError, decode_hs256, encode_hs256, peek_claims};
use serde_json::json;

#[test]
fn roundtrip_and_refusals() {
    let claims = json!({"sub": "3", "username": "alice", "super_user": false, "exp": 2000});
    let t = encode_hs256(&claims, b"secret");
    let back: serde_json::Value = decode_hs256(&t, b"secret", 1000).unwrap();
    assert_eq!(back, claims);
    assert_eq!(peek_claims(&t).unwrap()["username"], "alice");
    assert_eq!(
        decode_hs256::<serde_json::Value>(&t, b"other", 1000),
        Err(JwtError::BadSignature)
    );
    assert_eq!(
        decode_hs256::<serde_json::Value>(&t, b"secret", 2000),
        Err(JwtError::Expired)
    );
    assert_eq!(
        decode_hs256::<serde_json::Value>("a.b", b"secret", 0),
        Err(JwtError::Malformed)
    );
    // A tampered payload fails the signature.
    let mut parts: Vec<&str> = t.split('.').collect();
    let forged = URL_SAFE_NO_PAD.encode(r#"{"sub":"1","super_user":true,"exp":9999}"#);
    parts[1] = &forged;
    assert_eq!(
        decode_hs256::<serde_json::Value>(&parts.join("."), b"secret", 1000),
        Err(JwtError::BadSignature)
    );
    // `alg: none` is refused before any signature check.
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(r#"{"exp":9999}"#)
    );
    assert_eq!(
        decode_hs256::<serde_json::Value>(&none, b"secret", 0),
        Err(JwtError::UnsupportedAlgorithm)
    );
}

#[test]
fn missing_exp_is_expired() {
    let t = encode_hs256(&json!({"sub": "1"}), b"k");
    assert_eq!(
        decode_hs256::<serde_json::Value>(&t, b"k", 0),
        Err(JwtError::Expired)
    );
}
