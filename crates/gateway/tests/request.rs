//! Canonical JSON of a request (the idempotency key's input).

use mpa_gateway::canonical_json;
use serde_json::json;

#[test]
fn canonical_json_sorts_and_keeps_non_ascii() {
    let v = json!({"b": [1, {"z": 1, "a": "三体"}], "a": "x\"\n", "c": null});
    assert_eq!(
        canonical_json(&v),
        r#"{"a":"x\"\n","b":[1,{"a":"三体","z":1}],"c":null}"#
    );
}
