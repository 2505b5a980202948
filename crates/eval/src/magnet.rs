//! Infohash extraction: a download's identity is its BitTorrent infohash, whatever the magnet's
//! display name, parameter order or hex case.

/// The infohash of a magnet link as 40 lower-case hex characters: from `xt=urn:btih:` with
/// either 40 hex digits or 32 base32 characters. `None` for anything else.
pub fn infohash(magnet: &str) -> Option<String> {
    let rest = magnet.trim();
    let scheme = rest.get(..7)?;
    if !scheme.eq_ignore_ascii_case("magnet:") {
        return None;
    }
    let query = rest[7..].trim_start_matches('?');
    form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == "xt")
        .find_map(|(_, topic)| {
            let (prefix, value) = topic.rsplit_once(':')?;
            if !prefix.eq_ignore_ascii_case("urn:btih") {
                return None;
            }
            crate::state::normalise_hex_hash(value).or_else(|| base32_hex(value))
        })
}

/// A download id as the world keys it: 40 hex digits in any case, 32 base32 characters, or a
/// magnet link → 40 lower-case hex digits. `None` for anything else.
pub fn normalise(id: &str) -> Option<String> {
    let id = id.trim();
    crate::state::normalise_hex_hash(id)
        .or_else(|| base32_hex(id))
        .or_else(|| infohash(id))
}

/// RFC 4648 base32 (no padding) of a 20-byte hash → lower-case hex.
fn base32_hex(value: &str) -> Option<String> {
    if value.len() != 32 {
        return None;
    }
    let mut bits: u64 = 0;
    let mut nbits = 0;
    let mut out = Vec::with_capacity(20);
    for c in value.bytes() {
        let v = match c.to_ascii_uppercase() {
            c @ b'A'..=b'Z' => c - b'A',
            c @ b'2'..=b'7' => c - b'2' + 26,
            _ => return None,
        };
        bits = (bits << 5) | u64::from(v);
        nbits += 5;
        if nbits >= 8 {
            nbits -= 8;
            out.push((bits >> nbits) as u8);
            bits &= (1 << nbits) - 1;
        }
    }
    Some(hex::encode(out))
}
