//! The final answer: extraction from the reply, types and labels.

use mpa_eval::answer::{check, extract};
use mpa_eval::scenario::Contract;
use serde_json::json;

#[test]
fn plain_json_or_one_fenced_block() {
    assert!(extract(r#"{"status":"completed"}"#).is_some());
    assert!(extract("Done:\n```json\n{\"status\":\"blocked\"}\n```\n").is_some());
    assert!(extract("```\n{\"a\":1}\n```").is_some());
    assert!(extract("```json\n{}\n```\n```json\n{}\n```").is_none());
    assert!(extract("status: completed").is_none());
    assert!(extract("[1,2]").is_none());
    assert!(extract("```python\n{}\n```").is_none());
}

#[test]
fn types_and_labels_are_checked() {
    let ok = check(
        Contract::Business,
        json!({"status": "completed", "download_ids": ["ab"], "subscription_ids": [72],
               "completed": ["download"], "unresolved": []})
        .as_object()
        .cloned()
        .unwrap(),
    )
    .unwrap();
    assert_eq!(ok.ids("subscription_ids").into_iter().next().unwrap(), "72");
    let b32 = check(
        Contract::Business,
        json!({"status": "completed",
               "download_ids": ["UGQ2DINBUGQ2DINBUGQ2DINBUGQ2DINB"]})
        .as_object()
        .cloned()
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        b32.ids("download_ids").into_iter().next(),
        Some("a1".repeat(20))
    );
    for bad in [
        json!({"status": "done"}),
        json!({"status": "completed", "download_ids": "ab"}),
        json!({"status": "completed", "download_ids": [true]}),
        json!({"status": "completed", "download_ids": [""]}),
        json!({"status": "completed", "download_ids": ["a", "a"]}),
        json!({"status": "completed", "completed": ["everything"]}),
    ] {
        assert!(
            check(Contract::Business, bad.as_object().cloned().unwrap()).is_err(),
            "{bad}"
        );
    }
    let bad_type = json!({"status": "completed", "command_exit_code": "0"});
    assert!(check(Contract::Command, bad_type.as_object().cloned().unwrap()).is_err());
}
