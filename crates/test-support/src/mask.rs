//! Masking the parts of a JSON value that differ between runs (ids, pids, paths) before it is
//! compared with a stored snapshot.

use serde_json::Value;

/// One step of a selector: a key of an object, or every item of an array.
enum Step<'a> {
    Key(&'a str),
    Each,
}

fn steps(selector: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    let mut rest = selector;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("[]") {
            out.push(Step::Each);
            rest = r;
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            out.push(Step::Key(&r[..end]));
            rest = &r[end..];
        } else {
            panic!("bad selector {selector:?}: steps are `.key` or `[]`");
        }
    }
    out
}

fn apply(value: &mut Value, steps: &[Step<'_>], with: &dyn Fn(&Value) -> Value) {
    let Some((first, rest)) = steps.split_first() else {
        *value = with(value);
        return;
    };
    match (first, value) {
        (Step::Key(k), Value::Object(map)) => {
            if let Some(v) = map.get_mut(*k) {
                apply(v, rest, with);
            }
        }
        (Step::Each, Value::Array(items)) => {
            for v in items {
                apply(v, rest, with);
            }
        }
        // A selector that does not match the value's shape masks nothing.
        _ => {}
    }
}

/// A copy of `value` where every value the selector reaches is replaced by `with(old)`.
///
/// Selectors chain `.key` and `[]` (every item of an array): `.pid`, `.sessions[].pid`,
/// `[].result.proposals[].id`. Paths that do not exist are left alone.
pub fn mask_with(value: &Value, selector: &str, with: impl Fn(&Value) -> Value) -> Value {
    let mut out = value.clone();
    apply(&mut out, &steps(selector), &with);
    out
}

/// A copy of `value` where every value each selector reaches is the string `placeholder`
/// (`mask(&v, &[(".pid", "[pid]"), (".sessions[].id", "[id]")])`).
pub fn mask(value: &Value, rules: &[(&str, &str)]) -> Value {
    rules
        .iter()
        .fold(value.clone(), |v, (selector, placeholder)| {
            mask_with(&v, selector, |_| Value::String((*placeholder).to_string()))
        })
}
