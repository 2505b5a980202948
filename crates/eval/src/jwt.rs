//! MoviePilot's bearer tokens as MoviePilot itself writes and reads them (python-jose, HS256):
//! `header.payload.signature`, each part base64url without padding, the signature an
//! HMAC-SHA256 of `header.payload` under `SECRET_KEY`; `exp` is required and must lie after now.
//!
//! Written apart from the gateway's client side (`mpa_gateway::jwt`) on purpose: the fake stands
//! for MoviePilot, so a format mistake on either side fails a sign-in in the tests instead of
//! agreeing with itself.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::Sha256;

const HEADER: &[u8] = br#"{"alg":"HS256","typ":"JWT"}"#;

fn signature(secret: &[u8], signed: &str) -> Option<Hmac<Sha256>> {
    // HMAC takes keys of any length: `new_from_slice` fails for none.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).ok()?;
    mac.update(signed.as_bytes());
    Some(mac)
}

fn part<T: DeserializeOwned>(text: &str) -> Option<T> {
    serde_json::from_slice(&B64.decode(text).ok()?).ok()
}

/// A token carrying `claims`, signed with `secret`.
pub fn encode(claims: &impl Serialize, secret: &[u8]) -> String {
    let payload = serde_json::to_vec(claims).unwrap_or_else(|_| b"{}".to_vec());
    let signed = format!("{}.{}", B64.encode(HEADER), B64.encode(payload));
    let sig = signature(secret, &signed)
        .map(|m| B64.encode(m.finalize().into_bytes()))
        .unwrap_or_default();
    format!("{signed}.{sig}")
}

/// The claims of a token MoviePilot would accept at `now` (seconds since the epoch); `None`
/// when it would refuse it: not three parts, another algorithm, a signature that does not
/// match `secret`, no `exp` or one not after `now`.
pub fn decode<C: DeserializeOwned>(token: &str, secret: &[u8], now: i64) -> Option<C> {
    let (signed, sig) = token.rsplit_once('.')?;
    let (header, payload) = signed.split_once('.')?;
    if payload.contains('.') || part::<Value>(header)?.get("alg")? != "HS256" {
        return None;
    }
    signature(secret, signed)?
        .verify_slice(&B64.decode(sig).ok()?)
        .ok()?;
    let claims: Value = part(payload)?;
    if claims.get("exp")?.as_i64()? <= now {
        return None;
    }
    serde_json::from_value(claims).ok()
}
