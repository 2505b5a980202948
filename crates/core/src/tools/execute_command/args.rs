//! The arguments of `execute_command` (spec runtime.md §5.1). Lenient about unknown keys and
//! about out-of-range numbers (clamped, as the spec says), strict about the types of the keys it
//! knows: every field has its own deserializer so a wrong type is answered with the message the
//! model can act on ("since_seq must be an integer >= 0"), not serde's generic one.
//!
//! Rules that need more than one field (a command for start/run, the cursor pair) are checked by
//! `mpa-exec` when the request runs, before anything is spawned or changed.

use mpa_exec::Action;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use serde::de::{Deserializer, Error as _};
use serde_json::Value;

pub(crate) const DEFAULT_READ_BYTES: usize = 10_240;
pub(crate) const MAX_READ_BYTES: usize = mpa_exec::MAX_PAGE_BYTES;
pub(crate) const DEFAULT_WAIT_MS: u64 = 1_000;
pub(crate) const MAX_WAIT_MS: u64 = 60_000;
pub(crate) const DEFAULT_YIELD_MS: u64 = 250;
pub(crate) const MAX_YIELD_MS: u64 = 10_000;
pub(crate) const DEFAULT_RUN_TIMEOUT_S: u64 = 60;
pub(crate) const MAX_RUN_TIMEOUT_S: u64 = 300;

/// The arguments, validated field by field. Unknown keys are ignored (as the hand parser did),
/// although the schema tells the model there are none.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false), transform = without_description)]
pub struct ExecuteCommandArgs {
    /// run = one-shot; start = background terminal; others act on session_id.
    #[serde(default, deserialize_with = "action")]
    #[schemars(schema_with = "action_schema", extend("default" = "start"))]
    pub action: Option<Action>,
    /// Shell command (required for start and run).
    #[serde(default, deserialize_with = "command")]
    pub command: Option<String>,
    /// term_<12 hex> from start (session actions).
    #[serde(default, deserialize_with = "session_id")]
    pub session_id: Option<String>,
    /// Text to write (write). Include \n to press Enter.
    #[serde(default, deserialize_with = "input_text")]
    pub input_text: Option<String>,
    /// write: send EOF after input_text (pipe sessions only).
    #[serde(default, deserialize_with = "close_stdin")]
    #[schemars(extend("default" = false))]
    pub close_stdin: Option<bool>,
    /// kill: TERM, KILL, INT, HUP, QUIT, USR1, USR2, ALRM, ABRT (with or without SIG) or its number.
    #[serde(default, deserialize_with = "signal_name")]
    #[schemars(schema_with = "signal_schema", extend("default" = "TERM"))]
    pub signal_name: Option<Value>,
    /// Working directory; relative to the MoviePilot root; ~ expanded; must exist.
    #[serde(default, deserialize_with = "cwd")]
    pub cwd: Option<String>,
    /// Interpreter: sh, bash, zsh, dash, ash, ksh, mksh, fish, csh, tcsh (name or path).
    #[serde(default, deserialize_with = "shell")]
    pub shell: Option<String>,
    /// Run as a login shell (-lc).
    #[serde(default, deserialize_with = "login")]
    pub login: Option<bool>,
    /// Extra environment variables.
    #[serde(default, deserialize_with = "env_vars")]
    #[schemars(schema_with = "env_schema", extend("default" = {}))]
    pub env: Vec<(String, String)>,
    /// start: PTY (interactive programs) or pipes (separate stdout/stderr, EOF via close_stdin).
    #[serde(default, deserialize_with = "use_pty")]
    #[schemars(extend("default" = true))]
    pub use_pty: Option<bool>,
    /// Last chunk fully received: pass output_until_seq back.
    #[serde(default, deserialize_with = "since_seq")]
    #[schemars(schema_with = "cursor_schema")]
    pub since_seq: Option<u64>,
    /// Bytes already received of the next chunk: pass output_until_offset back.
    #[serde(default, deserialize_with = "since_offset")]
    #[schemars(schema_with = "cursor_schema")]
    pub since_offset: Option<u64>,
    /// Page size in bytes.
    #[serde(default = "default_read_bytes", deserialize_with = "max_bytes")]
    #[schemars(schema_with = "max_bytes_schema")]
    pub max_bytes: usize,
    /// wait: how long to wait for news (0 = poll).
    #[serde(default = "default_wait_ms", deserialize_with = "timeout_ms")]
    #[schemars(schema_with = "timeout_ms_schema")]
    pub timeout_ms: u64,
    /// start: how long to wait for first output (0 = return at once).
    #[serde(default, deserialize_with = "yield_time_ms")]
    #[schemars(schema_with = "yield_schema", extend("default" = DEFAULT_YIELD_MS))]
    pub yield_time_ms: Option<u64>,
    /// run: timeout in seconds.
    #[serde(default, deserialize_with = "run_timeout")]
    #[schemars(schema_with = "run_timeout_schema", extend("default" = DEFAULT_RUN_TIMEOUT_S))]
    pub timeout: RunTimeout,
    /// Confirm a command the guard refused as destructive.
    #[serde(default, deserialize_with = "confirm_dangerous")]
    #[schemars(extend("default" = false))]
    pub confirm_dangerous: Option<bool>,
}

impl ExecuteCommandArgs {
    pub fn action(&self) -> Action {
        self.action.unwrap_or(Action::Start)
    }

    pub fn yield_time_ms(&self) -> u64 {
        self.yield_time_ms
            .unwrap_or(DEFAULT_YIELD_MS)
            .min(MAX_YIELD_MS)
    }
}

/// The `run` timeout: seconds (1..=300), and a note when the request was replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunTimeout {
    pub seconds: u64,
    pub note: Option<String>,
}

impl Default for RunTimeout {
    fn default() -> Self {
        Self {
            seconds: DEFAULT_RUN_TIMEOUT_S,
            note: None,
        }
    }
}

/// Best-effort action name for error replies, even when the arguments are unusable.
pub(crate) fn action_name(args: &Value) -> &str {
    match args.get("action") {
        Some(Value::String(s)) if Action::parse(s).is_some() => s,
        None | Some(Value::Null) => "start",
        _ => "unknown",
    }
}

fn default_read_bytes() -> usize {
    DEFAULT_READ_BYTES
}

fn default_wait_ms() -> u64 {
    DEFAULT_WAIT_MS
}

fn action<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Action>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Action::parse(s.trim()).map(Some).ok_or_else(|| {
            D::Error::custom(
                "action must be one of start, read, wait, write, interrupt, kill, run, list, status",
            )
        }),
        _ => Err(D::Error::custom("action must be a string")),
    }
}

/// `deserialize_with` is not told which field it reads, so each typed field gets a named
/// wrapper: the message then says which key was wrong and what it must be.
macro_rules! field_checks {
    ($($name:ident => $check:ident($field:literal) -> $ty:ty;)*) => {
        $(fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
            $check(Value::deserialize(d)?, $field).map_err(D::Error::custom)
        })*
    };
}

field_checks! {
    command => string("command") -> Option<String>;
    session_id => string("session_id") -> Option<String>;
    input_text => string("input_text") -> Option<String>;
    cwd => string("cwd") -> Option<String>;
    shell => string("shell") -> Option<String>;
    close_stdin => boolean("close_stdin") -> Option<bool>;
    login => boolean("login") -> Option<bool>;
    use_pty => boolean("use_pty") -> Option<bool>;
    confirm_dangerous => boolean("confirm_dangerous") -> Option<bool>;
    since_seq => unsigned("since_seq") -> Option<u64>;
    since_offset => unsigned("since_offset") -> Option<u64>;
    yield_time_ms => unsigned("yield_time_ms") -> Option<u64>;
    max_bytes => page_size("max_bytes") -> usize;
    timeout_ms => wait_ms("timeout_ms") -> u64;
}

fn string(v: Value, field: &str) -> Result<Option<String>, String> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        _ => Err(format!("{field} must be a string")),
    }
}

fn boolean(v: Value, field: &str) -> Result<Option<bool>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(b)),
        _ => Err(format!("{field} must be true or false")),
    }
}

fn unsigned(v: Value, field: &str) -> Result<Option<u64>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{field} must be an integer >= 0")),
        _ => Err(format!("{field} must be an integer >= 0")),
    }
}

/// A lenient integer (`max_bytes`, `timeout_ms`): null → `default`, zero or negative →
/// `non_positive`, above `max` → `max`; only a non-integer is an error.
fn clamped(
    v: Value,
    field: &str,
    default: u64,
    non_positive: u64,
    max: u64,
) -> Result<u64, String> {
    match v {
        Value::Null => Ok(default),
        Value::Number(n) => match n.as_i64() {
            Some(v) if v <= 0 => Ok(non_positive),
            Some(v) => Ok(u64::try_from(v).unwrap_or(max).min(max)),
            None if n.as_u64().is_some() => Ok(max),
            None => Err(format!("{field} must be an integer")),
        },
        _ => Err(format!("{field} must be an integer")),
    }
}

fn page_size(v: Value, field: &str) -> Result<usize, String> {
    let (default, max) = (DEFAULT_READ_BYTES as u64, MAX_READ_BYTES as u64);
    let bytes = clamped(v, field, default, default, max)?;
    Ok(usize::try_from(bytes).unwrap_or(MAX_READ_BYTES))
}

fn wait_ms(v: Value, field: &str) -> Result<u64, String> {
    clamped(v, field, DEFAULT_WAIT_MS, 0, MAX_WAIT_MS)
}

fn signal_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    // Any JSON is kept: a bad signal is refused by `kill` itself, before any state changes.
    Ok(Some(Value::deserialize(d)?).filter(|v| !v.is_null()))
}

fn run_timeout<'de, D: Deserializer<'de>>(d: D) -> Result<RunTimeout, D::Error> {
    let seconds = match Value::deserialize(d)? {
        Value::Null => return Ok(RunTimeout::default()),
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    Ok(match seconds {
        Some(s) if s.is_finite() && s > 0.0 => {
            if s > MAX_RUN_TIMEOUT_S as f64 {
                RunTimeout {
                    seconds: MAX_RUN_TIMEOUT_S,
                    note: Some(format!(
                        "timeout {s} s exceeds the maximum; {MAX_RUN_TIMEOUT_S} s was used"
                    )),
                }
            } else {
                RunTimeout {
                    seconds: s.ceil() as u64,
                    note: None,
                }
            }
        }
        _ => RunTimeout {
            seconds: DEFAULT_RUN_TIMEOUT_S,
            note: Some(format!(
                "timeout was not a positive number of seconds; {DEFAULT_RUN_TIMEOUT_S} s was used"
            )),
        },
    })
}

fn env_vars<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
    let map = match Value::deserialize(d)? {
        Value::Null => return Ok(Vec::new()),
        Value::Object(map) => map,
        _ => return Err(D::Error::custom("env must be an object of strings")),
    };
    let mut out = Vec::with_capacity(map.len());
    for (key, value) in map {
        let value = match value {
            Value::Null => continue,
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => {
                return Err(D::Error::custom(format!(
                    "env value of {key} must be a string"
                )));
            }
        };
        out.push((key, value));
    }
    Ok(out)
}

/// The struct's doc comment is for Rust readers; the tool description speaks to the model.
fn without_description(schema: &mut Schema) {
    schema.remove("description");
}

fn action_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = Action::ALL.iter().map(|a| a.as_str()).collect();
    json_schema!({"type": "string", "enum": names})
}

fn signal_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": ["string", "integer"]})
}

fn env_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}})
}

fn cursor_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "integer", "minimum": 0})
}

fn max_bytes_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "integer", "default": DEFAULT_READ_BYTES, "minimum": 1, "maximum": MAX_READ_BYTES})
}

fn timeout_ms_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "integer", "default": DEFAULT_WAIT_MS, "minimum": 0, "maximum": MAX_WAIT_MS})
}

fn yield_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "integer", "minimum": 0, "maximum": MAX_YIELD_MS})
}

fn run_timeout_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "number", "exclusiveMinimum": 0, "maximum": MAX_RUN_TIMEOUT_S})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<ExecuteCommandArgs, String> {
        ExecuteCommandArgs::deserialize(&v).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_clamps() {
        let a = parse(json!({"command": "ls"})).unwrap();
        assert_eq!(a.action(), Action::Start);
        assert_eq!(a.use_pty, None, "start defaults to a PTY");
        assert_eq!(
            (
                a.max_bytes,
                a.timeout_ms,
                a.yield_time_ms(),
                a.timeout.seconds
            ),
            (10_240, 1_000, 250, 60)
        );
        let a = parse(json!({"action": "wait", "max_bytes": 0, "timeout_ms": -5})).unwrap();
        assert_eq!((a.max_bytes, a.timeout_ms), (10_240, 0));
        let a = parse(json!({"action": "read", "max_bytes": 10_000_000, "timeout_ms": 999_999}))
            .unwrap();
        assert_eq!((a.max_bytes, a.timeout_ms), (65_536, 60_000));
        let a = parse(json!({"max_bytes": u64::MAX, "yield_time_ms": 99_999})).unwrap();
        assert_eq!((a.max_bytes, a.yield_time_ms()), (65_536, 10_000));
        let a = parse(json!({"action": "run", "command": "x", "timeout": 9999})).unwrap();
        assert_eq!(a.timeout.seconds, 300);
        assert_eq!(
            a.timeout.note.as_deref(),
            Some("timeout 9999 s exceeds the maximum; 300 s was used")
        );
        let a = parse(json!({"action": "run", "command": "x", "timeout": "soon"})).unwrap();
        assert_eq!(a.timeout.seconds, 60);
        assert!(a.timeout.note.is_some());
        let a = parse(json!({"action": "run", "command": "x", "timeout": "2.5"})).unwrap();
        assert_eq!(
            a.timeout,
            RunTimeout {
                seconds: 3,
                note: None
            }
        );
        let a = parse(json!({"env": {"A": "1", "B": 2, "C": true, "SKIP": null}})).unwrap();
        assert_eq!(
            a.env,
            [("A", "1"), ("B", "2"), ("C", "true")].map(|(k, v)| (k.to_string(), v.to_string()))
        );
        // Unknown keys are ignored, as the hand parser did.
        assert!(parse(json!({"command": "ls", "colour": "blue"})).is_ok());
        assert!(parse(json!({"action": " read "})).is_ok());
        assert!(parse(json!({"action": null, "signal_name": null})).is_ok());
    }

    #[test]
    fn strict_types_are_enforced_with_messages_naming_the_key() {
        for (bad, message) in [
            (
                json!({"action": "read", "since_seq": -1}),
                "since_seq must be an integer >= 0",
            ),
            (
                json!({"action": "read", "since_seq": 1.5}),
                "since_seq must be an integer >= 0",
            ),
            (
                json!({"action": "read", "since_seq": "3"}),
                "since_seq must be an integer >= 0",
            ),
            (
                json!({"since_offset": true}),
                "since_offset must be an integer >= 0",
            ),
            (
                json!({"yield_time_ms": -1}),
                "yield_time_ms must be an integer >= 0",
            ),
            (
                json!({"action": "write", "close_stdin": "true"}),
                "close_stdin must be true or false",
            ),
            (json!({"use_pty": 1}), "use_pty must be true or false"),
            (json!({"login": "yes"}), "login must be true or false"),
            (
                json!({"confirm_dangerous": []}),
                "confirm_dangerous must be true or false",
            ),
            (json!({"command": 5}), "command must be a string"),
            (json!({"session_id": {}}), "session_id must be a string"),
            (json!({"input_text": 1}), "input_text must be a string"),
            (json!({"cwd": false}), "cwd must be a string"),
            (json!({"shell": ["bash"]}), "shell must be a string"),
            (json!({"max_bytes": 1.5}), "max_bytes must be an integer"),
            (json!({"timeout_ms": "5"}), "timeout_ms must be an integer"),
            (
                json!({"command": "x", "env": {"A": [1]}}),
                "env value of A must be a string",
            ),
            (json!({"env": "A=1"}), "env must be an object of strings"),
            (
                json!({"action": "explode"}),
                "action must be one of start, read, wait, write, interrupt, kill, run, list, status",
            ),
            (json!({"action": 5}), "action must be a string"),
        ] {
            assert_eq!(parse(bad.clone()).err().as_deref(), Some(message), "{bad}");
        }
    }

    #[test]
    fn error_replies_name_the_action_when_they_can() {
        assert_eq!(action_name(&json!({"action": "kill"})), "kill");
        assert_eq!(action_name(&json!({})), "start");
        assert_eq!(action_name(&json!({"action": null})), "start");
        assert_eq!(action_name(&json!({"action": "explode"})), "unknown");
        assert_eq!(action_name(&json!({"action": 5})), "unknown");
    }
}
