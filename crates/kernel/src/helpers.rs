//! The generated `moviepilot_tools` module: the fixed local helpers (`json_parse`,
//! `shell_quote`, `retry`, the RPC client) and one stub per enabled tool whose signature is
//! derived from the tool's JSON schema (required properties positional, the others `=None`).

use serde_json::Value;

/// The fixed part of the module (an embedded asset).
const BASE: &str = include_str!("assets/helpers_base.py");

/// The local helpers every kernel has besides the tool stubs.
pub const LOCAL_HELPERS: [&str; 3] = ["json_parse", "shell_quote", "retry"];

/// A tool offered to Python.
#[derive(Debug, Clone, PartialEq)]
pub struct Helper {
    /// The tool's name (also the Python function's).
    pub name: String,
    /// One line said about it in the module's docstring.
    pub summary: String,
    /// Its JSON schema (an object schema with `properties` and `required`).
    pub parameters: Value,
}

struct Param {
    name: String,
    required: bool,
}

fn params(schema: &Value) -> Vec<Param> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut out: Vec<Param> = props
        .keys()
        .filter(|k| is_identifier(k))
        .map(|k| Param {
            name: k.clone(),
            required: required.contains(&k.as_str()),
        })
        .collect();
    // Python wants parameters without defaults first; the schema's order otherwise.
    out.sort_by_key(|p| !p.required);
    out
}

const PY_KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !PY_KEYWORDS.contains(&s)
        && !s.starts_with("_")
}

/// The Python signature of a helper, as the tool description lists it:
/// `moviepilot_api(operation_id, path_params=None, query=None, body=None)`.
pub fn helper_signature(helper: &Helper) -> String {
    let list: Vec<String> = params(&helper.parameters)
        .iter()
        .map(|p| {
            if p.required {
                p.name.clone()
            } else {
                format!("{}=None", p.name)
            }
        })
        .collect();
    format!("{}({})", helper.name, list.join(", "))
}

/// A Python string literal for `s` (JSON string syntax is valid Python for these escapes).
fn py_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The module's source for these helpers (names that are not Python identifiers are skipped).
pub fn module_source(helpers: &[Helper]) -> String {
    let mut src = String::with_capacity(BASE.len() + 512 * helpers.len());
    src.push_str(BASE);
    let mut names: Vec<String> = LOCAL_HELPERS.iter().map(|s| (*s).to_string()).collect();
    names.push("ToolRpcError".into());
    for h in helpers.iter().filter(|h| is_identifier(&h.name)) {
        let ps = params(&h.parameters);
        let kwargs: Vec<String> = ps.iter().map(|p| format!("{0}={0}", p.name)).collect();
        src.push_str(&format!(
            "\n\ndef {sig}:\n    {doc}\n    return _call({name}, _args({kwargs}))\n",
            sig = helper_signature(h),
            doc = py_str(&h.summary),
            name = py_str(&h.name),
            kwargs = kwargs.join(", "),
        ));
        names.push(h.name.clone());
    }
    let all: Vec<String> = names.iter().map(|n| py_str(n)).collect();
    src.push_str(&format!("\n\n__all__ = [{}]\n", all.join(", ")));
    src
}
