//! An admin's description of an external MCP server and its validation.

use crate::McpError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How the host talks to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportKind {
    /// A child process speaking MCP on its stdin/stdout.
    Stdio,
    /// An MCP endpoint over streamable HTTP.
    #[serde(alias = "http")]
    StreamableHttp,
}

/// One external server. `env` values and `headers` values are treated as secrets: stored, never
/// shown back ([`ServerConfig::public_view`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// `[a-z0-9-]`, 1–24 characters: tools are named `mcp__<name>__<tool>`.
    pub name: String,
    pub transport: TransportKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Tools (their names on the server) an admin marked as reads; every other tool's effect is
    /// unknown, so it is treated as a write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_tools: Vec<String>,
}

/// Headers the streamable HTTP transport sets itself (an admin's value would break the session).
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// Longest server name (a tool name is at most 64 characters in the function-calling APIs).
pub const MAX_NAME_LEN: usize = 24;

impl ServerConfig {
    /// Parses and validates an admin's JSON; the error names the field, never a value.
    pub fn from_json(v: serde_json::Value) -> Result<Self, McpError> {
        let cfg: ServerConfig =
            serde_json::from_value(v).map_err(|e| McpError::InvalidConfig(shape_error(&e)))?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<(), McpError> {
        let bad = |m: &str| Err(McpError::InvalidConfig(m.to_string()));
        if self.name.is_empty()
            || self.name.len() > MAX_NAME_LEN
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return bad(
                "name must be 1-24 characters of a-z, 0-9 and '-' (tools are named mcp__<name>__<tool>)",
            );
        }
        match self.transport {
            TransportKind::Stdio => {
                if self.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
                    return bad("a stdio server needs a command");
                }
                if self.url.is_some() || !self.headers.is_empty() {
                    return bad("url and headers belong to a streamable_http server");
                }
                if self
                    .env
                    .keys()
                    .any(|k| k.is_empty() || k.contains('=') || k.contains('\0'))
                {
                    return bad("env names must be non-empty and contain neither '=' nor NUL");
                }
            }
            TransportKind::StreamableHttp => {
                let url = self.url.as_deref().unwrap_or_default();
                let parsed = reqwest::Url::parse(url).ok();
                if !parsed.as_ref().is_some_and(|u| {
                    matches!(u.scheme(), "http" | "https")
                        && u.host_str().is_some_and(|h| !h.is_empty())
                }) {
                    return bad(
                        "a streamable_http server needs an http:// or https:// url with a host",
                    );
                }
                if parsed.is_some_and(|u| !u.username().is_empty() || u.password().is_some()) {
                    return bad(
                        "put credentials in headers, not in the url (the url is shown to admins)",
                    );
                }
                if self.command.is_some() || !self.args.is_empty() || !self.env.is_empty() {
                    return bad("command, args and env belong to a stdio server");
                }
                if self.headers.keys().any(|k| {
                    k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                }) {
                    return bad("header names must be non-empty tokens of letters, digits and '-'");
                }
                if let Some(name) = self
                    .headers
                    .keys()
                    .find(|k| RESERVED_HEADERS.iter().any(|r| k.eq_ignore_ascii_case(r)))
                {
                    return Err(McpError::InvalidConfig(format!(
                        "header {name} is set by the MCP transport itself and cannot be configured"
                    )));
                }
                if let Some(name) = self
                    .headers
                    .iter()
                    .find(|(_, v)| http::HeaderValue::from_str(v).is_err())
                    .map(|(k, _)| k)
                {
                    return Err(McpError::InvalidConfig(format!(
                        "the value of header {name} is not a valid HTTP header value (no line breaks or control characters)"
                    )));
                }
            }
        }
        Ok(())
    }

    /// What may be shown back to an admin: everything but the values of `env` and `headers`
    /// (their names are listed).
    pub fn public_view(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "name": self.name,
            "transport": self.transport,
            "read_tools": self.read_tools,
        });
        if let Some(obj) = v.as_object_mut() {
            match self.transport {
                TransportKind::Stdio => {
                    obj.insert("command".into(), self.command.clone().into());
                    obj.insert("args".into(), self.args.clone().into());
                    obj.insert(
                        "env_names".into(),
                        self.env.keys().cloned().collect::<Vec<_>>().into(),
                    );
                }
                TransportKind::StreamableHttp => {
                    obj.insert("url".into(), self.url.clone().into());
                    obj.insert(
                        "header_names".into(),
                        self.headers.keys().cloned().collect::<Vec<_>>().into(),
                    );
                }
            }
        }
        v
    }

    /// Whether an admin marked the server's tool `tool` as a read.
    pub fn is_read(&self, tool: &str) -> bool {
        self.read_tools.iter().any(|t| t == tool)
    }
}

/// A serde error in words that name the field but never echo the value (it may be a secret).
fn shape_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    if text.starts_with("unknown field") || text.starts_with("missing field") {
        return text;
    }
    // serde's messages quote values only in "invalid value/type" errors; keep just the expected
    // part there.
    if let Some(pos) = text.find(", expected") {
        return format!("a field has the wrong type or value;{}", &text[pos + 1..]);
    }
    text
}
