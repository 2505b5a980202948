//! Value and set matchers of the scenario files.

use mpa_eval::matcher::{SetMatch, ValueMatch};
use serde_json::Value;
use serde_json::json;
use std::collections::BTreeSet;

#[test]
fn verbatim_pty_output_equals_its_normalised_form() {
    let m = ValueMatch::Normalized("ASK\nGOT=HELLO\n".into());
    assert!(m.matches(Some(&json!("ASK\r\nGOT=HELLO\r\n"))));
    assert!(m.matches(Some(&json!("ASK  \nGOT=HELLO"))));
    assert!(!m.matches(Some(&json!("ASK\r\nGOT=HELL0\r\n"))));
    assert!(!m.matches(None));
}

#[test]
fn contains_regex_present_and_any_of() {
    assert!(ValueMatch::Contains("a\nb".into()).matches(Some(&json!("x a\r\nb y"))));
    assert!(!ValueMatch::Contains("z".into()).matches(Some(&json!("abc"))));
    let re = ValueMatch::Regex(r"^\d+ 8$".into());
    assert!(re.matches(Some(&json!("123 8"))));
    assert!(!re.matches(Some(&json!("done"))));
    assert!(ValueMatch::Regex("^0$".into()).matches(Some(&json!(0))));
    assert!(ValueMatch::Regex("(".into()).validate().is_err());
    assert!(ValueMatch::Present(false).matches(Some(&Value::Null)));
    assert!(ValueMatch::Present(true).matches(Some(&json!(false))));
    let any = ValueMatch::AnyOf(vec![
        ValueMatch::Equals(json!(1)),
        ValueMatch::Equals(json!(2)),
    ]);
    assert!(any.matches(Some(&json!(2))) && !any.matches(Some(&json!(3))));
    let m: ValueMatch = serde_json::from_value(json!({"one_of": [0]})).unwrap();
    assert_eq!(m, ValueMatch::OneOf(vec![json!(0)]));
}

#[test]
fn sets_include_exclude_and_equal() {
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let m = SetMatch {
        equals: None,
        includes: set(&["4"]),
        excludes: set(&["1"]),
    };
    assert_eq!(m.mismatch(&set(&["4", "5"])), None);
    assert!(m.mismatch(&set(&["3"])).is_some());
    assert!(m.mismatch(&set(&["1", "4"])).is_some());
    let eq = SetMatch {
        equals: Some(set(&["4"])),
        ..SetMatch::default()
    };
    assert!(eq.mismatch(&set(&["4", "5"])).is_some());
}
