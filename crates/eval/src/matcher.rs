//! Matchers a scenario uses where the spec's wording is not exact equality: values
//! ([`ValueMatch`]: `equals`, `one_of`, `contains`, `regex`, `normalized`, `present`, `any_of`)
//! for answer fields, tool-result fields and final settings, and sets ([`SetMatch`]:
//! `equals`, `includes`, `excludes`) for pages and ids.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// What one value must be. JSON: one key, e.g. `{"contains": "GOT=HELLO"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ValueMatch {
    /// Exactly this JSON value.
    Equals(Value),
    /// Any one of these values (exact JSON equality).
    OneOf(Vec<Value>),
    /// A string holding this text once line endings are normalised (`\r\n` and `\r` read as
    /// `\n`).
    Contains(String),
    /// A string (or a number, as written) the regular expression matches somewhere; anchor it
    /// with `^…$` for the whole value.
    Regex(String),
    /// A string equal to this one after normalising both: `\r\n` and `\r` read as `\n`,
    /// trailing whitespace dropped from every line, leading and trailing blank lines dropped —
    /// so verbatim PTY output (`READY\r\n…`) equals `READY\n…`.
    Normalized(String),
    /// `true`: the value is there and not null; `false`: absent or null.
    Present(bool),
    /// Any one of these matchers.
    AnyOf(Vec<ValueMatch>),
}

/// `\r\n` and lone `\r` as `\n`.
fn unix_lines(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\r', "\n")
}

/// The form [`ValueMatch::Normalized`] compares.
pub fn normalize_text(s: &str) -> String {
    let unix = unix_lines(s);
    let lines: Vec<&str> = unix.lines().map(str::trim_end).collect();
    let first = lines
        .iter()
        .position(|l| !l.is_empty())
        .unwrap_or(lines.len());
    let last = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(first, |i| i + 1);
    lines[first..last.max(first)].join("\n")
}

fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl ValueMatch {
    /// Checks the regular expressions (at load, so a bad pattern is invalid input).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            ValueMatch::Regex(r) => regex::Regex::new(r)
                .map(|_| ())
                .map_err(|e| format!("invalid regex {r:?}: {e}")),
            ValueMatch::AnyOf(all) => all.iter().try_for_each(ValueMatch::validate),
            _ => Ok(()),
        }
    }

    /// Whether `got` (`None`: the field is absent) matches.
    pub fn matches(&self, got: Option<&Value>) -> bool {
        let there = got.filter(|v| !v.is_null());
        match self {
            ValueMatch::Present(want) => there.is_some() == *want,
            ValueMatch::Equals(want) => got.unwrap_or(&Value::Null) == want,
            ValueMatch::OneOf(options) => options.contains(got.unwrap_or(&Value::Null)),
            ValueMatch::Contains(needle) => there
                .and_then(as_text)
                .is_some_and(|t| unix_lines(&t).contains(&unix_lines(needle))),
            ValueMatch::Regex(pattern) => {
                match (there.and_then(as_text), regex::Regex::new(pattern)) {
                    (Some(t), Ok(re)) => re.is_match(&t),
                    _ => false,
                }
            }
            ValueMatch::Normalized(want) => there
                .and_then(Value::as_str)
                .is_some_and(|t| normalize_text(t) == normalize_text(want)),
            ValueMatch::AnyOf(all) => all.iter().any(|m| m.matches(got)),
        }
    }
}

impl std::fmt::Display for ValueMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = serde_json::to_value(self).unwrap_or(Value::Null);
        write!(f, "{v}")
    }
}

/// What a set (pages, ids) must be; every given part must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SetMatch {
    pub equals: Option<BTreeSet<String>>,
    pub includes: BTreeSet<String>,
    pub excludes: BTreeSet<String>,
}

impl SetMatch {
    /// Why `got` does not match, or `None` when it does.
    pub fn mismatch(&self, got: &BTreeSet<String>) -> Option<String> {
        let show = |s: &BTreeSet<String>| format!("{:?}", s.iter().collect::<Vec<_>>());
        if let Some(want) = &self.equals
            && got != want
        {
            return Some(format!("{} ≠ expected {}", show(got), show(want)));
        }
        let missing: BTreeSet<String> = self.includes.difference(got).cloned().collect();
        if !missing.is_empty() {
            return Some(format!("{} lacks {}", show(got), show(&missing)));
        }
        let extra: BTreeSet<String> = self.excludes.intersection(got).cloned().collect();
        if !extra.is_empty() {
            return Some(format!("{} holds the excluded {}", show(got), show(&extra)));
        }
        None
    }

    pub fn is_empty(&self) -> bool {
        self.equals.is_none() && self.includes.is_empty() && self.excludes.is_empty()
    }
}
