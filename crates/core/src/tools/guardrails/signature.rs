//! Call signatures and result identities (spec learning-guardrails.md §5.3): a call is its tool
//! and the SHA-256 of its canonical arguments (keys sorted recursively, compact, non-ASCII kept;
//! arguments that are not an object count as `{}`), so reordering keys is the same call. Only
//! the hash is kept or shown, never the arguments.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::Write;

/// A call's identity: its tool and arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signature(pub u128);

impl Signature {
    pub fn of(tool: &str, args: Option<&Value>) -> Self {
        let mut h = Sha256::new();
        h.update(tool.as_bytes());
        h.update([0]);
        match args {
            Some(v @ Value::Object(_)) => canonical(v, &mut HashWriter(&mut h)),
            _ => h.update(b"{}"),
        }
        Signature(first_128(h))
    }

    /// The arguments' hash as the decision metadata shows it.
    pub fn hex(self) -> String {
        format!("{:032x}", self.0)
    }
}

/// The identity of a result's text (the whole result, not a preview).
pub fn result_digest(text: &str) -> u128 {
    first_128(Sha256::new_with_prefix(text.as_bytes()))
}

/// A short, stable hash of a key (a tool, or a tool and its operation).
pub fn key_digest(parts: &[&str]) -> u64 {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b)
}

fn first_128(h: Sha256) -> u128 {
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    u128::from_be_bytes(b)
}

/// Feeds what is written into the hash (no intermediate string).
struct HashWriter<'a>(&'a mut Sha256);

impl Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes `v` as canonical JSON. Strings and numbers are written by serde_json (its escaping
/// keeps non-ASCII text as it is); object keys are sorted (the workspace keeps insertion order).
fn canonical(v: &Value, out: &mut HashWriter<'_>) {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.0.update(b"{");
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.0.update(b",");
                }
                let _ = serde_json::to_writer(&mut *out, k);
                out.0.update(b":");
                canonical(v, out);
            }
            out.0.update(b"}");
        }
        Value::Array(items) => {
            out.0.update(b"[");
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.0.update(b",");
                }
                canonical(v, out);
            }
            out.0.update(b"]");
        }
        other => scalar(other, out),
    }
}

fn scalar(v: &Value, out: &mut HashWriter<'_>) {
    // Writing into a hash cannot fail; a scalar always serialises.
    let _ = serde_json::to_writer(&mut *out, v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reordered_keys_are_the_same_call() {
        let a = json!({"b": {"y": 1, "x": [1, {"q": 2, "p": "流浪地球"}]}, "a": "x"});
        let b = json!({"a": "x", "b": {"x": [1, {"p": "流浪地球", "q": 2}], "y": 1}});
        assert_eq!(Signature::of("t", Some(&a)), Signature::of("t", Some(&b)));
        assert_ne!(Signature::of("t", Some(&a)), Signature::of("u", Some(&a)));
        assert_ne!(
            Signature::of("t", Some(&a)),
            Signature::of("t", Some(&json!({"a": "y"})))
        );
    }

    #[test]
    fn arguments_that_are_not_an_object_count_as_empty() {
        assert_eq!(
            Signature::of("t", None),
            Signature::of("t", Some(&json!({})))
        );
        assert_eq!(
            Signature::of("t", Some(&json!([1]))),
            Signature::of("t", Some(&json!({})))
        );
    }

    #[test]
    fn the_canonical_form_is_compact_json_with_sorted_keys() {
        let v = json!({"b": 1, "a": ["x", null, true, 1.5], "c": "é\"\n"});
        let mut h = Sha256::new();
        canonical(&v, &mut HashWriter(&mut h));
        let expected = Sha256::new_with_prefix(r#"{"a":["x",null,true,1.5],"b":1,"c":"é\"\n"}"#);
        assert_eq!(h.finalize(), expected.finalize());
    }
}
