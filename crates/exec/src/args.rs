//! Tool-argument validation (spec runtime.md §5.1): lenient about unknown keys, strict about
//! the types of the keys it knows.

use crate::error::{ExecError, Result};
use serde_json::{Map, Value};

pub(crate) const DEFAULT_READ_BYTES: usize = 10_240;
pub(crate) const MAX_READ_BYTES: usize = 65_536;
pub(crate) const DEFAULT_WAIT_MS: u64 = 1_000;
pub(crate) const MAX_WAIT_MS: u64 = 60_000;
pub(crate) const DEFAULT_YIELD_MS: u64 = 250;
pub(crate) const MAX_YIELD_MS: u64 = 10_000;
pub(crate) const DEFAULT_RUN_TIMEOUT_S: u64 = 60;
pub(crate) const MAX_RUN_TIMEOUT_S: u64 = 300;

/// The actions of `execute_command`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Start,
    Read,
    Wait,
    Write,
    Interrupt,
    Kill,
    Run,
    List,
    Status,
}

impl Action {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::Read => "read",
            Action::Wait => "wait",
            Action::Write => "write",
            Action::Interrupt => "interrupt",
            Action::Kill => "kill",
            Action::Run => "run",
            Action::List => "list",
            Action::Status => "status",
        }
    }

    fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "start" => Action::Start,
            "read" => Action::Read,
            "wait" => Action::Wait,
            "write" => Action::Write,
            "interrupt" => Action::Interrupt,
            "kill" => Action::Kill,
            "run" => Action::Run,
            "list" => Action::List,
            "status" => Action::Status,
            _ => return None,
        })
    }
}

/// Validated arguments.
#[derive(Debug, Clone)]
pub(crate) struct Args {
    pub action: Action,
    pub command: Option<String>,
    pub session_id: Option<String>,
    pub input_text: String,
    pub close_stdin: bool,
    pub signal_name: Option<Value>,
    pub cwd: Option<String>,
    pub shell: Option<String>,
    pub login: Option<bool>,
    pub env: Vec<(String, String)>,
    pub use_pty: bool,
    pub since_seq: Option<u64>,
    pub since_offset: Option<u64>,
    pub max_bytes: usize,
    pub timeout_ms: u64,
    pub yield_time_ms: u64,
    pub timeout_s: u64,
    pub timeout_note: Option<String>,
    pub confirm_dangerous: bool,
}

/// Best-effort action name for error payloads, even when the arguments are unusable.
pub(crate) fn action_name(args: &Value) -> String {
    match args.get("action") {
        Some(Value::String(s)) if Action::parse(s).is_some() => s.clone(),
        None | Some(Value::Null) => "start".into(),
        _ => "unknown".into(),
    }
}

pub(crate) fn parse(args: &Value) -> Result<Args> {
    let empty = Map::new();
    let obj = match args {
        Value::Object(map) => map,
        Value::Null => &empty,
        _ => return Err(invalid("arguments must be a JSON object")),
    };
    let action = match obj.get("action") {
        None | Some(Value::Null) => Action::Start,
        Some(Value::String(s)) => Action::parse(s.trim()).ok_or_else(|| {
            invalid("action must be one of start, read, wait, write, interrupt, kill, run, list, status")
        })?,
        Some(_) => return Err(invalid("action must be a string")),
    };
    let command = opt_string(obj, "command")?;
    if matches!(action, Action::Start | Action::Run)
        && command.as_deref().is_none_or(|c| c.trim().is_empty())
    {
        return Err(invalid("command is required and must not be blank"));
    }
    let since_offset = opt_uint(obj, "since_offset")?;
    if action == Action::Start && since_offset.is_some_and(|o| o != 0) {
        return Err(invalid("since_offset for start may only be 0 or null"));
    }
    let (timeout_s, timeout_note) = run_timeout(obj.get("timeout"));
    Ok(Args {
        action,
        command,
        session_id: opt_string(obj, "session_id")?,
        input_text: opt_string(obj, "input_text")?.unwrap_or_default(),
        close_stdin: opt_bool(obj, "close_stdin")?.unwrap_or(false),
        signal_name: obj.get("signal_name").filter(|v| !v.is_null()).cloned(),
        cwd: opt_string(obj, "cwd")?,
        shell: opt_string(obj, "shell")?,
        login: opt_bool(obj, "login")?,
        env: env_vars(obj.get("env"))?,
        use_pty: opt_bool(obj, "use_pty")?.unwrap_or(true),
        since_seq: opt_uint(obj, "since_seq")?,
        since_offset,
        max_bytes: clamped_int(
            obj,
            "max_bytes",
            DEFAULT_READ_BYTES,
            DEFAULT_READ_BYTES,
            MAX_READ_BYTES,
        )?,
        timeout_ms: clamped_int(obj, "timeout_ms", DEFAULT_WAIT_MS, 0, MAX_WAIT_MS)?,
        yield_time_ms: opt_uint(obj, "yield_time_ms")?
            .unwrap_or(DEFAULT_YIELD_MS)
            .min(MAX_YIELD_MS),
        timeout_s,
        timeout_note,
        confirm_dangerous: opt_bool(obj, "confirm_dangerous")?.unwrap_or(false),
    })
}

fn invalid(msg: impl Into<String>) -> ExecError {
    ExecError::InvalidArgument(msg.into())
}

fn opt_string(obj: &Map<String, Value>, key: &str) -> Result<Option<String>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("{key} must be a string"))),
    }
}

fn opt_bool(obj: &Map<String, Value>, key: &str) -> Result<Option<bool>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(invalid(format!("{key} must be true or false"))),
    }
}

fn opt_uint(obj: &Map<String, Value>, key: &str) -> Result<Option<u64>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| invalid(format!("{key} must be an integer >= 0"))),
        Some(_) => Err(invalid(format!("{key} must be an integer >= 0"))),
    }
}

/// A lenient integer (`max_bytes`, `timeout_ms`): absent → `default`, zero or negative →
/// `non_positive`, above `max` → `max`; only a non-integer is an error.
fn clamped_int<T: TryFrom<i64> + Ord + Copy>(
    obj: &Map<String, Value>,
    key: &str,
    default: T,
    non_positive: T,
    max: T,
) -> Result<T> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(v) if v <= 0 => Ok(non_positive),
            Some(v) => Ok(T::try_from(v).unwrap_or(max).min(max)),
            None if n.as_u64().is_some() => Ok(max),
            None => Err(invalid(format!("{key} must be an integer"))),
        },
        Some(_) => Err(invalid(format!("{key} must be an integer"))),
    }
}

fn run_timeout(value: Option<&Value>) -> (u64, Option<String>) {
    let seconds = match value {
        None | Some(Value::Null) => return (DEFAULT_RUN_TIMEOUT_S, None),
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(_) => None,
    };
    match seconds {
        Some(s) if s.is_finite() && s > 0.0 => {
            if s > MAX_RUN_TIMEOUT_S as f64 {
                (
                    MAX_RUN_TIMEOUT_S,
                    Some(format!(
                        "timeout {s} s exceeds the maximum; {MAX_RUN_TIMEOUT_S} s was used"
                    )),
                )
            } else {
                (s.ceil() as u64, None)
            }
        }
        _ => (
            DEFAULT_RUN_TIMEOUT_S,
            Some(format!(
                "timeout was not a positive number of seconds; {DEFAULT_RUN_TIMEOUT_S} s was used"
            )),
        ),
    }
}

fn env_vars(value: Option<&Value>) -> Result<Vec<(String, String)>> {
    let map = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(invalid("env must be an object of strings")),
    };
    let mut out = Vec::with_capacity(map.len());
    for (key, value) in map {
        if key.is_empty() || key.contains(['=', '\0']) {
            return Err(invalid(
                "env names must be non-empty and contain no '=' or NUL",
            ));
        }
        let value = match value {
            Value::Null => continue,
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => return Err(invalid(format!("env value of {key} must be a string"))),
        };
        if value.contains('\0') {
            return Err(invalid(format!("env value of {key} contains NUL")));
        }
        out.push((key.clone(), value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_clamps() {
        let a = parse(&json!({"command": "ls"})).unwrap();
        assert_eq!(a.action, Action::Start);
        assert!(a.use_pty);
        assert_eq!(
            (a.max_bytes, a.timeout_ms, a.yield_time_ms, a.timeout_s),
            (10_240, 1_000, 250, 60)
        );
        let a = parse(&json!({"action": "wait", "max_bytes": 0, "timeout_ms": -5})).unwrap();
        assert_eq!((a.max_bytes, a.timeout_ms), (10_240, 0));
        let a = parse(&json!({"action": "read", "max_bytes": 10_000_000, "timeout_ms": 999_999}))
            .unwrap();
        assert_eq!((a.max_bytes, a.timeout_ms), (65_536, 60_000));
        let a = parse(&json!({"action": "run", "command": "x", "timeout": 9999})).unwrap();
        assert_eq!(a.timeout_s, 300);
        assert!(a.timeout_note.is_some());
        let a = parse(&json!({"action": "run", "command": "x", "timeout": "soon"})).unwrap();
        assert_eq!(a.timeout_s, 60);
        assert!(a.timeout_note.is_some());
    }

    #[test]
    fn strict_types_are_enforced() {
        for bad in [
            json!({"action": "start", "command": "  "}),
            json!({"action": "run"}),
            json!({"action": "read", "since_seq": -1}),
            json!({"action": "read", "since_seq": 1.5}),
            json!({"action": "read", "since_seq": "3"}),
            json!({"action": "write", "close_stdin": "true"}),
            json!({"action": "start", "command": "x", "since_offset": 4}),
            json!({"action": "start", "command": "x", "env": {"A": [1]}}),
            json!({"action": "explode"}),
        ] {
            assert!(parse(&bad).is_err(), "{bad}");
        }
    }
}
