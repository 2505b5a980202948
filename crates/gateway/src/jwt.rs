//! HS256 JSON Web Tokens, the only kind MoviePilot's REST API accepts as a bearer: minting tokens
//! for a recorded MoviePilot user, checking them, reading a token's own expiry. (The fake
//! MoviePilot in `mpa-eval` reads and writes them with code of its own, as MoviePilot does.)
//!
//! Pure functions: no clock is read here (callers pass `now`), nothing is logged, and errors never
//! contain the token or the secret.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::Sha256;
use std::fmt;

type HmacSha256 = Hmac<Sha256>;

/// Why a token was refused. Carries no part of the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwtError {
    /// Not three base64url parts, or a part is not the expected JSON.
    Malformed,
    /// The header names another algorithm than HS256.
    UnsupportedAlgorithm,
    /// The signature does not match the secret.
    BadSignature,
    /// `exp` is missing or not after `now`.
    Expired,
}

impl fmt::Display for JwtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JwtError::Malformed => "malformed token",
            JwtError::UnsupportedAlgorithm => "unsupported token algorithm (HS256 expected)",
            JwtError::BadSignature => "token signature does not match",
            JwtError::Expired => "token expired",
        })
    }
}

impl std::error::Error for JwtError {}

const HEADER: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

fn mac(secret: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    match HmacSha256::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC-SHA256 takes keys of any length"),
    }
}

/// Signs `claims` with `secret` (HS256).
pub fn encode_hs256<C: Serialize>(claims: &C, secret: &[u8]) -> String {
    let payload = serde_json::to_vec(claims).unwrap_or_else(|_| b"{}".to_vec());
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(HEADER),
        URL_SAFE_NO_PAD.encode(payload)
    );
    let mut m = mac(secret);
    m.update(signing_input.as_bytes());
    let sig = URL_SAFE_NO_PAD.encode(m.finalize().into_bytes());
    format!("{signing_input}.{sig}")
}

fn split(token: &str) -> Result<(&str, &str, &str), JwtError> {
    let mut parts = token.split('.');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(h), Some(p), Some(s), None) if !h.is_empty() && !p.is_empty() => Ok((h, p, s)),
        _ => Err(JwtError::Malformed),
    }
}

fn json_part<T: DeserializeOwned>(part: &str) -> Result<T, JwtError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| JwtError::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| JwtError::Malformed)
}

/// Verifies an HS256 token against `secret` and `now` (seconds since the epoch) and returns its
/// claims. The `exp` claim is required.
pub fn decode_hs256<C: DeserializeOwned>(
    token: &str,
    secret: &[u8],
    now: i64,
) -> Result<C, JwtError> {
    let (h, p, s) = split(token)?;
    let header: serde_json::Value = json_part(h)?;
    if header.get("alg").and_then(|a| a.as_str()) != Some("HS256") {
        return Err(JwtError::UnsupportedAlgorithm);
    }
    let sig = URL_SAFE_NO_PAD.decode(s).map_err(|_| JwtError::Malformed)?;
    let mut m = mac(secret);
    m.update(h.as_bytes());
    m.update(b".");
    m.update(p.as_bytes());
    // Constant-time comparison.
    m.verify_slice(&sig).map_err(|_| JwtError::BadSignature)?;
    let claims: serde_json::Value = json_part(p)?;
    match claims.get("exp").and_then(serde_json::Value::as_i64) {
        Some(exp) if exp > now => {}
        _ => return Err(JwtError::Expired),
    }
    serde_json::from_value(claims).map_err(|_| JwtError::Malformed)
}

/// Reads a token's claims without verifying it (to learn its own expiry before using it). Never
/// use the result to authorise anything.
pub fn peek_claims(token: &str) -> Result<serde_json::Value, JwtError> {
    let (_, p, _) = split(token)?;
    json_part(p)
}
