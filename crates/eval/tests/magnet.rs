//! Magnet links and torrent ids: one identity in every form.

use mpa_eval::magnet::{infohash, normalise};

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
