//! An operation's input contract: the typed fields of its path, query and body as the catalogue
//! declares them, the parsers for the catalogue's field notation (moviepilot-api.md "Column
//! meanings"), and the JSON-Schema-like [`InputContract`] a model reads when its call is refused.

use serde::Serialize;
use serde_json::{Map, Value};

/// The value type of one path parameter, query field or known body field.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "values")]
pub enum FieldKind {
    String,
    Integer,
    Number,
    Boolean,
    /// One of these strings.
    Enum(Vec<&'static str>),
    /// Exactly this string.
    Const(&'static str),
    /// A string from one of MoviePilot's named enums (`MediaSource`, `MediaType`) whose values
    /// the catalogue does not list: accepted as any string, named in the contract.
    Named(&'static str),
    /// A JSON array of the inner kind, sent as a repeated query key.
    Array(Box<FieldKind>),
}

impl FieldKind {
    /// The JSON-Schema `type` word.
    pub fn json_type(&self) -> &'static str {
        match self {
            FieldKind::String | FieldKind::Enum(_) | FieldKind::Const(_) | FieldKind::Named(_) => {
                "string"
            }
            FieldKind::Integer => "integer",
            FieldKind::Number => "number",
            FieldKind::Boolean => "boolean",
            FieldKind::Array(_) => "array",
        }
    }

    /// How an error message names the expected value ("an integer", "one of a, b").
    pub(crate) fn expectation(&self) -> String {
        match self {
            FieldKind::String => "a string".into(),
            FieldKind::Integer => "an integer".into(),
            FieldKind::Number => "a number".into(),
            FieldKind::Boolean => "a boolean (true or false)".into(),
            FieldKind::Enum(values) => format!("one of {}", values.join(", ")),
            FieldKind::Const(c) => format!("the string \"{c}\""),
            FieldKind::Named(name) => format!("a string ({name})"),
            FieldKind::Array(inner) => format!("an array of {}", inner.item_word()),
        }
    }

    fn item_word(&self) -> String {
        match self {
            FieldKind::String | FieldKind::Named(_) | FieldKind::Const(_) => "strings".into(),
            FieldKind::Enum(values) => format!("strings from {}", values.join("|")),
            FieldKind::Integer => "integers".into(),
            FieldKind::Number => "numbers".into(),
            FieldKind::Boolean => "booleans".into(),
            FieldKind::Array(_) => "arrays".into(),
        }
    }
}

/// One declared path parameter, query field or known body field.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Field {
    pub name: &'static str,
    pub kind: FieldKind,
    pub required: bool,
    /// The value MoviePilot assumes when the field is omitted (applied in canonical arguments).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maximum: Option<i64>,
    /// The catalogue's free-text remark on the field (e.g. "pass \"default\" for built-in template").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
}

/// What the body of a call must be.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum BodyKind {
    /// No body is sent (a GET body object is merged into the query instead).
    None,
    /// A JSON object: of the named `$defs` model, or a free-form object when `model` is `None`.
    Object {
        model: Option<&'static str>,
        /// Fields the catalogue spells out (the model itself is not expanded).
        fields: Vec<Field>,
        min_properties: usize,
    },
    /// A JSON array; `items` names its element (`str`, `$SitePriorityUpdate`).
    Array { items: &'static str },
    /// Either a JSON array of `items` or an object of `model`.
    ArrayOrObject {
        items: &'static str,
        model: &'static str,
    },
    /// Exactly this JSON string (`"dev"` for `system.upgrade.dev`).
    Literal(&'static str),
}

/// The body rule of an operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BodySpec {
    #[serde(flatten)]
    pub kind: BodyKind,
    /// Whether a body must be given; an optional body may be omitted or `null`.
    pub required: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
}

impl BodySpec {
    pub const NONE: BodySpec = BodySpec {
        kind: BodyKind::None,
        required: false,
        note: None,
    };

    /// How an error message names the expected body ("a JSON object ($Subscribe)").
    pub(crate) fn expectation(&self) -> String {
        match &self.kind {
            BodyKind::None => "no body".into(),
            BodyKind::Object { model: Some(m), .. } => format!("a JSON object (${m})"),
            BodyKind::Object { model: None, .. } => "a JSON object".into(),
            BodyKind::Array { items } => format!("a JSON array of {items}"),
            BodyKind::ArrayOrObject { items, model } => {
                format!("a JSON array of {items} or a JSON object (${model})")
            }
            BodyKind::Literal(s) => format!("the JSON string \"{s}\""),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing the catalogue notation.

/// Splits a `; `-separated column at the top level (not inside `()`, `[]`, `{}`, `arr<…>` or
/// quotes: `count:int 1..200 (opt; omit both …)` is one entry). A `>` outside `arr<` is the
/// range operator `>=`, not a bracket.
pub fn split_top(s: &'static str, sep: &str) -> Vec<&'static str> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut angle = 0i32;
    let mut quoted = false;
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => quoted = !quoted,
            b'(' | b'[' | b'{' if !quoted => depth += 1,
            b')' | b']' | b'}' if !quoted => depth -= 1,
            b'<' if !quoted && s[..i].ends_with("arr") => angle += 1,
            b'>' if !quoted && angle > 0 => angle -= 1,
            _ => {}
        }
        if depth == 0 && angle == 0 && !quoted && s[i..].starts_with(sep) {
            out.push(s[start..i].trim());
            i += sep.len();
            start = i;
            continue;
        }
        i += 1;
    }
    let last = s[start..].trim();
    if !last.is_empty() {
        out.push(last);
    }
    out
}

/// The index of the bracket closing the one at `open` (same kind, nesting counted).
fn closing(s: &str, open: usize, o: u8, c: u8) -> Option<usize> {
    let mut depth = 0;
    for (i, b) in s.bytes().enumerate().skip(open) {
        if b == o {
            depth += 1;
        } else if b == c {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

fn parse_kind_word(word: &'static str) -> Result<FieldKind, String> {
    Ok(match word {
        "str" => FieldKind::String,
        "int" => FieldKind::Integer,
        "num" => FieldKind::Number,
        "bool" => FieldKind::Boolean,
        "MediaSource" | "MediaType" => FieldKind::Named(word),
        other => return Err(format!("unknown field type `{other}`")),
    })
}

/// Parses the type at the start of `s`, returning it and the rest.
fn parse_kind(s: &'static str) -> Result<(FieldKind, &'static str), String> {
    if let Some(inner) = s.strip_prefix("enum(") {
        let end = inner.find(')').ok_or("unclosed enum(")?;
        let values: Vec<&'static str> = inner[..end].split('|').map(str::trim).collect();
        if values.iter().any(|v| v.is_empty()) {
            return Err("empty enum value".into());
        }
        return Ok((FieldKind::Enum(values), &inner[end + 1..]));
    }
    if let Some(inner) = s.strip_prefix("const \"") {
        let end = inner.find('"').ok_or("unclosed const string")?;
        return Ok((FieldKind::Const(&inner[..end]), &inner[end + 1..]));
    }
    if s.starts_with("arr<") {
        let end = closing(s, 3, b'<', b'>').ok_or("unclosed arr<")?;
        let (inner, rest) = parse_kind(&s[4..end])?;
        if !rest.trim().is_empty() {
            return Err(format!("unexpected `{rest}` inside arr<…>"));
        }
        return Ok((FieldKind::Array(Box::new(inner)), &s[end + 1..]));
    }
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    Ok((parse_kind_word(&s[..end])?, &s[end..]))
}

fn parse_int(s: &str) -> Result<i64, String> {
    s.parse::<i64>()
        .map_err(|_| format!("`{s}` is not an integer"))
}

fn parse_default(kind: &FieldKind, raw: &'static str) -> Result<Value, String> {
    let bad = || format!("default `{raw}` does not fit its type");
    Ok(match kind {
        FieldKind::Integer => Value::from(parse_int(raw)?),
        FieldKind::Number => raw
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(bad)?,
        FieldKind::Boolean => match raw {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => return Err(bad()),
        },
        FieldKind::Array(_) if raw == "[]" => Value::Array(Vec::new()),
        FieldKind::Array(_) => return Err(bad()),
        FieldKind::Enum(values) if !values.contains(&raw) => return Err(bad()),
        FieldKind::Const(c) if *c != raw => return Err(bad()),
        _ => Value::String(raw.trim_matches('"').to_owned()),
    })
}

/// A parsed entry and, when it ends in `[… also lists a:T, b:T]`, the extra fields named there
/// (MoviePilot versions differ; the catalogue's rule is to accept both).
pub struct ParsedEntry {
    pub field: Field,
    pub optional_marker: bool,
    pub extras: Vec<Field>,
}

/// Parses one `name*:type[range][=default][ (note)][  [remark]]` entry.
pub fn parse_field(entry: &'static str) -> Result<ParsedEntry, String> {
    let mut entry = entry.trim();
    let mut extras = Vec::new();
    if let Some(open) = entry.find(" [") {
        let remark = entry[open..].trim();
        entry = entry[..open].trim_end();
        if let Some(i) = remark.find("also lists ") {
            let list = remark[i + "also lists ".len()..].trim_end_matches(']');
            for part in split_top(list, ", ") {
                let mut extra = parse_field(part)?.field;
                extra.required = false;
                extras.push(extra);
            }
        }
    }
    let colon = entry
        .find(':')
        .ok_or_else(|| format!("`{entry}` has no `:type`"))?;
    let (name, required) = match entry[..colon].strip_suffix('*') {
        Some(n) => (n, true),
        None => (&entry[..colon], false),
    };
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!("bad field name `{name}`"));
    }
    let (kind, mut rest) = parse_kind(&entry[colon + 1..])?;
    let (mut minimum, mut maximum) = (None, None);
    if let Some(r) = rest.strip_prefix(">=") {
        let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        minimum = Some(parse_int(&r[..end])?);
        rest = &r[end..];
    } else if let Some(r) = rest.strip_prefix(' ')
        && r.starts_with(|c: char| c.is_ascii_digit())
        && let Some(dots) = r.find("..")
    {
        let end = r[dots + 2..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(r.len(), |e| dots + 2 + e);
        minimum = Some(parse_int(&r[..dots])?);
        maximum = Some(parse_int(&r[dots + 2..end])?);
        rest = &r[end..];
    }
    let mut default = None;
    if let Some(r) = rest.strip_prefix('=') {
        let end = if let Some(q) = r.strip_prefix('"') {
            q.find('"')
                .map(|e| e + 2)
                .ok_or("unclosed default string")?
        } else {
            r.find(' ').unwrap_or(r.len())
        };
        default = Some(parse_default(&kind, &r[..end])?);
        rest = &r[end..];
    }
    let mut note = None;
    let mut optional_marker = false;
    let rest = rest.trim();
    if let Some(inner) = rest.strip_prefix('(') {
        let inner = inner
            .strip_suffix(')')
            .ok_or_else(|| format!("unclosed note in `{entry}`"))?;
        if inner == "opt" || inner.starts_with("opt;") {
            optional_marker = true;
        } else if inner != "repeatable" {
            note = Some(inner);
        }
    } else if !rest.is_empty() {
        return Err(format!("unexpected `{rest}` in `{entry}`"));
    }
    Ok(ParsedEntry {
        field: Field {
            name,
            kind,
            required,
            default,
            minimum,
            maximum,
            note,
        },
        optional_marker,
        extras,
    })
}

/// Parses the `body` column.
pub fn parse_body(col: &'static str) -> Result<BodySpec, String> {
    let col = col.trim();
    if col == "-" {
        return Ok(BodySpec::NONE);
    }
    if let Some(inner) = col.strip_prefix("const \"") {
        let end = inner.find('"').ok_or("unclosed body literal")?;
        return Ok(BodySpec {
            kind: BodyKind::Literal(&inner[..end]),
            required: inner[end + 1..].starts_with('*'),
            note: None,
        });
    }
    if col.starts_with("arr<") {
        let end = closing(col, 3, b'<', b'>').ok_or("unclosed arr<")?;
        let items = &col[4..end];
        let rest = col[end + 1..].trim();
        if rest == "*" {
            return Ok(BodySpec {
                kind: BodyKind::Array { items },
                required: true,
                note: None,
            });
        }
        if let Some(alt) = rest.strip_prefix("| $") {
            let (model, tail) = alt.split_once(' ').unwrap_or((alt, ""));
            return Ok(BodySpec {
                kind: BodyKind::ArrayOrObject { items, model },
                required: tail.contains("(required)"),
                note: None,
            });
        }
        return Err(format!("unknown array body `{col}`"));
    }
    if let Some(rest) = col.strip_prefix("obj") {
        let required = rest.starts_with('*');
        let note = rest.find('(').and_then(|o| rest[o + 1..].strip_suffix(')'));
        let min_properties = note
            .and_then(|n| n.split("minProperties ").nth(1))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        return Ok(BodySpec {
            kind: BodyKind::Object {
                model: None,
                fields: Vec::new(),
                min_properties,
            },
            required,
            note,
        });
    }
    if let Some(rest) = col.strip_prefix('$') {
        let end = rest.find(['*', ' ']).unwrap_or(rest.len());
        let model = &rest[..end];
        let tail = rest[end..].trim_start();
        let required = tail.starts_with('*');
        if !required && !tail.contains("(optional)") {
            return Err(format!(
                "body `{col}` is neither required (*) nor (optional)"
            ));
        }
        let mut fields = Vec::new();
        if let (Some(open), Some(close)) = (tail.find('{'), tail.rfind('}')) {
            for part in split_top(&tail[open + 1..close], ", ") {
                fields.push(parse_field(part)?.field);
            }
        }
        return Ok(BodySpec {
            kind: BodyKind::Object {
                model: Some(model),
                fields,
                min_properties: 0,
            },
            required,
            note: None,
        });
    }
    Err(format!("unknown body notation `{col}`"))
}

// ---------------------------------------------------------------------------------------------
// The contract a model reads.

/// A JSON-Schema-like description of what an operation accepts. Serialises to
/// `{operation_id, method, path, allowed_arguments, required_arguments, path_params?, query?,
/// body}`; every node names its `type`, required fields, enum values and ranges.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputContract {
    pub operation_id: &'static str,
    pub method: &'static str,
    pub path: &'static str,
    /// Which of `path_params`, `query`, `body` this operation takes.
    pub allowed_arguments: Vec<&'static str>,
    pub required_arguments: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_params: Option<ObjectContract>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<ObjectContract>,
    pub body: Value,
}

/// The contract of `path_params` or `query`: a closed object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectContract {
    #[serde(rename = "type")]
    pub json_type: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<&'static str>,
    pub fields: Map<String, Value>,
    pub additional_properties: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<&'static str>,
}

pub(crate) const LEGACY_PAGINATION_NOTE: &str = "page (>= 1) and count (1..200) are optional: omit both for the full list; \
     give either to page, the other then defaults (page 1, count 50)";

pub(crate) fn field_contract(f: &Field) -> Value {
    let mut node = Map::new();
    kind_contract(&f.kind, &mut node);
    if let Some(d) = &f.default {
        node.insert("default".into(), d.clone());
    }
    if let Some(m) = f.minimum {
        node.insert("minimum".into(), m.into());
    }
    if let Some(m) = f.maximum {
        node.insert("maximum".into(), m.into());
    }
    if let Some(n) = f.note {
        node.insert("description".into(), n.into());
    }
    Value::Object(node)
}

fn kind_contract(kind: &FieldKind, node: &mut Map<String, Value>) {
    node.insert("type".into(), kind.json_type().into());
    match kind {
        FieldKind::Enum(values) => {
            node.insert("enum".into(), values.clone().into());
        }
        FieldKind::Const(c) => {
            node.insert("const".into(), (*c).into());
        }
        FieldKind::Named(name) => {
            node.insert("format".into(), (*name).into());
        }
        FieldKind::Array(inner) => {
            let mut items = Map::new();
            kind_contract(inner, &mut items);
            node.insert("items".into(), Value::Object(items));
        }
        FieldKind::String | FieldKind::Integer | FieldKind::Number | FieldKind::Boolean => {}
    }
}

pub(crate) fn object_contract(
    fields: &[Field],
    description: Option<&'static str>,
) -> ObjectContract {
    ObjectContract {
        json_type: "object",
        required: fields
            .iter()
            .filter(|f| f.required)
            .map(|f| f.name)
            .collect(),
        fields: fields
            .iter()
            .map(|f| (f.name.to_owned(), field_contract(f)))
            .collect(),
        additional_properties: false,
        description,
    }
}

pub(crate) fn body_contract(body: &BodySpec) -> Value {
    let mut node = Map::new();
    match &body.kind {
        BodyKind::None => {
            node.insert("type".into(), "null".into());
        }
        BodyKind::Object {
            model,
            fields,
            min_properties,
        } => {
            node.insert("type".into(), "object".into());
            if let Some(m) = model {
                node.insert("model".into(), format!("${m}").into());
            }
            let required: Vec<&str> = fields
                .iter()
                .filter(|f| f.required)
                .map(|f| f.name)
                .collect();
            if !required.is_empty() {
                node.insert("required".into(), required.into());
            }
            if !fields.is_empty() {
                let known: Map<String, Value> = fields
                    .iter()
                    .map(|f| (f.name.to_owned(), field_contract(f)))
                    .collect();
                node.insert("fields".into(), Value::Object(known));
            }
            if *min_properties > 0 {
                node.insert("min_properties".into(), (*min_properties).into());
            }
        }
        BodyKind::Array { items } => {
            node.insert("type".into(), "array".into());
            node.insert("items".into(), (*items).into());
        }
        BodyKind::ArrayOrObject { items, model } => {
            node.insert(
                "one_of".into(),
                serde_json::json!([
                    {"type": "array", "items": items},
                    {"type": "object", "model": format!("${model}")},
                ]),
            );
        }
        BodyKind::Literal(s) => {
            node.insert("type".into(), "string".into());
            node.insert("const".into(), (*s).into());
        }
    }
    if !matches!(body.kind, BodyKind::None) {
        node.insert("body_required".into(), body.required.into());
    }
    if let Some(n) = body.note {
        node.insert("description".into(), n.into());
    }
    Value::Object(node)
}
