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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_base32_forms_give_one_identity() {
        let hex = "a1".repeat(20);
        assert_eq!(
            infohash(&format!("magnet:?xt=urn:btih:{hex}&dn=A")),
            Some(hex.clone())
        );
        assert_eq!(
            infohash(&format!(
                "MAGNET:?dn=Other.Name&xt=urn:BTIH:{}",
                hex.to_uppercase()
            )),
            Some(hex.clone())
        );
        // base32 of twenty 0xa1 bytes
        let b32 = "UGQ2DINBUGQ2DINBUGQ2DINBUGQ2DINB";
        assert_eq!(
            infohash(&format!("magnet:?xt=urn:btih:{b32}")),
            Some(hex.clone())
        );
        assert_eq!(
            infohash(&format!("magnet:?xt=urn:btih:{}", b32.to_lowercase())),
            Some(hex)
        );
    }

    #[test]
    fn ids_in_every_form_normalise_to_lower_hex() {
        let hex = "a1".repeat(20);
        for id in [
            hex.to_uppercase(),
            "UGQ2DINBUGQ2DINBUGQ2DINBUGQ2DINB".to_string(),
            format!("magnet:?xt=urn:btih:{hex}&dn=x"),
        ] {
            assert_eq!(normalise(&id), Some(hex.clone()), "{id}");
        }
        assert_eq!(normalise("9001"), None);
    }

    #[test]
    fn refuses_what_is_not_a_btih_magnet() {
        assert_eq!(infohash("https://example.org/a.torrent"), None);
        assert_eq!(infohash("magnet:?xt=urn:btih:abc"), None);
        assert_eq!(
            infohash(&format!("magnet:?xt=urn:sha1:{}", "a1".repeat(20))),
            None
        );
        assert_eq!(
            infohash(&format!("magnet:?xt=urn:btih:{}", "g1".repeat(20))),
            None
        );
        assert_eq!(
            infohash(&format!("magnet:?xt=urn:btih:{}", "1".repeat(32))),
            None
        );
    }
}
